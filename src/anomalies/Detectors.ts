/**
 * The windowed rules (decisions §14): one SQL statement each, over one developer's rows, by the
 * (developer, time) indexes (sql/0014, 0023, 0026), never a full scan. Each answers findings with
 * the time of the newest fact that triggered them (`evidenceAt`): an alert counts one more
 * occurrence only for evidence newer than what it already counted, so a pass over rows already
 * passed over (the fiber and POST /v1/anomalies/detect) raises nothing twice; the passes of one
 * developer never overlap (Worker.ts: one lease per developer).
 */
import { Effect } from "effect"
import type { Finding, Repo, Settings } from "./Repo.ts"
import { type Condition, type EffectiveRule, WINDOWS } from "./Rules.ts"

export type { Finding } from "./Repo.ts"

export interface PassContext {
  readonly repo: Repo
  readonly developerId: string
  readonly now: Date
  readonly settings: Settings
  readonly maxDelegationDepth: number
}

type Detector = (ctx: PassContext, rule: EffectiveRule) => Effect.Effect<ReadonlyArray<Finding>, unknown>

const ago = (now: Date, ms: number) => new Date(now.getTime() - ms)
const MINUTE = 60_000
const HOUR = 3_600_000
const DAY = 86_400_000
/** how far back the "something new appeared" rules look; dedup makes a longer look harmless */
const LOOKBACK = DAY

const perAgent = (agentId: string, description: string, context: Record<string, unknown>, evidenceAt: Date): Finding => ({
  subject: agentId, agentId, principalId: null, description, context, evidenceAt
})

/**
 * AD-001 on sliding windows: every grant of the look-back is the end of one window (its count the
 * grants in the `windowMinutes` up to it), so a burst that straddles two passes is seen by the
 * second in full. The newest window above the threshold is the finding (its last grant the
 * evidence): a pass over the same rows again finds the same evidence and counts nothing.
 */
const velocity: Detector = ({ repo, developerId, now }, rule) => {
  const windowMs = (rule.threshold.windowMinutes ?? 5) * MINUTE
  const minimum = rule.threshold.minimum ?? 20
  const factor = rule.threshold.medianFactor ?? 10
  const buckets = Math.max(1, Math.floor((7 * DAY) / windowMs))
  // longer than any pass interval in use; the dedup by evidence makes a longer look harmless
  const since = ago(now, Math.max(HOUR, 3 * windowMs))
  return Effect.map(
    repo.q<{ agentId: string; n: number; last: Date; median: number }>(
      `WITH recent AS (
         SELECT agent_id, created_at,
                count(*) OVER (PARTITION BY agent_id ORDER BY created_at
                               RANGE BETWEEN ($6 * interval '1 millisecond' - interval '1 microsecond') PRECEDING AND CURRENT ROW)::int AS n
         FROM grants WHERE developer_id = $1 AND created_at > $2::timestamptz - $6 * interval '1 millisecond' AND created_at <= $3
       ),
       candidates AS (SELECT DISTINCT agent_id FROM recent WHERE created_at > $2 AND n > $4),
       baseline AS (
         SELECT c.agent_id, m.median FROM candidates c
         CROSS JOIN LATERAL (
           SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY coalesce(k.n, 0)), 0)::float8 AS median
           FROM generate_series(0, $5::int - 1) AS b(i)
           LEFT JOIN (
             SELECT floor(extract(epoch FROM ($2::timestamptz - g.created_at)) * 1000 / $6)::int AS i, count(*) AS n FROM grants g
             WHERE g.developer_id = $1 AND g.agent_id = c.agent_id AND g.created_at <= $2 AND g.created_at > $2::timestamptz - interval '7 days'
             GROUP BY 1
           ) k ON k.i = b.i
         ) m
       )
       SELECT DISTINCT ON (r.agent_id) r.agent_id, r.n, r.created_at AS last, b.median
       FROM recent r JOIN baseline b ON b.agent_id = r.agent_id
       WHERE r.created_at > $2 AND r.n > greatest($4::float8, $7 * b.median)
       ORDER BY r.agent_id, r.created_at DESC`,
      [developerId, since, now, minimum, buckets, windowMs, factor]
    ),
    (rows) =>
      rows.map((r) =>
        perAgent(r.agentId, `${r.n} grants for agent ${r.agentId} in ${windowMs / MINUTE} minutes (7-day median ${Number(r.median)})`,
          { grants: r.n, median: Number(r.median), windowMinutes: windowMs / MINUTE }, r.last))
  )
}

