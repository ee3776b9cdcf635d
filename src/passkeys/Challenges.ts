/**
 * WebAuthn challenges: every ceremony starts with a stored challenge (5 minutes on the Effect
 * Clock), consumed by one atomic UPDATE before its response is checked, so it is single-use even
 * when the attempt fails and two racing attempts cannot both pass. Old rows are deleted by the
 * cleanup fiber (./Cleanup.ts).
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { InvalidChallenge, PasskeyVerificationFailed } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"

export const CHALLENGE_TTL_MS = 5 * 60 * 1000

export interface ChallengeRow {
  readonly id: string
  readonly developerId: string
  readonly kind: "registration" | "authentication"
  readonly challenge: string
  readonly principalId: string
  readonly authRequestId: string | null
}

export const invalidChallenge = () =>
  new InvalidChallenge({ message: "The challenge is unknown, expired or already used; request new options" })
export const verificationFailed = (reason: string) => new PasskeyVerificationFailed({ message: `Passkey verification failed: ${reason}` })

export const makeChallenges = (sql: SqlClient.SqlClient) => {
  const storeChallenge = (row: Omit<ChallengeRow, "id"> & { readonly userId?: string }) =>
    Effect.gen(function*() {
      const ms = yield* nowMillis
      const id = newId("wac", ms)
      yield* sql`INSERT INTO webauthn_challenges (id, developer_id, kind, challenge, principal_id, auth_request_id, user_id, expires_at, created_at)
                 VALUES (${id}, ${row.developerId}, ${row.kind}, ${row.challenge}, ${row.principalId}, ${row.authRequestId},
                         ${row.userId ?? null}, ${new Date(ms + CHALLENGE_TTL_MS)}, ${new Date(ms)})`
      return id
    }).pipe(Effect.orDie)

  /** marks the challenge used (atomically) and returns it; undefined when it cannot be used */
  const consumeChallenge = (developerId: string, challengeId: string, kind: ChallengeRow["kind"]) =>
    Effect.gen(function*() {
      const at = new Date(yield* nowMillis)
      const rows = yield* sql<ChallengeRow>`
        UPDATE webauthn_challenges SET used_at = ${at}
        WHERE id = ${challengeId} AND developer_id = ${developerId} AND kind = ${kind}
          AND used_at IS NULL AND expires_at > ${at}
        RETURNING id, developer_id, kind, challenge, principal_id, auth_request_id`
      return rows[0]
    }).pipe(Effect.orDie)

  return { storeChallenge, consumeChallenge }
}
