/**
 * The passkey cleanup fiber (decisions §17): every 10 minutes (Effect Clock) it deletes WebAuthn
 * challenges that expired or were used more than an hour ago, and passkeys soft-deleted more than
 * 30 days ago, plus expired principal sessions. Each pass deletes in bounded batches of rows it
 * locks with SKIP LOCKED, so instances running it at once share the work and never wait on each
 * other; a crash loses nothing (the next pass finds what is left).
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer } from "effect"
import { nowMillis } from "../platform/Time.ts"
import { DELETED_KEPT_MS } from "./Credentials.ts"

export const CLEANUP_INTERVAL = Duration.minutes(10)
export const CHALLENGE_KEPT_MS = 3600_000
const BATCH = 1000

/** One pass; returns what it deleted. Tests drive it directly or through the fiber on TestClock. */
export const cleanupPass = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const ms = yield* nowMillis
  const hourAgo = new Date(ms - CHALLENGE_KEPT_MS)
  const batches = (statement: Effect.Effect<ReadonlyArray<unknown>, unknown>) =>
    Effect.gen(function*() {
      let total = 0
      for (;;) {
        const n = (yield* statement).length
        total += n
        if (n < BATCH) return total
      }
    })
  const challenges = yield* batches(sql`
    DELETE FROM webauthn_challenges WHERE id IN (
      SELECT id FROM webauthn_challenges WHERE expires_at < ${hourAgo} OR used_at < ${hourAgo}
      LIMIT ${BATCH} FOR UPDATE SKIP LOCKED) RETURNING id`)
  const credentials = yield* batches(sql`
    DELETE FROM webauthn_credentials WHERE id IN (
      SELECT id FROM webauthn_credentials WHERE deleted_at < ${new Date(ms - DELETED_KEPT_MS)}
      LIMIT ${BATCH} FOR UPDATE SKIP LOCKED) RETURNING id`)
  const sessions = yield* batches(sql`
    DELETE FROM principal_sessions WHERE id IN (
      SELECT id FROM principal_sessions WHERE expires_at < ${hourAgo}
      LIMIT ${BATCH} FOR UPDATE SKIP LOCKED) RETURNING id`)
  return { challenges, credentials, sessions }
}).pipe(Effect.orDie)

export const ChallengeCleanupLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    for (;;) {
      yield* Effect.sleep(CLEANUP_INTERVAL)
      yield* cleanupPass.pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("passkey cleanup pass failed").pipe(Effect.annotateLogs({ cause: String(cause).slice(0, 500) })))
      )
    }
  }).pipe(Effect.forkScoped)
)
