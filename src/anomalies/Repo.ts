/**
 * Anomaly SQL (decisions §14): settings, rule rows, and alerts deduplicated by their fingerprint
 * (developer, rule, subject). `upsertAlert` is the one statement that opens an alert or counts one
 * more occurrence; alerts are never deleted.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { CursorPosition } from "../platform/Pagination.ts"
import type { Mode, RuleRow, Severity } from "./Rules.ts"

export interface OffHours {
  readonly start: string
  readonly end: string
  readonly days: ReadonlyArray<number>
  readonly timeZone: string
}

export interface Settings {
  readonly mode: Mode
  readonly allowList: ReadonlyArray<string>
  readonly offHours: OffHours | null
  readonly updatedAt: Date | null
}

export const DEFAULT_SETTINGS: Settings = { mode: "monitor", allowList: [], offHours: null, updatedAt: null }

export interface AlertRow {
  readonly id: string
  readonly developerId: string
  readonly ruleId: string
  readonly ruleName: string
  readonly severity: Severity
  readonly status: "open" | "acknowledged" | "resolved"
  readonly subject: string
  readonly agentId: string | null
  readonly principalId: string | null
  readonly occurrences: number
  readonly firstSeenAt: Date
  readonly lastSeenAt: Date
  readonly evidenceAt: Date
  readonly description: string
  readonly context: Record<string, unknown>
  readonly response: "none" | "suspended_agent" | "revoked_grants"
  readonly responseRefs: ReadonlyArray<string>
  readonly acknowledgedAt: Date | null
  readonly resolvedAt: Date | null
  readonly note: string | null
  readonly createdAt: Date
}

/** what a windowed rule found for one subject; `evidenceAt` is the newest fact that triggered it */
export interface Finding {
  readonly subject: string
  readonly agentId: string | null
  readonly principalId: string | null
  readonly description: string
  readonly context: Record<string, unknown>
  readonly evidenceAt: Date
}

/** a finding (its `evidenceAt`: the newest triggering fact) raised under a rule */
export interface RaiseInput extends Finding {
  readonly id: string
  readonly developerId: string
  readonly ruleId: string
  readonly ruleName: string
  readonly severity: Severity
  /** inline: every call is one more occurrence; windowed: only evidence newer than the alert's counts */
  readonly inline: boolean
  readonly now: Date
}

const ALERT_COLUMNS = ["id", "developer_id", "rule_id", "rule_name", "severity", "status", "subject", "agent_id", "principal_id",
  "occurrences", "first_seen_at", "last_seen_at", "evidence_at", "description", "context", "response", "response_refs",
  "acknowledged_at", "resolved_at", "note", "created_at"].join(", ")

export interface AlertFilters {
  readonly status?: string | undefined
  readonly severity?: string | undefined
  readonly agentId?: string | undefined
  readonly ruleId?: string | undefined
  readonly since?: Date | undefined
}

