/**
 * The DCR cleanup fiber (decisions §22.3): every 10 minutes (Effect Clock) it deletes the dynamically
 * registered clients that have not completed an authorization within 24 hours of registering (the
 * agent is soft-deleted, as DELETE /v1/agents does, so its client id stops working). Bounded batches
 * of rows locked with SKIP LOCKED: instances running it at once share the work and never wait.
 * The same fiber drops CIMD document copies past their 24 h of grace (no step may use them any more).
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer } from "effect"
import { nowMillis } from "../platform/Time.ts"
import { CIMD_STALE_GRACE_MS } from "./CimdDocument.ts"

export const DCR_CLEANUP_INTERVAL = Duration.minutes(10)
export const DCR_UNUSED_KEPT_MS = 24 * 3600_000
const BATCH = 1000

/** One pass; the agent ids it deleted. */
export const dcrCleanupPass = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const ms = yield* nowMillis
  const deleted: Array<string> = []
  for (;;) {
    const rows = yield* sql<{ id: string }>`
      UPDATE agents SET deleted_at = ${new Date(ms)}, status = 'suspended', updated_at = ${new Date(ms)}
      WHERE id IN (
        SELECT a.id FROM oauth_clients c JOIN agents a ON a.id = c.agent_id
        WHERE c.origin = 'dcr' AND c.authorized_at IS NULL AND c.created_at < ${new Date(ms - DCR_UNUSED_KEPT_MS)} AND a.deleted_at IS NULL
        LIMIT ${BATCH} FOR UPDATE OF a SKIP LOCKED)
      RETURNING id`
    deleted.push(...rows.map((r) => r.id))
    if (rows.length < BATCH) return deleted
  }
}).pipe(Effect.orDie)

/** One pass over the CIMD copies; how many it dropped. */
export const cimdCopiesCleanupPass = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const ms = yield* nowMillis
  const rows = yield* sql`DELETE FROM oauth_cimd_documents WHERE fresh_until < ${new Date(ms - CIMD_STALE_GRACE_MS)} RETURNING url`
  return rows.length
}).pipe(Effect.orDie)

export const DcrCleanupLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    for (;;) {
      yield* Effect.sleep(DCR_CLEANUP_INTERVAL)
      yield* Effect.zip(dcrCleanupPass, cimdCopiesCleanupPass).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("DCR cleanup pass failed").pipe(Effect.annotateLogs({ cause: String(cause).slice(0, 500) })))
      )
    }
  }).pipe(Effect.forkScoped)
)
