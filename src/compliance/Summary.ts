/**
 * GET /v1/compliance/summary (decisions §15): counts over the window (grants by issue time, audit
 * entries by time); agents, breaches and bundles as they stand. One statement per table.
 * `policies` counts the developer's rules and `directory` its SCIM users, read through those
 * capabilities' services; `anomalies` counts open alerts (§14).
 */
import { Effect } from "effect"
import type { ComplianceService } from "./Service.ts"
import { iso, type Window } from "./Params.ts"

const BOARD_REPORT_HOURS = 72

export const summaryOf = (svc: ComplianceService, developer: { id: string; plan: string }, window: Window, nowMs: number) =>
  Effect.gen(function*() {
    const repo = svc.repo
    const now = new Date(nowMs)
    const range = (column: string, params: Array<unknown>) => {
      let where = ""
      if (window.since !== undefined) { params.push(window.since); where += ` AND ${column} >= $${params.length}` }
      if (window.until !== undefined) { params.push(window.until); where += ` AND ${column} <= $${params.length}` }
      return where
    }
    const [agents] = yield* repo.q<any>(`
      SELECT count(*) AS total,
             count(*) FILTER (WHERE deleted_at IS NULL AND status = 'active') AS active,
             count(*) FILTER (WHERE deleted_at IS NULL AND status = 'suspended') AS suspended,
             count(*) FILTER (WHERE deleted_at IS NOT NULL) AS revoked
      FROM agents WHERE developer_id = $1`, [developer.id])
    const gp: Array<unknown> = [developer.id, now]
    const [grants] = yield* repo.q<any>(`
      SELECT count(*) AS total,
             count(*) FILTER (WHERE status = 'active' AND expires_at > $2) AS active,
             count(*) FILTER (WHERE status = 'revoked') AS revoked,
             count(*) FILTER (WHERE status = 'active' AND expires_at <= $2) AS expired
      FROM grants WHERE developer_id = $1${range("issued_at", gp)}`, gp)
    const ap: Array<unknown> = [developer.id]
    const [audit] = yield* repo.q<any>(`
      SELECT count(*) AS total,
             count(*) FILTER (WHERE status = 'success') AS success,
             count(*) FILTER (WHERE status = 'failure') AS failure,
             count(*) FILTER (WHERE status = 'blocked') AS blocked
      FROM audit_log WHERE developer_id = $1${range("created_at", ap)}`, ap)
    const [breaches] = yield* repo.q<any>(`
      SELECT count(*) FILTER (WHERE status <> 'closed') AS open,
             count(*) FILTER (WHERE status <> 'closed' AND board_detailed_report_sent_at IS NULL
                                AND aware_at + make_interval(hours => ${BOARD_REPORT_HOURS}) < $2) AS overdue
      FROM breaches WHERE developer_id = $1`, [developer.id, now])
    const [bundles] = yield* repo.q<any>(`
      SELECT count(*) FILTER (WHERE status = 'active') AS active, count(*) FILTER (WHERE status = 'revoked') AS revoked
      FROM consent_bundles WHERE developer_id = $1`, [developer.id])
    const [anomalies] = yield* repo.q<any>(`SELECT count(*) AS open FROM anomaly_alerts WHERE developer_id = $1 AND status = 'open'`, [developer.id])
    // decisions §21: consent records (expired = active past processingExpiresAt), open and overdue grievances, erasures
    const [dpdp] = yield* repo.q<any>(`
      SELECT (SELECT count(*) FROM dpdp_consent_records WHERE developer_id = $1 AND status = 'active' AND processing_expires_at > $2) AS active,
             (SELECT count(*) FROM dpdp_consent_records WHERE developer_id = $1 AND status = 'withdrawn') AS withdrawn,
             (SELECT count(*) FROM dpdp_consent_records WHERE developer_id = $1 AND status = 'active' AND processing_expires_at <= $2) AS expired,
             (SELECT count(*) FROM dpdp_consent_records WHERE developer_id = $1 AND status = 'erased') AS erased,
             (SELECT count(*) FROM dpdp_grievances WHERE developer_id = $1 AND status IN ('submitted', 'under_review')) AS open_grievances,
             (SELECT count(*) FROM dpdp_grievances WHERE developer_id = $1 AND status IN ('submitted', 'under_review') AND statutory_due_at < $2) AS overdue_grievances,
             (SELECT count(*) FROM dpdp_erasures WHERE developer_id = $1 AND status IN ('scheduled', 'processing')) AS erasures_processing,
             (SELECT count(*) FROM dpdp_erasures WHERE developer_id = $1 AND status = 'completed') AS erasures_completed`, [developer.id, now])
    const policies = yield* svc.policies(developer.id)
    const directory = yield* svc.directoryCounts(developer.id)
    const n = (v: unknown) => Number(v ?? 0)
    return {
      generatedAt: now.toISOString(),
      since: iso(window.since),
      until: iso(window.until),
      agents: { total: n(agents.total), active: n(agents.active), suspended: n(agents.suspended), revoked: n(agents.revoked) },
      grants: { total: n(grants.total), active: n(grants.active), revoked: n(grants.revoked), expired: n(grants.expired) },
      auditEntries: { total: n(audit.total), success: n(audit.success), failure: n(audit.failure), blocked: n(audit.blocked) },
      policies: { total: policies.length },
      plan: developer.plan,
      breaches: { open: n(breaches.open), overdue: n(breaches.overdue) },
      consentBundles: { active: n(bundles.active), revoked: n(bundles.revoked) },
      directory,
      anomalies: { open: n(anomalies.open) },
      dpdp: {
        consentRecords: { active: n(dpdp.active), withdrawn: n(dpdp.withdrawn), expired: n(dpdp.expired), erased: n(dpdp.erased) },
        grievances: { open: n(dpdp.openGrievances), overdue: n(dpdp.overdueGrievances) },
        erasures: { processing: n(dpdp.erasuresProcessing), completed: n(dpdp.erasuresCompleted) }
      }
    }
  })

export type Summary = Effect.Effect.Success<ReturnType<typeof summaryOf>>