export const makeRepo = (sql: SqlClient.SqlClient) => {
  const q = <A extends object = any>(text: string, params: ReadonlyArray<unknown> = []) => sql.unsafe<A>(text, params as any)

  const settings = (developerId: string) =>
    Effect.map(
      q<{ mode: Mode; allowList: Array<string>; offHours: OffHours | null; updatedAt: Date }>(
        `SELECT mode, allow_list, off_hours, updated_at FROM anomaly_settings WHERE developer_id = $1`,
        [developerId]
      ),
      ([row]): Settings => row ?? DEFAULT_SETTINGS
    )

  const saveSettings = (developerId: string, s: Settings, at: Date) =>
    q(`INSERT INTO anomaly_settings (developer_id, mode, allow_list, off_hours, updated_at) VALUES ($1, $2, $3, $4::jsonb, $5)
       ON CONFLICT (developer_id) DO UPDATE SET mode = EXCLUDED.mode, allow_list = EXCLUDED.allow_list,
         off_hours = EXCLUDED.off_hours, updated_at = EXCLUDED.updated_at`,
    [developerId, s.mode, [...s.allowList], s.offHours === null ? null : JSON.stringify(s.offHours), at])

  const ruleRows = (developerId: string) =>
    q<RuleRow>(`SELECT rule_id, built_in, name, description, condition, severity, response, threshold, enabled, alert_channels,
                       created_at, updated_at
                FROM anomaly_rules WHERE developer_id = $1 ORDER BY created_at, rule_id`, [developerId])

  const upsertAlert = (r: RaiseInput) =>
    q<AlertRow & { inserted: boolean }>(
      `WITH seen AS (
         SELECT 1 FROM anomaly_alerts WHERE NOT $13::boolean AND developer_id = $2 AND rule_id = $3 AND subject = $6
           AND status = 'resolved' AND evidence_at >= $11 LIMIT 1
       )
       INSERT INTO anomaly_alerts (id, developer_id, rule_id, rule_name, severity, status, subject, agent_id, principal_id,
         occurrences, first_seen_at, last_seen_at, evidence_at, description, context, created_at)
       SELECT $1, $2, $3, $4, $5, 'open', $6, $7, $8, 1, $11, $11, $11, $9, $10::jsonb, $12
       WHERE NOT EXISTS (SELECT 1 FROM seen)
       ON CONFLICT (developer_id, rule_id, subject) WHERE status <> 'resolved'
       DO UPDATE SET occurrences = anomaly_alerts.occurrences + 1,
         last_seen_at = greatest(anomaly_alerts.last_seen_at, EXCLUDED.last_seen_at),
         evidence_at = greatest(anomaly_alerts.evidence_at, EXCLUDED.evidence_at),
         description = EXCLUDED.description, context = EXCLUDED.context
       WHERE $13::boolean OR anomaly_alerts.evidence_at < EXCLUDED.evidence_at
       RETURNING ${ALERT_COLUMNS}, (xmax = 0) AS inserted`,
      [r.id, r.developerId, r.ruleId, r.ruleName, r.severity, r.subject, r.agentId, r.principalId, r.description,
        JSON.stringify(r.context), r.evidenceAt, r.now, r.inline]
    ).pipe(Effect.map(([row]) => row))

  const setResponse = (id: string, response: AlertRow["response"], refs: ReadonlyArray<string>) =>
    q(`UPDATE anomaly_alerts SET response = $2, response_refs = (SELECT array_agg(DISTINCT x) FROM unnest(response_refs || $3::text[]) x)
       WHERE id = $1`, [id, response, [...refs]])

  const findAlert = (developerId: string, id: string) =>
    Effect.map(q<AlertRow>(`SELECT ${ALERT_COLUMNS} FROM anomaly_alerts WHERE id = $1 AND developer_id = $2`, [id, developerId]), ([r]) => r)

  /** newest first, after the cursor; limit + 1 rows */
  const listAlerts = (developerId: string, f: AlertFilters, limit: number, after: CursorPosition | undefined) => {
    const where = ["developer_id = $1"]
    const params: Array<unknown> = [developerId]
    const add = (clause: (n: number) => string, value: unknown) => {
      params.push(value)
      where.push(clause(params.length))
    }
    if (f.status !== undefined) add((n) => `status = $${n}`, f.status)
    if (f.severity !== undefined) add((n) => `severity = $${n}`, f.severity)
    if (f.agentId !== undefined) add((n) => `agent_id = $${n}`, f.agentId)
    if (f.ruleId !== undefined) add((n) => `rule_id = $${n}`, f.ruleId)
    if (f.since !== undefined) add((n) => `last_seen_at >= $${n}`, f.since)
    if (after !== undefined) {
      params.push(new Date(after.createdAt), after.id)
      where.push(`(created_at, id) < ($${params.length - 1}, $${params.length})`)
    }
    params.push(limit + 1)
    return q<AlertRow>(`SELECT ${ALERT_COLUMNS} FROM anomaly_alerts WHERE ${where.join(" AND ")}
                        ORDER BY created_at DESC, id DESC LIMIT $${params.length}`, params)
  }

  /** the alert, locked (its transition is decided by the caller in the same transaction) */
  const lockAlert = (developerId: string, id: string) =>
    Effect.map(q<AlertRow>(`SELECT ${ALERT_COLUMNS} FROM anomaly_alerts WHERE id = $1 AND developer_id = $2 FOR UPDATE`, [id, developerId]), ([r]) => r)

  const setStatus = (id: string, to: "acknowledged" | "resolved", note: string | undefined, at: Date) =>
    Effect.map(
      q<AlertRow>(
        `UPDATE anomaly_alerts SET status = $2,
           acknowledged_at = CASE WHEN $2 = 'acknowledged' THEN $4 ELSE acknowledged_at END,
           resolved_at = CASE WHEN $2 = 'resolved' THEN $4 ELSE resolved_at END,
           note = coalesce($3, note)
         WHERE id = $1 RETURNING ${ALERT_COLUMNS}`,
        [id, to, note ?? null, at]
      ),
      ([row]) => row!
    )

  const metrics = (developerId: string, since: Date, agentId: string | undefined) =>
    q<{ status: string; severity: string; n: number }>(
      `SELECT status, severity, count(*)::int AS n FROM anomaly_alerts
       WHERE developer_id = $1 AND last_seen_at >= $2 AND ($3::text IS NULL OR agent_id = $3) GROUP BY status, severity`,
      [developerId, since, agentId ?? null]
    )

  return { q, settings, saveSettings, ruleRows, upsertAlert, setResponse, findAlert, listAlerts, lockAlert, setStatus, metrics }
}

export type Repo = ReturnType<typeof makeRepo>
