/**
 * The detection fiber (decisions §14): every ANOMALY_INTERVAL_SECONDS on the Effect Clock it runs
 * the windowed rules of each developer whose pass is due. Developers are claimed in batches with
 * FOR UPDATE SKIP LOCKED and a lease (as the webhook worker claims deliveries), so instances share
 * the work and never pass over one developer at once; a pass cut short by a crash is claimed again
 * when its lease runs out, and since a pass counts only evidence newer than what an alert holds, a
 * repeated pass raises nothing twice.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer } from "effect"
import { Config } from "../Config.ts"
import { nowMillis } from "../platform/Time.ts"
import { Anomalies } from "./Service.ts"

export const LEASE_MS = 120_000
const BATCH = 50

/** Claims up to BATCH due developers and runs their passes; the number claimed. */
export const runDuePasses = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const config = yield* Config
  const anomalies = yield* Anomalies
  const ms = yield* nowMillis
  const now = new Date(ms)
  // every developer has a row (new ones are due at once)
  yield* sql`INSERT INTO anomaly_runs (developer_id, next_run_at)
             SELECT d.id, ${now} FROM developers d WHERE NOT EXISTS (SELECT 1 FROM anomaly_runs r WHERE r.developer_id = d.id)
             ON CONFLICT DO NOTHING`
  const claimed = yield* sql<{ developerId: string }>`
    UPDATE anomaly_runs SET lease_until = ${new Date(ms + LEASE_MS)}
    WHERE developer_id IN (
      SELECT developer_id FROM anomaly_runs
      WHERE next_run_at <= ${now} AND (lease_until IS NULL OR lease_until <= ${now})
      ORDER BY next_run_at LIMIT ${BATCH} FOR UPDATE SKIP LOCKED)
    RETURNING developer_id`
  for (const { developerId } of claimed) {
    yield* anomalies.detect(developerId).pipe(
      Effect.catchAllCause((cause) =>
        Effect.logWarning("anomaly pass failed").pipe(Effect.annotateLogs({ developerId, cause: String(cause).slice(0, 300) })))
    )
    const done = new Date(yield* nowMillis)
    yield* sql`UPDATE anomaly_runs SET last_run_at = ${done}, lease_until = NULL,
                 next_run_at = ${new Date(done.getTime() + config.anomalies.intervalSeconds * 1000)}
               WHERE developer_id = ${developerId}`
  }
  return claimed.length
})

export const WorkerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* Config
    const round = runDuePasses.pipe(
      Effect.catchAllCause((cause) =>
        Effect.as(Effect.logWarning("anomaly round failed").pipe(Effect.annotateLogs({ cause: String(cause).slice(0, 500) })), 0))
    )
    yield* Effect.gen(function*() {
      for (;;) {
        // a full batch means more are due: take the next at once
        if ((yield* round) >= BATCH) continue
        yield* Effect.sleep(Duration.seconds(config.anomalies.intervalSeconds))
      }
    }).pipe(Effect.forkScoped)
  })
)
