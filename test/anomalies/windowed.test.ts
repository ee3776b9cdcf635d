/**
 * The windowed built-in rules (decisions §14) on TestClock, each run by POST /v1/anomalies/detect:
 * a stream that raises exactly one alert, and a near miss that raises none. Running a pass again
 * over the same rows counts nothing twice; new evidence counts one more occurrence.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { alerts, auditRows, bundleRow, clockNow, detect, ENV, grant, grantWithToken, ruleAlerts, settings, START, type Tenant, tenant } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: START, env: ENV })
})
afterAll(async () => {
  await app?.stop()
})

/** moves the clock forward to `ms` (the tests run in order, each later than the one before) */
const at = (ms: number) => app.setTime(ms)

describe("AD-001 velocity spike", () => {
  test("21 grants in 5 minutes for an agent without history raise one alert; a 22nd counts once; a rerun counts nothing", async () => {
    await at(START)
    const t = await tenant(app)
    for (let i = 0; i < 21; i++) await grant(app, t)
    const out = await detect(app, t)
    expect(out.anomalies.filter((a: any) => a.type === "AD-001")).toHaveLength(1)
    expect(await ruleAlerts(app, t, "AD-001")).toMatchObject([{ severity: "high", agentId: t.agentId, occurrences: 1, context: { grants: 21, median: 0 } }])
    expect((await detect(app, t)).anomalies.filter((a: any) => a.type === "AD-001")).toEqual([])
    await app.adjust("1 minute")
    await grant(app, t)
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-001")).toMatchObject([{ occurrences: 2, context: { grants: 22 } }])
  })

  test("a burst that straddles two passes is seen (sliding window), once", async () => {
    const t = await tenant(app)
    // 15 grants in the 2 minutes before a pass, 15 in the 2 minutes after: 30 within 5 minutes, 15 in each fixed window
    for (let i = 0; i < 15; i++) {
      await grant(app, t)
      await app.adjust("8 seconds")
    }
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-001")).toEqual([])
    for (let i = 0; i < 15; i++) {
      await app.adjust("8 seconds")
      await grant(app, t)
    }
    // the next pass, 6 minutes after the first: a fixed 5-minute window holds only the last 8 grants
    await app.adjust("4 minutes")
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-001")).toMatchObject([{ agentId: t.agentId, occurrences: 1, context: { grants: 30, windowMinutes: 5 } }])
    // the next passes over the same burst count nothing more
    await app.adjust("5 minutes")
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-001")).toMatchObject([{ occurrences: 1 }])
  })

  test("a custom rule's burst that straddles two passes is seen (sliding window), once; a near miss raises nothing", async () => {
    const t = await tenant(app)
    const condition = { event: "audit.logged", filter: { status: "failure" }, window: "5m", threshold: 6, groupBy: "agent" }
    expect((await app.request("POST", "/v1/anomaly/rules", { apiKey: t.apiKey, body: { ruleId: "failing", name: "Failing", condition } })).status).toBe(201)
    const now = await clockNow(app)
    // 3 failures 2 minutes before a pass and 3 at the pass: 6 within 5 minutes
    await auditRows(app, t, 3, now - 2 * 60_000, "failure")
    await auditRows(app, t, 3, now, "failure")
    // a fixed window ending at the next pass, 4 minutes on, would hold only the last 3
    await app.adjust("4 minutes")
    await detect(app, t)
    expect(await ruleAlerts(app, t, "failing")).toMatchObject([{ agentId: t.agentId, occurrences: 1, context: { count: 6, window: "5m" } }])
    await app.adjust("5 minutes")
    await detect(app, t)
    expect(await ruleAlerts(app, t, "failing")).toMatchObject([{ occurrences: 1 }])
    // another agent's 6 failures spread over 6 minutes: no 5 minutes hold 6
    const other = await createAgent(app, t.developerId, ["email:read"])
    const later = await clockNow(app)
    for (let i = 0; i < 6; i++) await auditRows(app, t, 1, later - (5 - i) * 61_000, "failure", other)
    await detect(app, t)
    expect((await ruleAlerts(app, t, "failing")).filter((a: any) => a.agentId === other)).toEqual([])
  })

  test("near miss: 20 grants in 5 minutes raise nothing", async () => {
    const t = await tenant(app)
    for (let i = 0; i < 20; i++) await grant(app, t)
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-001")).toEqual([])
  })
})

describe("AD-003 new network", () => {
  const verify = (t: Tenant, token: string, from: string) =>
    app.request("POST", "/v1/tokens/verify", { apiKey: t.apiKey, headers: { "x-forwarded-for": from }, body: { token } })

  test("a token used from a second /24 raises one alert; the same /24 again raises nothing", async () => {
    const t = await tenant(app)
    const { token } = await grantWithToken(app, t)
    expect((await verify(t, token.grantToken, "198.51.100.7")).body.valid).toBe(true)
    await detect(app, t)
    // near miss: the first network ever, then another host of the same /24
    await app.adjust("1 minute")
    await verify(t, token.grantToken, "198.51.100.200")
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-003")).toEqual([])
    await app.adjust("1 minute")
    await verify(t, token.grantToken, "203.0.113.9")
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-003")).toMatchObject([{ severity: "medium", agentId: t.agentId, occurrences: 1, context: { network: "203.0.113.0/24" } }])
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-003")).toMatchObject([{ occurrences: 1 }])
    // IPv6 networks are /48s
    await app.adjust("1 minute")
    await verify(t, token.grantToken, "2001:db8:7:1::5")
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-003")).toMatchObject([{ occurrences: 2, context: { network: "2001:db8:7::/48" } }])
  })
})

