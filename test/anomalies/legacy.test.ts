/**
 * The published protocol's four detectors, kept as rules (decisions §14): rate_spike,
 * high_failure_rate, new_principal, off_hours_activity. Each: a stream that raises exactly one
 * alert, a near miss that raises none. Alerts are never deleted by a later run (the published
 * implementation deleted every unacknowledged alert on each run).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { auditRows, detect, ENV, grant, ruleAlerts, START, tenant } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: START, env: ENV })
})
afterAll(async () => {
  await app?.stop()
})

describe("rate_spike", () => {
  test("51 audit actions of an agent in an hour raise one alert; 50 raise none", async () => {
    const near = await tenant(app)
    await auditRows(app, near, 50, START - 30 * 60_000)
    await detect(app, near)
    expect(await ruleAlerts(app, near, "rate_spike")).toEqual([])
    const t = await tenant(app)
    await auditRows(app, t, 51, START - 30 * 60_000)
    await detect(app, t)
    expect(await ruleAlerts(app, t, "rate_spike")).toMatchObject([{ severity: "high", agentId: t.agentId, occurrences: 1, context: { actions: 51 } }])
  })
})

describe("high_failure_rate", () => {
  test("2 failures of 5 entries in 24 h raise one alert; 1 of 5 (not over 20 %) raises none", async () => {
    const near = await tenant(app)
    await auditRows(app, near, 4, START - 3_600_000)
    await auditRows(app, near, 1, START - 3_600_000, "failure")
    await detect(app, near)
    expect(await ruleAlerts(app, near, "high_failure_rate")).toEqual([])
    const t = await tenant(app)
    await auditRows(app, t, 3, START - 3_600_000)
    await auditRows(app, t, 1, START - 3_600_000, "failure")
    await auditRows(app, t, 1, START - 1_800_000, "blocked")
    await detect(app, t)
    expect(await ruleAlerts(app, t, "high_failure_rate")).toMatchObject([{ severity: "medium", occurrences: 1, context: { total: 5, failed: 2 } }])
  })
})

describe("new_principal", () => {
  test("the first grant for an (agent, principal) pair raises one alert; a second grant for the pair raises none", async () => {
    const t = await tenant(app)
    await grant(app, t, { principalId: "user_7" })
    await detect(app, t)
    await app.adjust("1 minute")
    await grant(app, t, { principalId: "user_7" })
    await detect(app, t)
    expect(await ruleAlerts(app, t, "new_principal")).toMatchObject([{ agentId: t.agentId, principalId: "user_7", occurrences: 1 }])
    await app.adjust("25 hours")
    await grant(app, t, { principalId: "user_7" })
    await detect(app, t)
    expect(await ruleAlerts(app, t, "new_principal")).toMatchObject([{ occurrences: 1 }])
  })
})

describe("off_hours_activity", () => {
  test("11 entries between 22:00 and 06:00 UTC raise one alert; 10 raise none", async () => {
    const night = Date.parse("2026-11-25T02:00:00.000Z")
    await app.setTime(night + 3_600_000)
    const near = await tenant(app)
    await auditRows(app, near, 10, night)
    await auditRows(app, near, 5, night - 5 * 3_600_000) // 21:00 UTC: not off-hours
    await detect(app, near)
    expect(await ruleAlerts(app, near, "off_hours_activity")).toEqual([])
    const t = await tenant(app)
    await auditRows(app, t, 11, night)
    await detect(app, t)
    expect(await ruleAlerts(app, t, "off_hours_activity")).toMatchObject([{ severity: "low", occurrences: 1, context: { entries: 11 } }])
  })

  test("a later run deletes nothing: resolved and unacknowledged alerts stay, and a resolved one is not raised again for the same evidence", async () => {
    const t = await tenant(app)
    await auditRows(app, t, 60, Date.parse("2026-11-25T02:30:00.000Z"))
    await detect(app, t)
    const [spike] = await ruleAlerts(app, t, "rate_spike")
    expect((await app.request("POST", `/v1/anomaly/alerts/${spike.alertId}/resolve`, { apiKey: t.apiKey, body: {} })).status).toBe(200)
    await detect(app, t)
    const after = await ruleAlerts(app, t, "rate_spike")
    expect(after).toHaveLength(1)
    expect(after[0]).toMatchObject({ alertId: spike.alertId, status: "resolved" })
    expect((await ruleAlerts(app, t, "off_hours_activity"))).toHaveLength(1)
    // new evidence after the resolution opens a new alert
    await app.adjust("1 minute")
    await auditRows(app, t, 1, Date.parse("2026-11-25T03:01:00.000Z"))
    await detect(app, t)
    const reopened = await ruleAlerts(app, t, "rate_spike")
    expect(reopened.map((a: any) => a.status)).toEqual(["open", "resolved"])
  })
})
