/**
 * Responses (decisions §14): in enforce mode a rule's response revokes the agent's grants or
 * suspends it through the part-one paths (cascade to delegated grants, consent bundles revoked,
 * `grant.revoked` per grant, then `anomaly.auto_revoked`); monitor mode raises the same alert and
 * changes nothing. The response's own revocations never count as a mass revocation (AD-006). An
 * alert responds once, when it opens: a further occurrence is counted and responds no more.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { auditRows, bundleRow, detect, ENV, eventsOf, grant, patchRule, ruleAlerts, settings, START, type Tenant, tenant } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: START, env: ENV })
})
afterAll(async () => {
  await app?.stop()
})

const probe = (t: Tenant) =>
  app.request("POST", "/v1/authorize", { apiKey: t.apiKey, body: { agentId: t.agentId, principalId: "user_1", scopes: ["admin:all"] } })

/** five grants of the agent, one with a consent bundle, one with a grant delegated to another agent */
const estate = async (t: Tenant) => {
  const roots = []
  for (let i = 0; i < 5; i++) roots.push(await grant(app, t))
  const sub = await createAgent(app, t.developerId)
  const child = await grant(app, t, { agentId: sub, parentGrantId: roots[0]!.id, delegationDepth: 1 })
  const bundleId = await bundleRow(app, t, roots[1]!.id, START)
  return { roots, child, bundleId, all: [...roots.map((g) => g.id), child.id].sort() }
}

const statuses = async (ids: ReadonlyArray<string>) =>
  (await app.query<{ status: string }>(`SELECT status FROM grants WHERE id = ANY($1) ORDER BY id`, [ids])).map((r) => r.status)

test("enforce + revoke_grants: the agent's grants, their delegated grants and bundles are revoked with events", async () => {
  const t = await tenant(app)
  const { child, bundleId, all, roots } = await estate(t)
  await settings(app, t, { mode: "enforce" })
  expect(await patchRule(app, t, "AD-002", { response: "revoke_grants" })).toMatchObject({ ruleId: "AD-002", response: "revoke_grants" })
  for (let i = 0; i < 3; i++) await probe(t)
  const [alert] = await ruleAlerts(app, t, "AD-002")
  expect(alert).toMatchObject({ response: "revoked_grants", occurrences: 1 })
  expect([...alert.responseRefs].sort()).toEqual(all)
  expect(await statuses(all)).toEqual(all.map(() => "revoked"))
  const revokedEvents = await eventsOf(app, t, "grant.revoked")
  expect(revokedEvents.map((e) => e.grantId).sort()).toEqual(all)
  expect(revokedEvents.find((e) => e.grantId === roots[0]!.id)).toEqual({ grantId: roots[0]!.id, cascade: true })
  expect(revokedEvents.find((e) => e.grantId === child.id)).toEqual({ grantId: child.id, cascade: false })
  expect((await eventsOf(app, t, "consent_bundle.revoked")).map((e) => e.bundleId)).toEqual([bundleId])
  const auto = await eventsOf(app, t, "anomaly.auto_revoked")
  expect(auto).toHaveLength(1)
  expect(auto[0].alertId).toBe(alert.alertId)
  expect([...auto[0].revokedGrants].sort()).toEqual(all)
  // six grants revoked by the response in one second: not a mass revocation
  expect(await ruleAlerts(app, t, "AD-006")).toEqual([])
})

test("monitor (the default): the same alert, and nothing revoked or suspended", async () => {
  const t = await tenant(app)
  const { all } = await estate(t)
  await patchRule(app, t, "AD-002", { response: "revoke_grants" })
  for (let i = 0; i < 3; i++) await probe(t)
  expect(await ruleAlerts(app, t, "AD-002")).toMatchObject([{ response: "none", responseRefs: [], occurrences: 1 }])
  expect(await statuses(all)).toEqual(all.map(() => "active"))
  expect(await eventsOf(app, t, "grant.revoked")).toEqual([])
  expect(await eventsOf(app, t, "anomaly.auto_revoked")).toEqual([])
  expect((await app.request("GET", `/v1/agents/${t.agentId}`, { apiKey: t.apiKey })).body.status).toBe("active")
})

