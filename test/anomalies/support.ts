/**
 * Shared steps of the anomaly tests (decisions §14): a developer with an agent, grants at TestClock time, alerts and events read back;
 * and for the channel tests, `anomaly.detected` emitted through the outbox as the detectors do.
 */
import { Effect } from "effect"
import { Grants } from "../../src/grants/Service.ts"
import { Events } from "../../src/platform/Events.ts"
import type { TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"

/** a Monday, noon UTC */
export const START = Date.parse("2026-11-23T12:00:00.000Z")

export const ENV = {
  RATE_LIMIT_SCALE: "1000",
  RATE_LIMIT_AUTHORIZE_PER_DEVELOPER: "100000",
  // one proxy hop: X-Forwarded-For names the client, as behind a load balancer
  TRUST_PROXY: "1",
  ANOMALY_INTERVAL_SECONDS: "300",
  WEBHOOK_POLL_INTERVAL_SECONDS: "3600000",
  COMPLIANCE_JOB_POLL_SECONDS: "3600000",
  DPDP_BREACH_ALERT_INTERVAL_SECONDS: "3600000"
}

export interface Tenant {
  readonly apiKey: string
  readonly developerId: string
  readonly agentId: string
}

export const tenant = async (app: TestApp, scopes = ["email:read", "calendar:read"]): Promise<Tenant> => {
  const { apiKey, developerId } = await app.signup({ mode: "sandbox", plan: "enterprise" })
  return { apiKey, developerId, agentId: await createAgent(app, developerId, scopes) }
}

/** a grant created now (TestClock), through the grants service (grant.created emitted) */
export const grant = (
  app: TestApp,
  t: { developerId: string; agentId: string },
  o: { principalId?: string; parentGrantId?: string; delegationDepth?: number; agentId?: string } = {}
) =>
  app.run(Effect.gen(function*() {
    const grants = yield* Grants
    const ms = yield* Effect.clockWith((c) => c.currentTimeMillis)
    return yield* grants.create({
      developerId: t.developerId,
      agentId: o.agentId ?? t.agentId,
      principalId: o.principalId ?? "user_1",
      scopes: ["email:read"],
      expiresAt: new Date(ms + 30 * 86_400_000), approvalMethod: "developer", policyId: null,
      parentGrantId: o.parentGrantId ?? null,
      delegationDepth: o.delegationDepth ?? 0
    })
  }))

/** a grant with a signed token (for verify and reuse scenarios) */
export const grantWithToken = (app: TestApp, t: Tenant, agentId = t.agentId) =>
  app.run(Effect.gen(function*() {
    const grants = yield* Grants
    const ms = yield* Effect.clockWith((c) => c.currentTimeMillis)
    const g = yield* grants.create({
      developerId: t.developerId, agentId, principalId: "user_1", scopes: ["email:read"], expiresAt: new Date(ms + 30 * 86_400_000), approvalMethod: "developer", policyId: null
    })
    return { grant: g, token: yield* grants.issueToken(g) }
  }))

export const detect = async (app: TestApp, t: Tenant) => {
  const res = await app.request("POST", "/v1/anomalies/detect", { apiKey: t.apiKey })
  if (res.status !== 200) throw new Error(`detect: ${res.status} ${res.text}`)
  return res.body
}

export const alerts = async (app: TestApp, t: Tenant, query = "") => {
  const res = await app.request("GET", `/v1/anomaly/alerts${query}`, { apiKey: t.apiKey })
  if (res.status !== 200) throw new Error(`alerts: ${res.status} ${res.text}`)
  return res.body.data as Array<any>
}

export const ruleAlerts = async (app: TestApp, t: Tenant, ruleId: string) => alerts(app, t, `?ruleId=${encodeURIComponent(ruleId)}`)

export const eventsOf = (app: TestApp, t: Tenant, type: string) =>
  app.query<{ data: any }>(`SELECT data FROM events WHERE developer_id = $1 AND type = $2 ORDER BY created_at, (data->>'occurrences')::int NULLS FIRST, id`, [t.developerId, type])
    .then((rows) => rows.map((r) => r.data))

export const settings = async (app: TestApp, t: Tenant, body: Record<string, unknown>) => {
  const res = await app.request("PUT", "/v1/anomaly/settings", { apiKey: t.apiKey, body })
  if (res.status !== 200) throw new Error(`settings: ${res.status} ${res.text}`)
  return res.body
}

export const patchRule = async (app: TestApp, t: Tenant, ruleId: string, body: Record<string, unknown>) => {
  const res = await app.request("PATCH", `/v1/anomaly/rules/${ruleId}`, { apiKey: t.apiKey, body })
  if (res.status !== 200) throw new Error(`rule: ${res.status} ${res.text}`)
  return res.body
}

/** audit entries written straight to the table (the windowed rules read rows; the chain is not their concern) */
export const auditRows = (app: TestApp, t: Tenant, n: number, at: number, status = "success", agentId = t.agentId) =>
  app.query(
    `INSERT INTO audit_log (id, developer_id, seq, agent_id, action, status, timestamp, hash, created_at)
     SELECT 'alog_t' || md5(random()::text), $1, coalesce((SELECT max(seq) FROM audit_log WHERE developer_id = $1), 0) + i, $2,
            'email.read', $3, $4, md5(i::text), $5
     FROM generate_series(1, $6) AS i`,
    [t.developerId, agentId, status, new Date(at).toISOString(), new Date(at), n]
  )

/** an active consent bundle for a grant, last synced at `syncedAt` */
export const bundleRow = async (app: TestApp, t: Tenant, grantId: string, syncedAt: number) => {
  const id = `bundle_t${Math.random().toString(36).slice(2, 12)}`
  await app.query(
    `INSERT INTO consent_bundles (id, developer_id, agent_id, user_id, scopes, grant_id, offline_ttl_seconds, offline_expires_at,
                                  status, checkpoint_at, created_at, updated_at, last_sync_at)
     VALUES ($1, $2, $3, 'user_1', '{email:read}', $4, 86400, $5, 'active', 0, $5, $5, $5)`,
    [id, t.developerId, t.agentId, grantId, new Date(syncedAt)]
  )
  return id
}

/** the service's clock (TestClock) */
export const clockNow = (app: TestApp) => app.run(Effect.clockWith((c) => c.currentTimeMillis))

export interface AlertData {
  readonly alertId: string
  readonly ruleId: string
  readonly severity: "low" | "medium" | "high" | "critical"
  readonly agentId: string | null
  readonly occurrences: number
}

let n = 0
export const alertData = (overrides: Partial<AlertData> = {}): AlertData => ({
  alertId: `anm_01JDQ9ZZ${String(++n).padStart(18, "0")}`,
  ruleId: "AD-002",
  severity: "high",
  agentId: "ag_01JDQ90A1B2C3D4E5F6G7H8J9K",
  occurrences: 3,
  ...overrides
})

export const emitAlert = (app: TestApp, developerId: string, data: AlertData = alertData()) =>
  app.run(Effect.flatMap(Events, (e) => e.emit(developerId, "anomaly.detected", { ...data })))

export const addChannel = (app: TestApp, apiKey: string, body: Record<string, unknown>) =>
  app.request("POST", "/v1/anomaly/channels", { apiKey, body })