const newNetwork: Detector = ({ repo, developerId, now }, rule) => {
  const days = rule.threshold.days ?? 30
  return Effect.map(
    repo.q<{ agentId: string; network: string; firstSeenAt: Date }>(
      `SELECT n.agent_id, n.network, n.first_seen_at FROM anomaly_networks n
       WHERE n.developer_id = $1 AND n.first_seen_at > $2
         AND EXISTS (SELECT 1 FROM anomaly_networks o WHERE o.developer_id = n.developer_id AND o.agent_id = n.agent_id
                     AND o.network <> n.network AND o.first_seen_at < n.first_seen_at
                     AND o.last_seen_at > n.first_seen_at - make_interval(days => $3))
       ORDER BY n.first_seen_at`,
      [developerId, ago(now, LOOKBACK), days]
    ),
    (rows) => rows.map((r) =>
      perAgent(r.agentId, `Agent ${r.agentId} used a token from network ${r.network}, not seen for it in ${days} days`,
        { network: r.network, days }, r.firstSeenAt))
  )
}

/** SQL: whether `column` (timestamptz) falls in the off-hours window; parameters $3…$6 */
const IN_OFF_HOURS = (column: string) => `(
  extract(isodow FROM ${column} AT TIME ZONE $3)::int = ANY($6::int[]) AND (
    CASE WHEN $4::int < $5::int
      THEN (extract(hour FROM ${column} AT TIME ZONE $3) * 60 + extract(minute FROM ${column} AT TIME ZONE $3)) >= $4
       AND (extract(hour FROM ${column} AT TIME ZONE $3) * 60 + extract(minute FROM ${column} AT TIME ZONE $3)) < $5
      ELSE (extract(hour FROM ${column} AT TIME ZONE $3) * 60 + extract(minute FROM ${column} AT TIME ZONE $3)) >= $4
        OR (extract(hour FROM ${column} AT TIME ZONE $3) * 60 + extract(minute FROM ${column} AT TIME ZONE $3)) < $5 END))`

const minutesOf = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5))

const offHours: Detector = ({ repo, developerId, now, settings }, rule) => {
  const window = settings.offHours
  if (window === null) return Effect.succeed([])
  return Effect.map(
    repo.q<{ agentId: string; n: number; last: Date }>(
      `SELECT agent_id, count(*)::int AS n, max(created_at) AS last FROM (
         SELECT agent_id, created_at FROM grants WHERE developer_id = $1 AND created_at > $2
         UNION ALL
         SELECT agent_id, created_at FROM audit_log WHERE developer_id = $1 AND created_at > $2 AND agent_id IS NOT NULL
       ) x WHERE ${IN_OFF_HOURS("created_at")}
       GROUP BY agent_id HAVING count(*) >= $7`,
      [developerId, ago(now, LOOKBACK), window.timeZone, minutesOf(window.start), minutesOf(window.end), [...window.days],
        rule.threshold.count ?? 1]
    ),
    (rows) => rows.map((r) =>
      perAgent(r.agentId, `${r.n} grants or audit entries of agent ${r.agentId} in off-hours (${window.start}-${window.end} ${window.timeZone})`,
        { activity: r.n, offHours: window }, r.last))
  )
}

