/**
 * The anomaly endpoints (decisions §14): the alert lifecycle (409 moving backwards), filters and
 * cursors, metrics, the published routes, rules (built-in overrides, custom rules in the closed
 * schema, at most 50, delete custom only), settings, bad input, and tenants kept apart.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import fc from "fast-check"
import { startTestApp, type TestApp } from "../support/app.ts"
import { addChannel, alerts, auditRows, detect, ENV, eventsOf, grant, START, type Tenant, tenant } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: START, env: ENV })
})
afterAll(async () => {
  await app?.stop()
})

const probe = (t: Tenant) =>
  app.request("POST", "/v1/authorize", { apiKey: t.apiKey, body: { agentId: t.agentId, principalId: "user_1", scopes: ["admin:all"] } })

const condition = { event: "audit.logged", filter: { status: "failure" }, window: "1h", threshold: 3, groupBy: "agent" }

describe("alerts", () => {
  test("open → acknowledged → resolved with notes; backwards answers 409; a new trigger then opens a new alert", async () => {
    const t = await tenant(app)
    for (let i = 0; i < 3; i++) await probe(t)
    const [alert] = await alerts(app, t)
    const path = `/v1/anomaly/alerts/${alert.alertId}`
    expect((await app.request("GET", path, { apiKey: t.apiKey })).body).toEqual(alert)
    const ack = await app.request("POST", `${path}/acknowledge`, { apiKey: t.apiKey, body: { note: "looking" } })
    expect(ack.body).toMatchObject({ status: "acknowledged", note: "looking", acknowledgedAt: "2026-11-23T12:00:00.000Z" })
    // still counted while acknowledged
    await probe(t)
    expect((await app.request("GET", path, { apiKey: t.apiKey })).body).toMatchObject({ status: "acknowledged", occurrences: 2 })
    const resolved = await app.request("POST", `${path}/resolve`, { apiKey: t.apiKey, body: { note: "key rotated" } })
    expect(resolved.body).toMatchObject({ status: "resolved", note: "key rotated", resolvedAt: "2026-11-23T12:00:00.000Z" })
    const back = await app.request("POST", `${path}/acknowledge`, { apiKey: t.apiKey, body: {} })
    expect(back.status).toBe(409)
    expect(back.body).toMatchObject({ code: "CONFLICT" })
    expect((await app.request("PATCH", `/v1/anomalies/${alert.alertId}/acknowledge`, { apiKey: t.apiKey })).status).toBe(409)
    // resolving again answers the alert unchanged
    expect((await app.request("POST", `${path}/resolve`, { apiKey: t.apiKey, body: {} })).body).toMatchObject({ status: "resolved", note: "key rotated" })
    await app.adjust("1 second")
    await probe(t)
    const all = await alerts(app, t)
    expect(all.map((a) => [a.status, a.occurrences])).toEqual([["open", 1], ["resolved", 2]])
    expect(await eventsOf(app, t, "anomaly.detected")).toHaveLength(3)
  })

  test("filters, cursors, metrics and the published routes", async () => {
    const t = await tenant(app)
    for (let i = 0; i < 3; i++) await probe(t)
    await auditRows(app, t, 51, START - 60_000)
    await grant(app, t, { principalId: "user_9" })
    await detect(app, t)
    const all = await alerts(app, t)
    expect(all.map((a) => a.ruleId).sort()).toEqual(["AD-002", "new_principal", "rate_spike"])
    const first = await app.request("GET", "/v1/anomaly/alerts?limit=2", { apiKey: t.apiKey })
    const second = await app.request("GET", `/v1/anomaly/alerts?limit=2&cursor=${first.body.nextCursor}`, { apiKey: t.apiKey })
    expect([...first.body.data, ...second.body.data].map((a: any) => a.alertId)).toEqual(all.map((a) => a.alertId))
    expect(second.body.nextCursor).toBeNull()
    expect((await alerts(app, t, "?severity=high")).map((a) => a.ruleId).sort()).toEqual(["AD-002", "rate_spike"])
    expect((await alerts(app, t, "?status=resolved"))).toEqual([])
    expect((await alerts(app, t, `?agentId=${t.agentId}&ruleId=rate_spike`))).toHaveLength(1)
    expect((await alerts(app, t, `?since=${new Date(Date.parse(all[0].lastSeenAt) + 1).toISOString()}`))).toEqual([])
    expect((await alerts(app, t, `?since=${all[0].lastSeenAt}`)).length).toBeGreaterThan(0)
    const metrics = await app.request("GET", "/v1/anomaly/metrics?window=1h", { apiKey: t.apiKey })
    expect(metrics.body).toEqual({
      window: "1h", total: 3, byStatus: { open: 3, acknowledged: 0, resolved: 0 }, bySeverity: { critical: 0, high: 2, medium: 0, low: 1 }
    })
    const legacy = await app.request("GET", "/v1/anomalies?unacknowledged=true", { apiKey: t.apiKey })
    expect(legacy.body.total).toBe(3)
    expect(legacy.body.anomalies[0]).toMatchObject({ id: all[0].alertId, type: all[0].ruleId, metadata: all[0].context })
    const acked = await app.request("PATCH", `/v1/anomalies/${all[0].alertId}/acknowledge`, { apiKey: t.apiKey })
    expect(acked.body).toMatchObject({ id: all[0].alertId, status: "acknowledged" })
    expect((await app.request("GET", "/v1/anomalies?unacknowledged=true", { apiKey: t.apiKey })).body.total).toBe(2)
    for (const bad of ["?limit=0", "?cursor=nope", "?since=yesterday", "?status=closed", "?severity=huge"]) {
      const res = await app.request("GET", `/v1/anomaly/alerts${bad}`, { apiKey: t.apiKey })
      expect({ bad, status: res.status, code: res.body.code }).toEqual({ bad, status: 400, code: "BAD_REQUEST" })
    }
    expect((await app.request("GET", "/v1/anomaly/metrics?window=2h", { apiKey: t.apiKey })).status).toBe(400)
  })

  test("tenants never see each other's alerts, rules or settings", async () => {
    const a = await tenant(app)
    const b = await tenant(app)
    for (let i = 0; i < 3; i++) await probe(a)
    const [alert] = await alerts(app, a)
    expect(await alerts(app, b)).toEqual([])
    expect((await app.request("GET", `/v1/anomaly/alerts/${alert.alertId}`, { apiKey: b.apiKey })).status).toBe(404)
    expect((await app.request("POST", `/v1/anomaly/alerts/${alert.alertId}/resolve`, { apiKey: b.apiKey, body: {} })).status).toBe(404)
    expect((await app.request("PATCH", `/v1/anomalies/${alert.alertId}/acknowledge`, { apiKey: b.apiKey })).status).toBe(404)
    await app.request("POST", "/v1/anomaly/rules", { apiKey: a.apiKey, body: { ruleId: "mine", name: "Mine", condition } })
    await app.request("PUT", "/v1/anomaly/settings", { apiKey: a.apiKey, body: { mode: "enforce" } })
    expect((await app.request("GET", "/v1/anomaly/rules", { apiKey: b.apiKey })).body.rules.some((r: any) => r.ruleId === "mine")).toBe(false)
    expect((await app.request("PATCH", "/v1/anomaly/rules/mine", { apiKey: b.apiKey, body: { enabled: false } })).status).toBe(404)
    expect((await app.request("DELETE", "/v1/anomaly/rules/mine", { apiKey: b.apiKey })).status).toBe(404)
    expect((await app.request("GET", "/v1/anomaly/settings", { apiKey: b.apiKey })).body.mode).toBe("monitor")
    expect((await app.request("GET", "/v1/anomaly/alerts")).status).toBe(401)
  })

  test("N triggers while an alert is open give one alert with occurrences N (property)", async () => {
    await fc.assert(fc.asyncProperty(fc.integer({ min: 1, max: 6 }), async (n) => {
      const t = await tenant(app)
      for (let i = 0; i < 2 + n; i++) await probe(t)
      const found = await alerts(app, t)
      expect(found).toHaveLength(1)
      expect(found[0].occurrences).toBe(n)
    }), { numRuns: 4 })
  })
})

describe("rules", () => {
  test("twelve built-ins and the four published ones, with overrides; thresholds are the rule's own", async () => {
    const t = await tenant(app)
    const { rules } = (await app.request("GET", "/v1/anomaly/rules", { apiKey: t.apiKey })).body
    expect(rules.map((r: any) => r.ruleId)).toEqual([
      "AD-001", "AD-002", "AD-003", "AD-004", "AD-005", "AD-006", "AD-007", "AD-008", "AD-009", "AD-010", "AD-011", "AD-012",
      "rate_spike", "high_failure_rate", "new_principal", "off_hours_activity"
    ])
    expect(rules.filter((r: any) => r.inline).map((r: any) => r.ruleId)).toEqual(["AD-002", "AD-006", "AD-008", "AD-009", "AD-011", "AD-012"])
    expect(rules.find((r: any) => r.ruleId === "AD-011")).toMatchObject({ builtIn: true, severity: "high", enabled: true })
    const patched = await app.request("PATCH", "/v1/anomaly/rules/AD-002", { apiKey: t.apiKey, body: { threshold: { count: 5 }, severity: "critical" } })
    expect(patched.body).toMatchObject({ ruleId: "AD-002", builtIn: true, severity: "critical", threshold: { count: 5, windowMinutes: 10 } })
    for (let i = 0; i < 4; i++) await probe(t)
    expect(await alerts(app, t)).toEqual([])
    await probe(t)
    expect(await alerts(app, t)).toMatchObject([{ ruleId: "AD-002", severity: "critical" }])
    await app.request("PATCH", "/v1/anomaly/rules/AD-002", { apiKey: t.apiKey, body: { enabled: false } })
    await app.adjust("11 minutes")
    for (let i = 0; i < 6; i++) await probe(t)
    expect((await alerts(app, t))[0].occurrences).toBe(1)
    const bad = [
      [{ threshold: { limit: 3 } }, 400], [{ threshold: { count: -1 } }, 400], [{ name: "x" }, 400], [{ response: "explode" }, 400], [{ colour: 1 }, 400]
    ] as const
    for (const [body, status] of bad) expect({ body, status: (await app.request("PATCH", "/v1/anomaly/rules/AD-001", { apiKey: t.apiKey, body })).status }).toEqual({ body, status })
    expect((await app.request("PATCH", "/v1/anomaly/rules/AD-099", { apiKey: t.apiKey, body: { enabled: false } })).status).toBe(404)
    expect((await app.request("DELETE", "/v1/anomaly/rules/AD-001", { apiKey: t.apiKey })).status).toBe(409)
  })

  test("custom rules: the closed condition schema, evaluated by the pass, alertChannels kept, at most 50, deleted", async () => {
    const t = await tenant(app)
    const channel = (await addChannel(app, t.apiKey, { type: "webhook", url: "http://127.0.0.1:9/anomalies" })).body.id
    const other = await tenant(app)
    const theirs = (await addChannel(app, other.apiKey, { type: "webhook", url: "http://127.0.0.1:9/theirs" })).body.id
    for (const alertChannels of [["anch_nope"], [theirs]]) {
      const res = await app.request("POST", "/v1/anomaly/rules", { apiKey: t.apiKey, body: { ruleId: "failing-agent", name: "Failing agent", condition, alertChannels } })
      expect({ alertChannels, status: res.status, path: res.body.details?.[0]?.path }).toEqual({ alertChannels, status: 400, path: "alertChannels.0" })
    }
    const created = await app.request("POST", "/v1/anomaly/rules", {
      apiKey: t.apiKey, body: { ruleId: "failing-agent", name: "Failing agent", condition, severity: "high", alertChannels: [channel] }
    })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ ruleId: "failing-agent", builtIn: false, enabled: true, severity: "high", response: "alert", condition, alertChannels: [channel], evaluated: true })
    expect((await app.query(`SELECT alert_channels FROM anomaly_rules WHERE developer_id = $1 AND rule_id = 'failing-agent'`, [t.developerId]))[0].alertChannels).toEqual([channel])
    const badConditions = [
      { ...condition, extra: 1 }, { ...condition, window: "2h" }, { ...condition, threshold: 0 }, { ...condition, event: "grant.created" },
      { ...condition, filter: { status: "failure", colour: "red" } }, { ...condition, filter: { scopesAny: ["a"] } }, { ...condition, groupBy: "tenant" }
    ]
    for (const c of badConditions) {
      const res = await app.request("POST", "/v1/anomaly/rules", { apiKey: t.apiKey, body: { name: "Bad", condition: c } })
      expect({ c, status: res.status, code: res.body.code }).toEqual({ c, status: 400, code: "BAD_REQUEST" })
    }
    expect((await app.request("POST", "/v1/anomaly/rules", { apiKey: t.apiKey, body: { ruleId: "AD-001", name: "x", condition } })).status).toBe(409)
    expect((await app.request("POST", "/v1/anomaly/rules", { apiKey: t.apiKey, body: { ruleId: "failing-agent", name: "x", condition } })).status).toBe(409)
    const unevaluated = await app.request("POST", "/v1/anomaly/rules", { apiKey: t.apiKey, body: { name: "By ip", condition: { ...condition, groupBy: "ip" } } })
    expect(unevaluated.body).toMatchObject({ evaluated: false, ruleId: expect.stringMatching(/^arule_[0-9A-Z]{26}$/) })
    await auditRows(app, t, 2, START, "failure")
    expect((await detect(app, t)).anomalies.filter((a: any) => a.ruleId === "failing-agent")).toEqual([])
    await auditRows(app, t, 1, START, "failure")
    const out = await detect(app, t)
    expect(out.anomalies.filter((a: any) => a.ruleId === "failing-agent")).toMatchObject([{ severity: "high", agentId: t.agentId, context: { count: 3 } }])
    for (let i = 0; i < 48; i++) {
      expect((await app.request("POST", "/v1/anomaly/rules", { apiKey: t.apiKey, body: { name: `r${i}`, condition } })).status).toBe(201)
    }
    const over = await app.request("POST", "/v1/anomaly/rules", { apiKey: t.apiKey, body: { name: "one too many", condition } })
    expect(over.status).toBe(409)
    expect((await app.request("DELETE", "/v1/anomaly/rules/failing-agent", { apiKey: t.apiKey })).status).toBe(204)
    expect((await app.request("DELETE", "/v1/anomaly/rules/failing-agent", { apiKey: t.apiKey })).status).toBe(404)
    // its alerts stay
    expect((await alerts(app, t, "?ruleId=failing-agent"))).toHaveLength(1)
  })
})

describe("settings", () => {
  test("defaults, changes, and bad input", async () => {
    const t = await tenant(app)
    expect((await app.request("GET", "/v1/anomaly/settings", { apiKey: t.apiKey })).body).toEqual({ mode: "monitor", allowList: [], offHours: null, updatedAt: null })
    const put = await app.request("PUT", "/v1/anomaly/settings", {
      apiKey: t.apiKey, body: { mode: "enforce", allowList: ["10.0.0.0/8", "2001:db8::/32", "192.0.2.1"], offHours: { start: "22:00", end: "06:00" } }
    })
    expect(put.body).toEqual({
      mode: "enforce", allowList: ["10.0.0.0/8", "2001:db8::/32", "192.0.2.1"],
      offHours: { start: "22:00", end: "06:00", days: [1, 2, 3, 4, 5, 6, 7], timeZone: "UTC" }, updatedAt: expect.stringMatching(/^2026-11-23T12:\d\d:\d\d\.000Z$/)
    })
    expect((await app.request("GET", "/v1/anomaly/settings", { apiKey: t.apiKey })).body).toEqual(put.body)
    // monitor again without touching the rest
    expect((await app.request("PUT", "/v1/anomaly/settings", { apiKey: t.apiKey, body: { mode: "monitor" } })).body).toMatchObject({ mode: "monitor", allowList: put.body.allowList })
    const bad = [
      { mode: "panic" }, { allowList: ["not-an-ip"] }, { allowList: ["10.0.0.0/33"] }, { allowList: Array.from({ length: 101 }, (_, i) => `10.0.0.${i % 250}`) },
      { offHours: { start: "25:00", end: "06:00" } }, { offHours: { start: "06:00", end: "06:00" } }, { offHours: { start: "22:00", end: "06:00", timeZone: "Mars/Base" } },
      { offHours: { start: "22:00", end: "06:00", days: [0] } }, { other: true }
    ]
    for (const body of bad) {
      const res = await app.request("PUT", "/v1/anomaly/settings", { apiKey: t.apiKey, body })
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status: 400, code: "BAD_REQUEST" })
    }
    expect((await app.request("GET", "/v1/anomaly/settings", { apiKey: t.apiKey })).body).toMatchObject({ mode: "monitor", offHours: put.body.offHours })
  })
})