describe("AD-004 off-hours", () => {
  test("off until a window is set; then activity inside it raises one alert, activity outside none", async () => {
    const t = await tenant(app)
    await at(Date.parse("2026-11-24T23:30:00.000Z"))
    await grant(app, t)
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-004")).toEqual([])
    await settings(app, t, { offHours: { start: "09:00", end: "17:00", timeZone: "Asia/Kolkata" } })
    await detect(app, t)
    // 23:30 UTC is 05:00 in Kolkata: outside 09:00-17:00 there
    expect(await ruleAlerts(app, t, "AD-004")).toEqual([])
    await settings(app, t, { offHours: { start: "22:00", end: "06:00", timeZone: "UTC", days: [2] } })
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-004")).toMatchObject([{ severity: "low", occurrences: 1, context: { activity: 1 } }])
  })

  test("near miss: a day not in the window's days raises nothing", async () => {
    const t = await tenant(app)
    await at(Date.parse("2026-11-25T23:30:00.000Z")) // a Wednesday
    await grant(app, t)
    await settings(app, t, { offHours: { start: "22:00", end: "06:00", days: [1, 2] } })
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-004")).toEqual([])
  })
})

describe("AD-005 delegation depth", () => {
  test("deeper than the agent has gone raises one alert; the same depth again does not; the maximum does", async () => {
    const t = await tenant(app)
    const sub = await createAgent(app, t.developerId)
    const root = await grant(app, t)
    const first = await grant(app, t, { agentId: sub, parentGrantId: root.id, delegationDepth: 1 })
    await detect(app, t)
    await app.adjust("1 minute")
    await grant(app, t, { agentId: sub, parentGrantId: root.id, delegationDepth: 1 })
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-005")).toEqual([])
    await app.adjust("1 minute")
    const deeper = await grant(app, t, { agentId: sub, parentGrantId: first.id, delegationDepth: 2 })
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-005")).toMatchObject([{ agentId: sub, occurrences: 1, context: { grantId: deeper.id, delegationDepth: 2, previousMaximum: 1 } }])
    const third = await createAgent(app, t.developerId)
    await app.adjust("1 minute")
    await grant(app, t, { agentId: third, parentGrantId: deeper.id, delegationDepth: 3 })
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-005")).toHaveLength(2)
    expect(await alerts(app, t, `?agentId=${third}&ruleId=AD-005`)).toMatchObject([{ ruleId: "AD-005", context: { delegationDepth: 3, maximum: 3 } }])
  })
})

describe("AD-007 budget cliff", () => {
  const allocation = async (t: Tenant, grantId: string) => {
    const id = `bdg_t${Math.random().toString(36).slice(2, 10)}`
    await app.query(`INSERT INTO budget_allocations (id, grant_id, developer_id, initial_budget, remaining_budget, currency, created_at, updated_at)
                     VALUES ($1, $2, $3, 100, 100, 'USD', now(), now())`, [id, grantId, t.developerId])
    return id
  }
  const spend = (t: Tenant, allocationId: string, grantId: string, amount: number, ms: number) =>
    app.query(`INSERT INTO budget_transactions (id, allocation_id, grant_id, developer_id, amount, remaining_after, created_at)
               VALUES ('btx_t' || md5(random()::text), $1, $2, $3, $4, 0, $5)`, [allocationId, grantId, t.developerId, amount, new Date(ms)])

  test("90 % of an allocation spent within an hour raises one alert; 89 % raises none", async () => {
    const t = await tenant(app)
    const g = await grant(app, t)
    const id = await allocation(t, g.id)
    const ms = await clockNow(app)
    await spend(t, id, g.id, 50, ms - 50 * 60_000)
    await spend(t, id, g.id, 39, ms - 1000)
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-007")).toEqual([])
    await spend(t, id, g.id, 1, ms)
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-007")).toMatchObject([{ severity: "high", agentId: t.agentId, occurrences: 1, context: { allocationId: id, spent: 90, initialBudget: 100 } }])
  })

  test("spending that straddles two passes is seen by the second (sliding window), once", async () => {
    const t = await tenant(app)
    const g = await grant(app, t)
    const id = await allocation(t, g.id)
    const ms = await clockNow(app)
    // 60 spent 40 minutes before a pass, 30 at it: 90 within an hour
    await spend(t, id, g.id, 60, ms - 40 * 60_000)
    await spend(t, id, g.id, 30, ms)
    // the next pass 30 minutes on: a fixed hour ending there holds only the 30
    await app.adjust("30 minutes")
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-007")).toMatchObject([{ occurrences: 1, context: { allocationId: id, spent: 90 } }])
    await app.adjust("5 minutes")
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-007")).toMatchObject([{ occurrences: 1 }])
  })
})

describe("AD-010 stale bundle", () => {
  test("an active bundle without a sync for 72 hours raises one alert, once", async () => {
    const t = await tenant(app)
    const g = await grant(app, t)
    const ms = await clockNow(app)
    const id = await bundleRow(app, t, g.id, ms - 71 * 3_600_000)
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-010")).toEqual([])
    await app.adjust("2 hours")
    await detect(app, t)
    await detect(app, t)
    expect(await ruleAlerts(app, t, "AD-010")).toMatchObject([{ severity: "low", occurrences: 1, context: { bundleId: id } }])
  })
})