const delegationDepth: Detector = ({ repo, developerId, now, maxDelegationDepth }) =>
  Effect.map(
    repo.q<{ id: string; agentId: string; principalId: string; delegationDepth: number; createdAt: Date; prior: number | null }>(
      `SELECT g.id, g.agent_id, g.principal_id, g.delegation_depth, g.created_at,
              (SELECT max(p.delegation_depth) FROM grants p
               WHERE p.developer_id = g.developer_id AND p.agent_id = g.agent_id AND p.created_at < g.created_at) AS prior
       FROM grants g WHERE g.developer_id = $1 AND g.created_at > $2 AND g.delegation_depth > 0 ORDER BY g.created_at`,
      [developerId, ago(now, LOOKBACK)]
    ),
    (rows) => rows.filter((r) => r.delegationDepth >= maxDelegationDepth || (r.prior !== null && r.delegationDepth > r.prior)).map((r) =>
      perAgent(r.agentId,
        r.delegationDepth >= maxDelegationDepth
          ? `Agent ${r.agentId} received a grant at the maximum delegation depth (${r.delegationDepth})`
          : `Agent ${r.agentId} received a grant at delegation depth ${r.delegationDepth}, deeper than its ${r.prior} before`,
        { grantId: r.id, delegationDepth: r.delegationDepth, previousMaximum: r.prior, maximum: maxDelegationDepth }, r.createdAt))
  )

/** AD-007 on sliding windows (decisions §14, revised): each spend ends one window; the newest window at the threshold is the finding */
const budgetCliff: Detector = ({ repo, developerId, now }, rule) => {
  const windowMs = (rule.threshold.windowMinutes ?? 60) * MINUTE
  const percent = rule.threshold.percent ?? 90
  const since = ago(now, Math.max(HOUR, windowMs))
  return Effect.map(
    repo.q<{ allocationId: string; grantId: string; agentId: string; principalId: string; spent: string; initial: string; last: Date }>(
      `WITH spent AS (
         SELECT t.allocation_id, t.created_at,
                sum(t.amount) OVER (PARTITION BY t.allocation_id ORDER BY t.created_at
                                    RANGE BETWEEN ($4 * interval '1 millisecond' - interval '1 microsecond') PRECEDING AND CURRENT ROW) AS spent
         FROM budget_transactions t
         WHERE t.developer_id = $1 AND t.created_at > $2::timestamptz - $4 * interval '1 millisecond' AND t.created_at <= $5
       )
       SELECT DISTINCT ON (s.allocation_id) s.allocation_id, a.grant_id, g.agent_id, g.principal_id, s.spent::text AS spent,
              a.initial_budget::text AS initial, s.created_at AS last
       FROM spent s JOIN budget_allocations a ON a.id = s.allocation_id JOIN grants g ON g.id = a.grant_id
       WHERE s.created_at > $2 AND s.spent * 100 >= a.initial_budget * $3
       ORDER BY s.allocation_id, s.created_at DESC`,
      [developerId, since, percent, windowMs, now]
    ),
    (rows) => rows.map((r) => ({
      subject: r.allocationId, agentId: r.agentId, principalId: r.principalId,
      description: `${r.spent} of the ${r.initial} budget of grant ${r.grantId} spent within ${windowMs / MINUTE} minutes`,
      context: { allocationId: r.allocationId, grantId: r.grantId, spent: Number(r.spent), initialBudget: Number(r.initial) },
      evidenceAt: r.last
    }))
  )
}

const staleBundle: Detector = ({ repo, developerId, now }, rule) => {
  const hours = rule.threshold.hours ?? 72
  return Effect.map(
    repo.q<{ id: string; agentId: string; userId: string; lastSync: Date }>(
      `SELECT id, agent_id, user_id, coalesce(last_sync_at, created_at) AS last_sync FROM consent_bundles
       WHERE developer_id = $1 AND status = 'active' AND coalesce(last_sync_at, created_at) < $2`,
      [developerId, ago(now, hours * HOUR)]
    ),
    (rows) => rows.map((r) => ({
      subject: r.id, agentId: r.agentId, principalId: r.userId,
      description: `Consent bundle ${r.id} has not synced for ${hours} hours`,
      context: { bundleId: r.id, lastSyncAt: r.lastSync.toISOString(), hours },
      evidenceAt: new Date(r.lastSync.getTime() + hours * HOUR)
    }))
  )
}

