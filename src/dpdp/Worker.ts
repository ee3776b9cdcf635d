/**
 * The grievance clock (decisions §21), on only with DPDP_GRIEVANCE_DEADLINE_ALERTS_ENABLED=true, polling
 * every DPDP_BREACH_ALERT_INTERVAL_SECONDS on the Effect Clock (TestClock drives it) like the breach
 * deadline fiber (breaches/Worker.ts). For each open grievance it emits `dpdp.grievance.due` at
 * `target_missed` (past expectedResolutionBy), `statutory_approaching` (DPDP_GRIEVANCE_ALERT_LEAD_DAYS
 * before statutoryDueAt) and `statutory_overdue` (past it). An alert row keyed by (grievance, stage,
 * due time) is inserted in the transaction of the event and the audit entry, so each is sent once
 * across instances; a grievance first seen past its statutory time gets only the overdue alert.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer } from "effect"
import { Config } from "../Config.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { Events } from "../platform/Events.ts"
import { nowMillis } from "../platform/Time.ts"

type Stage = "target_missed" | "statutory_approaching" | "statutory_overdue"

/** One pass: returns the alerts it emitted. Tests drive it directly. */
export const alertGrievanceDeadlines = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const config = yield* Config
  const events = yield* Events
  const audit = yield* AuditChain
  const ms = yield* nowMillis
  const now = new Date(ms)
  const leadMs = config.breaches.grievanceAlertLeadDays * 86_400_000
  // only the grievances owed an alert now (the same rules as below), so alerted ones cost nothing
  const owed = yield* sql<{ id: string; developerId: string; referenceNumber: string; expectedResolutionBy: Date; statutoryDueAt: Date }>`
    SELECT g.id, g.developer_id, g.reference_number, g.expected_resolution_by, g.statutory_due_at FROM dpdp_grievances g
    WHERE g.status IN ('submitted', 'under_review') AND (
      (g.expected_resolution_by < ${now} AND NOT EXISTS (SELECT 1 FROM dpdp_grievance_deadline_alerts a
         WHERE a.grievance_id = g.id AND a.stage = 'target_missed' AND a.due_at = g.expected_resolution_by))
      OR (g.statutory_due_at <= ${new Date(ms + leadMs)} AND NOT EXISTS (SELECT 1 FROM dpdp_grievance_deadline_alerts a
         WHERE a.grievance_id = g.id AND a.due_at = g.statutory_due_at
           AND a.stage = CASE WHEN g.statutory_due_at < ${now} THEN 'statutory_overdue' ELSE 'statutory_approaching' END)))
    ORDER BY g.statutory_due_at, g.id LIMIT 1000`.pipe(Effect.orDie)
  const emitted: Array<{ grievanceId: string; stage: Stage }> = []
  for (const g of owed) {
    const due: Array<[Stage, Date]> = []
    if (ms > g.expectedResolutionBy.getTime()) due.push(["target_missed", g.expectedResolutionBy])
    if (ms > g.statutoryDueAt.getTime()) due.push(["statutory_overdue", g.statutoryDueAt])
    else if (ms >= g.statutoryDueAt.getTime() - leadMs) due.push(["statutory_approaching", g.statutoryDueAt])
    for (const [stage, dueAt] of due) {
      const sent = yield* sql.withTransaction(Effect.gen(function*() {
        // the claim: only the instance whose insert lands sends the alert
        const claimed = yield* sql`
          INSERT INTO dpdp_grievance_deadline_alerts (grievance_id, stage, due_at, created_at)
          VALUES (${g.id}, ${stage}, ${dueAt}, ${now}) ON CONFLICT DO NOTHING RETURNING grievance_id`
        if (claimed.length === 0) return false
        const data = { grievanceId: g.id, referenceNumber: g.referenceNumber, stage, dueAt: dueAt.toISOString() }
        yield* events.emit(g.developerId, "dpdp.grievance.due", data)
        yield* audit.append({ developerId: g.developerId, action: "service.dpdp.grievance_deadline_alerted", metadata: data })
        return true
      })).pipe(Effect.orDie)
      if (!sent) continue
      emitted.push({ grievanceId: g.id, stage })
      yield* Effect.logInfo("grievance deadline alert sent").pipe(
        Effect.annotateLogs({ grievanceId: g.id, developerId: g.developerId, stage, dueAt: dueAt.toISOString() })
      )
    }
  }
  return emitted
})

export const WorkerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* Config
    if (!config.breaches.grievanceAlertsEnabled) return
    yield* Effect.gen(function*() {
      for (;;) {
        yield* alertGrievanceDeadlines.pipe(
          Effect.catchAllCause((cause) => Effect.logWarning("grievance deadline pass failed").pipe(Effect.annotateLogs({ cause: String(cause).slice(0, 500) })))
        )
        yield* Effect.sleep(Duration.seconds(config.breaches.alertIntervalSeconds))
      }
    }).pipe(Effect.forkScoped)
  })
)
