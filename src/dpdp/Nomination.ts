/**
 * Nomination (decisions §21, ours, minimal; DPDP Act s.14): a data principal names who may exercise
 * their rights on their death or incapacity. `PUT` sets or replaces it (200), `DELETE` removes it
 * (204, 404 when there is none); shown in the access summary; `dpdp.nomination.updated` and an
 * audit entry on each change. The developer authenticates the nominee and acts for them with the
 * same API.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { AuditChain } from "../platform/AuditChain.ts"
import { BadRequest, NotFound } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"

export interface NominationRow {
  readonly id: string
  readonly dataPrincipalId: string
  readonly nomineePrincipalId: string
  readonly effectiveOn: string
  readonly createdAt: Date
  readonly updatedAt: Date
}

export const nominationView = (n: NominationRow) => ({
  nominationId: n.id,
  dataPrincipalId: n.dataPrincipalId,
  nomineePrincipalId: n.nomineePrincipalId,
  effectiveOn: n.effectiveOn,
  createdAt: new Date(n.createdAt).toISOString(),
  updatedAt: new Date(n.updatedAt).toISOString()
})

const PRINCIPAL = /^[^\u0000-\u001f\u007f]{1,256}$/

/** the nomination of one principal, or undefined (read in the caller's transaction) */
export const readNomination = (developerId: string, principalId: string) =>
  Effect.map(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<NominationRow>`SELECT id, data_principal_id, nominee_principal_id, effective_on, created_at, updated_at
                           FROM dpdp_nominations WHERE developer_id = ${developerId} AND data_principal_id = ${principalId}`),
    (rows) => rows[0]
  )

export const makeNominations = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const audit = yield* AuditChain
  const events = yield* Events

  const changed = (developerId: string, principalId: string, nominationId: string, change: "set" | "removed") =>
    Effect.zipRight(
      events.emit(developerId, "dpdp.nomination.updated", { nominationId, change }),
      audit.append({ developerId, action: "service.dpdp.nomination_changed", principalId, metadata: { nominationId, change } })
    )

  const set = (developerId: string, principalId: string, body: unknown) =>
    Effect.gen(function*() {
      const b = (body ?? {}) as Record<string, unknown>
      const details: Array<{ path: string; message: string }> = []
      const extra = Object.keys(b).filter((k) => k !== "nomineePrincipalId" && k !== "effectiveOn")
      for (const k of extra) details.push({ path: k, message: "is not a field of a nomination" })
      const nominee = b.nomineePrincipalId
      if (typeof nominee !== "string" || !PRINCIPAL.test(nominee)) details.push({ path: "nomineePrincipalId", message: "must be 1 to 256 characters, no control characters" })
      else if (nominee === principalId) details.push({ path: "nomineePrincipalId", message: "must be another person than the data principal" })
      if (b.effectiveOn !== "death_or_incapacity") details.push({ path: "effectiveOn", message: "must be \"death_or_incapacity\"" })
      if (!PRINCIPAL.test(principalId)) details.push({ path: "principalId", message: "must be 1 to 256 characters, no control characters" })
      if (details.length > 0) return yield* Effect.fail(new BadRequest({ message: "The nomination is not valid", details }))
      return yield* sql.withTransaction(Effect.gen(function*() {
        const at = new Date(yield* nowMillis)
        const [row] = yield* sql<NominationRow>`
          INSERT INTO dpdp_nominations (id, developer_id, data_principal_id, nominee_principal_id, effective_on, created_at, updated_at)
          VALUES (${newId("nom", at.getTime())}, ${developerId}, ${principalId}, ${nominee as string}, 'death_or_incapacity', ${at}, ${at})
          ON CONFLICT (developer_id, data_principal_id) DO UPDATE SET nominee_principal_id = EXCLUDED.nominee_principal_id, updated_at = EXCLUDED.updated_at
          RETURNING id, data_principal_id, nominee_principal_id, effective_on, created_at, updated_at`
        yield* changed(developerId, principalId, row!.id, "set")
        return nominationView(row!)
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

  const remove = (developerId: string, principalId: string) =>
    sql.withTransaction(Effect.gen(function*() {
      const [row] = yield* sql<{ id: string }>`
        DELETE FROM dpdp_nominations WHERE developer_id = ${developerId} AND data_principal_id = ${principalId} RETURNING id`
      if (row === undefined) return yield* Effect.fail(new NotFound({ message: "No nomination for this data principal" }))
      yield* changed(developerId, principalId, row.id, "removed")
    })).pipe(Effect.catchTag("SqlError", Effect.die))

  return { set, remove }
})