const rateSpike: Detector = ({ repo, developerId, now }, rule) =>
  Effect.map(
    repo.q<{ agentId: string; n: number; last: Date }>(
      `SELECT agent_id, count(*)::int AS n, max(created_at) AS last FROM audit_log
       WHERE developer_id = $1 AND created_at > $2 AND agent_id IS NOT NULL GROUP BY agent_id HAVING count(*) > $3`,
      [developerId, ago(now, HOUR), rule.threshold.count ?? 50]
    ),
    (rows) => rows.map((r) => perAgent(r.agentId, `${r.n} audit actions by agent ${r.agentId} in the last hour`, { actions: r.n }, r.last))
  )

const highFailureRate: Detector = ({ repo, developerId, now }, rule) =>
  Effect.map(
    repo.q<{ agentId: string; total: number; failed: number; last: Date }>(
      `SELECT agent_id, count(*)::int AS total, count(*) FILTER (WHERE status IN ('failure', 'blocked'))::int AS failed,
              max(created_at) FILTER (WHERE status IN ('failure', 'blocked')) AS last
       FROM audit_log WHERE developer_id = $1 AND created_at > $2 AND agent_id IS NOT NULL GROUP BY agent_id
       HAVING count(*) >= $3 AND count(*) FILTER (WHERE status IN ('failure', 'blocked')) * 100 > count(*) * $4`,
      [developerId, ago(now, DAY), rule.threshold.minimum ?? 5, rule.threshold.percent ?? 20]
    ),
    (rows) => rows.map((r) =>
      perAgent(r.agentId, `${r.failed} of ${r.total} audit entries of agent ${r.agentId} failed or were blocked in 24 hours`,
        { total: r.total, failed: r.failed }, r.last))
  )

const newPrincipal: Detector = ({ repo, developerId, now }) =>
  Effect.map(
    repo.q<{ agentId: string; principalId: string; createdAt: Date }>(
      `SELECT g.agent_id, g.principal_id, min(g.created_at) AS created_at FROM grants g
       WHERE g.developer_id = $1 AND g.created_at > $2
         AND NOT EXISTS (SELECT 1 FROM grants p WHERE p.developer_id = g.developer_id AND p.agent_id = g.agent_id
                         AND p.principal_id = g.principal_id AND p.created_at <= $2)
       GROUP BY g.agent_id, g.principal_id`,
      [developerId, ago(now, LOOKBACK)]
    ),
    (rows) => rows.map((r) => ({
      subject: `${r.agentId}|${r.principalId}`, agentId: r.agentId, principalId: r.principalId,
      description: `First grant of agent ${r.agentId} for principal ${r.principalId}`, context: {}, evidenceAt: r.createdAt
    }))
  )

const offHoursUtc: Detector = ({ repo, developerId, now }, rule) =>
  Effect.map(
    repo.q<{ agentId: string; n: number; last: Date }>(
      `SELECT agent_id, count(*)::int AS n, max(created_at) AS last FROM audit_log
       WHERE developer_id = $1 AND created_at > $2 AND agent_id IS NOT NULL
         AND (extract(hour FROM created_at AT TIME ZONE 'UTC') >= 22 OR extract(hour FROM created_at AT TIME ZONE 'UTC') < 6)
       GROUP BY agent_id HAVING count(*) > $3`,
      [developerId, ago(now, DAY), rule.threshold.count ?? 10]
    ),
    (rows) => rows.map((r) => perAgent(r.agentId, `${r.n} audit entries of agent ${r.agentId} between 22:00 and 06:00 UTC`, { entries: r.n }, r.last))
  )

/** a custom rule's rows: (agent, principal, time) of each counted event, with the filter's columns */
const SOURCES: Record<string, { from: string; scopes: string | null; status: string | null }> = {
  "token.issued": {
    from: `SELECT data->>'agentId' AS agent_id, data->>'principalId' AS principal_id, created_at,
             ARRAY(SELECT jsonb_array_elements_text(data->'scopes')) AS scopes, NULL::text AS status
           FROM events WHERE developer_id = $1 AND type = 'token.issued' AND created_at > $2`,
    scopes: "scopes", status: null
  },
  "vault.exchanged": {
    from: `SELECT data->>'agentId' AS agent_id, data->>'principalId' AS principal_id, created_at, NULL::text[] AS scopes, NULL::text AS status
           FROM events WHERE developer_id = $1 AND type = 'vault.credential.exchanged' AND created_at > $2`,
    scopes: null, status: null
  },
  "authorize.requested": {
    from: `SELECT agent_id, principal_id, created_at, scopes, NULL::text AS status FROM auth_requests WHERE developer_id = $1 AND created_at > $2`,
    scopes: "scopes", status: null
  },
  "audit.logged": {
    from: `SELECT agent_id, principal_id, created_at, NULL::text[] AS scopes, status FROM audit_log WHERE developer_id = $1 AND created_at > $2`,
    scopes: null, status: "status"
  }
}

