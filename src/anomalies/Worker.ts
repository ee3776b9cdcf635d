/**
 * The detection fiber (decisions §14, revised): every ANOMALY_INTERVAL_SECONDS on the Effect Clock
 * it runs the windowed rules of each developer whose pass is due. Each developer is claimed by its
 * own lease (platform/Leases.ts) just before its pass and the lease is renewed while the pass runs,
 * so two instances never run one developer's pass at once however slow it is; a pass cut short by
 * a crash is claimed again when its lease runs out. An alert is raised once for one burst however
 * often the same rows are passed over (the fiber, POST /v1/anomalies/detect): an occurrence counts
 * only evidence newer than what the alert holds (Detectors.ts).
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer } from "effect"
import { Config } from "../Config.ts"
import { heldSql, withLease } from "../platform/Leases.ts"
import { nowMillis } from "../platform/Time.ts"
import { Anomalies } from "./Service.ts"

export const LEASE_KIND = "anomaly.pass"
export const LEASE_MS = 120_000
const BATCH = 50

/** Runs the passes of up to BATCH due developers, each under its own lease; the number run. */
export const runDuePasses = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const config = yield* Config
  const anomalies = yield* Anomalies
  const now = new Date(yield* nowMillis)
  // every developer has a row (new ones are due at once)
  yield* sql`INSERT INTO anomaly_runs (developer_id, next_run_at)
             SELECT d.id, ${now} FROM developers d WHERE NOT EXISTS (SELECT 1 FROM anomaly_runs r WHERE r.developer_id = d.id)
             ON CONFLICT DO NOTHING`
  const due = yield* sql.unsafe<{ developerId: string }>(
    `SELECT developer_id FROM anomaly_runs r
     WHERE next_run_at <= $1 AND NOT ${heldSql("$2", "r.developer_id", "$1")}
     ORDER BY next_run_at LIMIT $3`,
    [now, LEASE_KIND, BATCH] as any
  )
  let run = 0
  for (const { developerId } of due) {
    const outcome = yield* withLease(LEASE_KIND, developerId, { leaseMs: LEASE_MS, recurring: true }, () =>
      Effect.gen(function*() {
        // another instance may have passed over this developer since the list was read
        const still = yield* sql`SELECT 1 FROM anomaly_runs WHERE developer_id = ${developerId} AND next_run_at <= ${now}`
        if (still.length === 0) return false
        yield* anomalies.detect(developerId)
        return true
      }))
    if (outcome._tag === "Failed") {
      yield* Effect.logWarning("anomaly pass failed").pipe(Effect.annotateLogs({ developerId, error: outcome.error }))
    }
    if (outcome._tag === "Busy" || outcome._tag === "Lost" || (outcome._tag === "Done" && !outcome.value)) continue
    // a failed pass waits for the next interval too (its error is logged and kept on the lease)
    const done = new Date(yield* nowMillis)
    yield* sql`UPDATE anomaly_runs SET last_run_at = ${done},
                 next_run_at = ${new Date(done.getTime() + config.anomalies.intervalSeconds * 1000)}
               WHERE developer_id = ${developerId}`
    run++
  }
  return run
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
