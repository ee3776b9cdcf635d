/**
 * The DPDP fiber (decisions §21), every DPDP_FIBER_INTERVAL_SECONDS on the Effect Clock (TestClock
 * drives it): scheduled erasures (`dpdp.erasure.due` 48 hours before, the erasure at its time; each
 * claimed FOR UPDATE SKIP LOCKED, so instances share the work) and the purge of one-year log holds
 * past `heldUntil` (`dpdp.erasure.hold_purged`); retention: records past `retentionUntil` and grievances
 * resolved longer ago than `consentRecordRetentionDays` are deleted (their audit entries remain, with
 * their digests).
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer } from "effect"
import { Config } from "../Config.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { Events } from "../platform/Events.ts"
import { nowMillis } from "../platform/Time.ts"
import { makeErasure } from "./Erasure.ts"

/** the holds past their time, deleted with their event and audit entry */
export const purgeHolds = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const events = yield* Events
  const audit = yield* AuditChain
  const now = new Date(yield* nowMillis)
  return yield* sql.withTransaction(Effect.gen(function*() {
    const purged = yield* sql<{ erasureId: string; developerId: string }>`
      DELETE FROM dpdp_erasure_holds WHERE erasure_id IN (
        SELECT erasure_id FROM dpdp_erasure_holds WHERE held_until <= ${now} ORDER BY held_until LIMIT 1000 FOR UPDATE SKIP LOCKED)
      RETURNING erasure_id, developer_id`
    for (const hold of [...purged].sort((a, b) => a.erasureId.localeCompare(b.erasureId))) {
      yield* events.emit(hold.developerId, "dpdp.erasure.hold_purged", { requestId: hold.erasureId })
      yield* audit.append({ developerId: hold.developerId, action: "service.dpdp.erasure_hold_purged", metadata: { requestId: hold.erasureId } })
    }
    return purged.length
  }))
}).pipe(Effect.orDie)

/** records past retentionUntil and grievances resolved longer ago than the retention days, deleted (1,000 a pass) */
export const applyRetention = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const now = new Date(yield* nowMillis)
  return yield* sql.withTransaction(Effect.gen(function*() {
    const records = (yield* sql<{ id: string }>`
      SELECT id FROM dpdp_consent_records WHERE retention_until <= ${now} ORDER BY retention_until, id LIMIT 1000 FOR UPDATE SKIP LOCKED`).map((r) => r.id)
    if (records.length > 0) {
      yield* sql`UPDATE dpdp_grievances SET record_id = NULL WHERE record_id IN ${sql.in(records)}`
      yield* sql`DELETE FROM dpdp_consent_record_grants WHERE record_id IN ${sql.in(records)}`
      yield* sql`DELETE FROM dpdp_consent_records WHERE id IN ${sql.in(records)}`
    }
    const grievances = (yield* sql<{ id: string }>`
      SELECT g.id FROM dpdp_grievances g LEFT JOIN dpdp_settings s ON s.developer_id = g.developer_id
      WHERE g.status = 'resolved' AND g.resolved_at + make_interval(days => coalesce(s.consent_record_retention_days, 2555)) <= ${now}
      ORDER BY g.resolved_at, g.id LIMIT 1000 FOR UPDATE OF g SKIP LOCKED`).map((g) => g.id)
    if (grievances.length > 0) {
      yield* sql`DELETE FROM dpdp_grievance_history WHERE grievance_id IN ${sql.in(grievances)}`
      yield* sql`DELETE FROM dpdp_grievance_deadline_alerts WHERE grievance_id IN ${sql.in(grievances)}`
      yield* sql`DELETE FROM dpdp_grievances WHERE id IN ${sql.in(grievances)}`
    }
    return { recordsDeleted: records.length, grievancesDeleted: grievances.length }
  }))
}).pipe(Effect.orDie)

/** One pass. Tests drive it directly. */
export const dpdpFiberPass = Effect.gen(function*() {
  const erasure = yield* makeErasure
  const scheduled = yield* erasure.runDue
  const purged = yield* purgeHolds
  const retention = yield* applyRetention
  return { ...scheduled, purged, ...retention }
})

export const ErasureWorkerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* Config
    yield* Effect.gen(function*() {
      for (;;) {
        yield* dpdpFiberPass.pipe(
          Effect.catchAllCause((cause) => Effect.logWarning("DPDP fiber pass failed").pipe(Effect.annotateLogs({ cause: String(cause).slice(0, 500) })))
        )
        yield* Effect.sleep(Duration.seconds(config.breaches.dpdpFiberIntervalSeconds))
      }
    }).pipe(Effect.forkScoped)
  })
)
