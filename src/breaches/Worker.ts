/**
 * The Board-deadline fiber (decisions §8), on only with DPDP_BREACH_DEADLINE_ALERTS_ENABLED=true.
 * Every DPDP_BREACH_ALERT_INTERVAL_SECONDS (Effect Clock) it looks at breaches whose detailed report
 * is still owed and emits dpdp.breach.board_report_due at the `approaching` stage (from the lead
 * time before the due time) and at `overdue` (once past it). An alert row keyed by
 * (breach, stage, due time) is inserted in the same transaction as the event and the audit entry,
 * so each stage is alerted once per due time across all instances, and afresh when it moves.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer, Option } from "effect"
import { Config } from "../Config.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { Events } from "../platform/Events.ts"
import { Metrics } from "../platform/Metrics.ts"
import { nowMillis } from "../platform/Time.ts"
import { BOARD_REPORT_HOURS, dueAt } from "./Service.ts"

/** One pass: returns the alerts it emitted. Tests drive it directly. */
export const alertDeadlines = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const config = yield* Config
  const events = yield* Events
  const audit = yield* AuditChain
  const metrics = Option.getOrUndefined(yield* Effect.serviceOption(Metrics))
  const ms = yield* nowMillis
  const leadMs = config.breaches.alertLeadMinutes * 60_000
  // Only the breaches owed an alert now: due within the lead time and this stage not yet alerted for
  // this due time (the same rule as dueAt), so a pass does no work per breach already alerted.
  const now = new Date(ms)
  const owed = yield* sql<{ id: string; developerId: string; awareAt: Date; extension: any }>`
    SELECT id, developer_id, aware_at, extension FROM (
      SELECT id, developer_id, aware_at, extension,
             CASE WHEN extension->>'granted' = 'true' AND extension->>'newDueAt' IS NOT NULL
                  THEN (extension->>'newDueAt')::timestamptz ELSE aware_at + make_interval(hours => ${BOARD_REPORT_HOURS}) END AS due
      FROM breaches WHERE board_detailed_report_sent_at IS NULL AND status <> 'closed'
    ) o
    WHERE o.due <= ${new Date(ms + leadMs)}
      AND NOT EXISTS (SELECT 1 FROM breach_deadline_alerts a
                      WHERE a.breach_id = o.id AND a.due_at = o.due AND a.stage = CASE WHEN o.due < ${now} THEN 'overdue' ELSE 'approaching' END)`.pipe(Effect.orDie)
  const emitted: Array<{ breachId: string; stage: "approaching" | "overdue" }> = []
  for (const breach of owed) {
    const due = dueAt(breach)
    const stage = ms > due.getTime() ? "overdue" as const : ms >= due.getTime() - leadMs ? "approaching" as const : undefined
    if (stage === undefined) continue
    const sent = yield* sql.withTransaction(Effect.gen(function*() {
      // the claim: only the instance whose insert lands sends the alert
      const claimed = yield* sql`
        INSERT INTO breach_deadline_alerts (breach_id, stage, due_at, created_at)
        VALUES (${breach.id}, ${stage}, ${due}, ${new Date(ms)}) ON CONFLICT DO NOTHING RETURNING breach_id`
      if (claimed.length === 0) return false
      const data = { breachId: breach.id, stage, overdue: stage === "overdue", boardDetailedReportDueAt: due.toISOString() }
      yield* events.emit(breach.developerId, "dpdp.breach.board_report_due", data)
      yield* audit.append({ developerId: breach.developerId, action: "service.dpdp.breach_deadline_alerted", metadata: data })
      return true
    })).pipe(Effect.orDie)
    if (!sent) continue
    emitted.push({ breachId: breach.id, stage })
    // committed: an operator sees it in the log and on /metrics
    metrics?.inc("breach_alerts_sent_total", { stage })
    yield* Effect.logInfo("breach deadline alert sent").pipe(
      Effect.annotateLogs({ breachId: breach.id, developerId: breach.developerId, stage, dueAt: due.toISOString() })
    )
  }
  return emitted
})

export const WorkerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* Config
    if (!config.breaches.deadlineAlertsEnabled) return
    yield* Effect.gen(function*() {
      for (;;) {
        yield* alertDeadlines.pipe(
          Effect.catchAllCause((cause) => Effect.logWarning("breach deadline pass failed").pipe(Effect.annotateLogs({ cause: String(cause).slice(0, 500) })))
        )
        yield* Effect.sleep(Duration.seconds(config.breaches.alertIntervalSeconds))
      }
    }).pipe(Effect.forkScoped)
  })
)