/** whether the condition's filter applies to its event (scopesAny needs scopes, status needs audit entries) */
export const filterProblem = (c: Condition): string | undefined => {
  const source = SOURCES[c.event]
  if (c.filter?.scopesAny !== undefined && source !== undefined && source.scopes === null) return `filter.scopesAny does not apply to ${c.event}`
  if (c.filter?.status !== undefined && c.event !== "audit.logged") return `filter.status applies to audit.logged only`
  return undefined
}

/**
 * A custom rule on sliding windows (decisions §14, revised), as AD-001: every counted event of the
 * look-back ends one window of the rule's length, so a burst that straddles two passes is seen by
 * the second in full; the newest window at or above the threshold is the finding, its last event the
 * evidence (a pass over the same rows finds the same evidence and counts nothing).
 */
export const customRule = (ctx: PassContext, rule: EffectiveRule): Effect.Effect<ReadonlyArray<Finding>, unknown> => {
  const c = rule.condition
  const source = c === null ? undefined : SOURCES[c.event]
  if (c === null || source === undefined || c.groupBy === "ip") return Effect.succeed([])
  const key = c.groupBy === "agent" ? "agent_id" : "principal_id"
  const windowMs = WINDOWS[c.window] * 1000
  // windows ending in the last hour (longer than any pass interval in use), or the last window for a
  // longer rule: a 24 h rule reads two days of its events, not four
  const since = ago(ctx.now, Math.max(HOUR, windowMs))
  return Effect.map(
    ctx.repo.q<{ key: string; n: number; last: Date }>(
      `WITH counted AS (
         SELECT ${key} AS key, created_at,
                count(*) OVER (PARTITION BY ${key} ORDER BY created_at
                               RANGE BETWEEN ($8 * interval '1 millisecond' - interval '1 microsecond') PRECEDING AND CURRENT ROW)::int AS n
         FROM (${source.from}) e
         WHERE ${key} IS NOT NULL AND ($3::text IS NULL OR agent_id = $3) AND ($4::text[] IS NULL OR scopes && $4::text[])
           AND ($5::text IS NULL OR status = $5) AND created_at <= $9
       )
       SELECT DISTINCT ON (key) key, n, created_at AS last FROM counted
       WHERE created_at > $7 AND n >= $6
       ORDER BY key, created_at DESC`,
      [ctx.developerId, new Date(since.getTime() - windowMs), c.filter?.agentId ?? null,
        c.filter?.scopesAny === undefined ? null : [...c.filter.scopesAny], c.filter?.status ?? null, c.threshold, since, windowMs, ctx.now]
    ),
    (rows) => rows.map((r) => ({
      subject: r.key, agentId: c.groupBy === "agent" ? r.key : null, principalId: c.groupBy === "principal" ? r.key : null,
      description: `${r.n} ${c.event} events for ${c.groupBy} ${r.key} within ${c.window} (threshold ${c.threshold})`,
      context: { event: c.event, count: r.n, window: c.window, threshold: c.threshold }, evidenceAt: r.last
    }))
  )
}

export const DETECTORS: Record<string, Detector> = {
  "AD-001": velocity,
  "AD-003": newNetwork,
  "AD-004": offHours,
  "AD-005": delegationDepth,
  "AD-007": budgetCliff,
  "AD-010": staleBundle,
  rate_spike: rateSpike,
  high_failure_rate: highFailureRate,
  new_principal: newPrincipal,
  off_hours_activity: offHoursUtc
}