test("enforce + suspend_agent: a replay suspends the agent through the agents service (its bundles revoked)", async () => {
  const t = await tenant(app)
  const other = await grant(app, t)
  const bundleId = await bundleRow(app, t, other.id, START)
  await settings(app, t, { mode: "enforce" })
  await patchRule(app, t, "AD-009", { response: "suspend_agent" })
  const { code } = (await app.request("POST", "/v1/authorize", { apiKey: t.apiKey, body: { agentId: t.agentId, principalId: "user_1", scopes: ["email:read"] } })).body
  expect((await app.request("POST", "/v1/token", { apiKey: t.apiKey, body: { code, agentId: t.agentId } })).status).toBe(201)
  expect((await app.request("POST", "/v1/token", { apiKey: t.apiKey, body: { code, agentId: t.agentId } })).status).toBe(400)
  expect(await ruleAlerts(app, t, "AD-009")).toMatchObject([{ response: "suspended_agent", responseRefs: [t.agentId] }])
  expect((await app.request("GET", `/v1/agents/${t.agentId}`, { apiKey: t.apiKey })).body.status).toBe("suspended")
  expect((await eventsOf(app, t, "consent_bundle.revoked")).map((e) => e.bundleId)).toEqual([bundleId])
})

test("a windowed rule responds too: POST /v1/anomalies/detect answers how many grants it revoked", async () => {
  const t = await tenant(app)
  const { all } = await estate(t)
  await settings(app, t, { mode: "enforce" })
  await patchRule(app, t, "rate_spike", { response: "revoke_grants" })
  await auditRows(app, t, 51, START)
  const out = await detect(app, t)
  const spike = out.anomalies.find((a: any) => a.type === "rate_spike")
  expect(spike).toMatchObject({ ruleId: "rate_spike", response: "revoked_grants", agentId: t.agentId })
  expect(out.autoRevokedGrants).toBe(all.length)
  expect(await statuses(all)).toEqual(all.map(() => "revoked"))
  // monitor again: a further spike is counted, nothing else is revoked (nothing is left either)
  await settings(app, t, { mode: "monitor" })
  await app.adjust("1 minute")
  await auditRows(app, t, 1, START + 60_000)
  const again = await detect(app, t)
  expect(again.autoRevokedGrants).toBe(0)
  expect(again.anomalies.find((a: any) => a.type === "rate_spike")).toMatchObject({ occurrences: 2 })
})

test("a re-raised alert does not repeat its response: later grants stay, one anomaly.auto_revoked", async () => {
  const t = await tenant(app)
  const { all } = await estate(t)
  await settings(app, t, { mode: "enforce" })
  await patchRule(app, t, "AD-002", { response: "revoke_grants" })
  for (let i = 0; i < 3; i++) await probe(t)
  const [alert] = await ruleAlerts(app, t, "AD-002")
  expect(alert).toMatchObject({ response: "revoked_grants", occurrences: 1 })
  expect(await statuses(all)).toEqual(all.map(() => "revoked"))
  // the agent goes on: a new grant, then one more probe while the alert is open
  const later = await grant(app, t)
  await probe(t)
  expect(await ruleAlerts(app, t, "AD-002")).toMatchObject([{ alertId: alert.alertId, occurrences: 2, response: "revoked_grants" }])
  expect(await statuses([later.id])).toEqual(["active"])
  expect(await eventsOf(app, t, "anomaly.auto_revoked")).toHaveLength(1)
  // anomaly.detected is still emitted per occurrence
  expect((await eventsOf(app, t, "anomaly.detected")).map((e) => e.occurrences)).toEqual([1, 2])
})
