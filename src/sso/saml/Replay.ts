/**
 * Single use of SAML assertion ids (decisions §12; sql/0025): the first claim of an id for a
 * connection wins, in any instance (the primary key decides); a claim whose row is past its time
 * takes the row over. Rows past their time are purged on the way. Times come from Effect's Clock.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export const claimAssertionId = (o: {
  readonly connectionId: string
  readonly assertionId: string
  readonly retainUntilMs: number
  readonly nowMs: number
}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = new Date(o.nowMs)
    yield* sql`DELETE FROM sso_saml_assertions WHERE expires_at <= ${now}`
    const rows = yield* sql<{ claimed: number }>`
      INSERT INTO sso_saml_assertions (connection_id, assertion_id, expires_at)
      VALUES (${o.connectionId}, ${o.assertionId}, ${new Date(o.retainUntilMs)})
      ON CONFLICT (connection_id, assertion_id) DO UPDATE SET expires_at = EXCLUDED.expires_at
        WHERE sso_saml_assertions.expires_at <= ${now}
      RETURNING 1 AS claimed`
    return rows.length === 1
  })
