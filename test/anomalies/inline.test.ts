/**
 * The inline rules (decisions §14) fire on the request that shows them, on TestClock: scope probing
 * (AD-002), mass revocation (AD-006), suspended-agent use (AD-008) and replay (AD-009). Each: a
 * stream that raises exactly one alert, a near miss that raises none, further triggers counted as
 * occurrences, and `anomaly.detected` emitted each time.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { alerts, ENV, eventsOf, grant, grantWithToken, ruleAlerts, START, type Tenant, tenant } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: START, env: ENV })
})
afterAll(async () => {
  await app?.stop()
})

const probe = (t: Tenant, from = "198.51.100.7") =>
  app.request("POST", "/v1/authorize", {
    apiKey: t.apiKey,
    headers: { "x-forwarded-for": from },
    body: { agentId: t.agentId, principalId: "user_1", scopes: ["admin:all"] }
  })

describe("AD-002 scope probing", () => {
  test("three INVALID_SCOPES answers in 10 minutes raise one alert; a fourth counts an occurrence", async () => {
    const t = await tenant(app)
    for (let i = 0; i < 2; i++) expect((await probe(t)).status).toBe(422)
    expect(await ruleAlerts(app, t, "AD-002")).toEqual([])
    expect((await probe(t)).body.code).toBe("INVALID_SCOPES")
    const [alert] = await ruleAlerts(app, t, "AD-002")
    expect(alert).toMatchObject({
      ruleId: "AD-002", ruleName: "Scope probing", severity: "high", status: "open", agentId: t.agentId, occurrences: 1,
      response: "none", responseRefs: [], context: { refusals: 3, lastCode: "INVALID_SCOPES", windowMinutes: 10 }
    })
    expect(alert.alertId).toMatch(/^anm_/)
    await probe(t)
    const after = await ruleAlerts(app, t, "AD-002")
    expect(after).toHaveLength(1)
    expect(after[0]).toMatchObject({ alertId: alert.alertId, occurrences: 2 })
    expect(await eventsOf(app, t, "anomaly.detected")).toEqual([
      { alertId: alert.alertId, ruleId: "AD-002", severity: "high", agentId: t.agentId, occurrences: 1 },
      { alertId: alert.alertId, ruleId: "AD-002", severity: "high", agentId: t.agentId, occurrences: 2 }
    ])
  })

  test("near miss: three refusals spread over more than 10 minutes raise nothing", async () => {
    const t = await tenant(app)
    for (let i = 0; i < 3; i++) {
      expect((await probe(t)).status).toBe(422)
      await app.adjust("6 minutes")
    }
    expect(await ruleAlerts(app, t, "AD-002")).toEqual([])
    expect(await eventsOf(app, t, "anomaly.detected")).toEqual([])
  })

  test("SCOPE_ESCALATION answers to delegation count too", async () => {
    const t = await tenant(app)
    const sub = await (await import("../support/fixtures.ts")).createAgent(app, t.developerId, ["email:read", "admin:all"])
    const { token } = await grantWithToken(app, t)
    for (let i = 0; i < 3; i++) {
      const res = await app.request("POST", "/v1/grants/delegate", {
        apiKey: t.apiKey, body: { parentGrantToken: token.grantToken, subAgentId: sub, scopes: ["admin:all"] }
      })
      expect(res.body.code).toBe("SCOPE_ESCALATION")
    }
    const found = await ruleAlerts(app, t, "AD-002")
    expect(found).toHaveLength(1)
    expect(found[0]).toMatchObject({ agentId: t.agentId, context: { lastCode: "SCOPE_ESCALATION", refusals: 3 } })
  })
})

describe("AD-006 mass revocation", () => {
  test("six grants revoked within 60 s raise one alert; the seventh counts an occurrence", async () => {
    const t = await tenant(app)
    const grants = []
    for (let i = 0; i < 7; i++) grants.push(await grant(app, t))
    for (const g of grants.slice(0, 5)) expect((await app.request("DELETE", `/v1/grants/${g.id}`, { apiKey: t.apiKey })).status).toBe(204)
    expect(await ruleAlerts(app, t, "AD-006")).toEqual([])
    await app.adjust("10 seconds")
    expect((await app.request("DELETE", `/v1/grants/${grants[5]!.id}`, { apiKey: t.apiKey })).status).toBe(204)
    const [alert] = await ruleAlerts(app, t, "AD-006")
    expect(alert).toMatchObject({ severity: "high", agentId: null, occurrences: 1, context: { revokedInWindow: 6, windowSeconds: 60 } })
    await app.request("DELETE", `/v1/grants/${grants[6]!.id}`, { apiKey: t.apiKey })
    expect(await ruleAlerts(app, t, "AD-006")).toMatchObject([{ alertId: alert.alertId, occurrences: 2 }])
  })

  test("near miss: six revocations more than 60 s apart in pairs raise nothing", async () => {
    const t = await tenant(app)
    for (let i = 0; i < 6; i++) {
      const g = await grant(app, t)
      await app.request("DELETE", `/v1/grants/${g.id}`, { apiKey: t.apiKey })
      await app.adjust("20 seconds")
    }
    expect(await ruleAlerts(app, t, "AD-006")).toEqual([])
  })
})

describe("AD-008 suspended agent use", () => {
  test("a token of a suspended agent presented raises a critical alert; each presentation counts", async () => {
    const t = await tenant(app)
    const { token, grant: g } = await grantWithToken(app, t)
    // near miss: the active agent's token verifies and raises nothing
    expect((await app.request("POST", "/v1/tokens/verify", { apiKey: t.apiKey, body: { token: token.grantToken } })).body.valid).toBe(true)
    expect(await ruleAlerts(app, t, "AD-008")).toEqual([])
    expect((await app.request("PATCH", `/v1/agents/${t.agentId}`, { apiKey: t.apiKey, body: { status: "suspended" } })).status).toBe(200)
    for (let i = 0; i < 2; i++) {
      expect((await app.request("POST", "/v1/tokens/verify", { apiKey: t.apiKey, body: { token: token.grantToken } })).body).toEqual({ valid: false })
    }
    const found = await ruleAlerts(app, t, "AD-008")
    expect(found).toHaveLength(1)
    expect(found[0]).toMatchObject({ severity: "critical", agentId: t.agentId, occurrences: 2, context: { grantId: g.id, where: "token check" } })
  })

  test("a suspended agent's token at the vault exchange raises the alert there too (401 as before)", async () => {
    const t = await tenant(app)
    const { token } = await grantWithToken(app, t)
    await app.request("DELETE", `/v1/agents/${t.agentId}`, { apiKey: t.apiKey })
    const res = await app.request("POST", "/v1/vault/credentials/exchange", { bearer: token.grantToken, body: { service: "github" } })
    expect(res.status).toBe(401)
    expect(await ruleAlerts(app, t, "AD-008")).toMatchObject([{ severity: "critical", agentId: t.agentId, occurrences: 1, context: { where: "vault exchange" } }])
  })

  test("near miss: a revoked grant's token of an active agent raises nothing", async () => {
    const t = await tenant(app)
    const { token, grant: g } = await grantWithToken(app, t)
    await app.request("DELETE", `/v1/grants/${g.id}`, { apiKey: t.apiKey })
    expect((await app.request("POST", "/v1/tokens/verify", { apiKey: t.apiKey, body: { token: token.grantToken } })).body).toEqual({ valid: false })
    expect(await ruleAlerts(app, t, "AD-008")).toEqual([])
  })
})

describe("AD-009 replay", () => {
  const authorize = (t: Tenant) =>
    app.request("POST", "/v1/authorize", { apiKey: t.apiKey, body: { agentId: t.agentId, principalId: "user_1", scopes: ["email:read"] } })

  test("a reused code raises a critical alert (the grant was revoked by the token endpoint); a reused refresh token counts again", async () => {
    const t = await tenant(app)
    const { code } = (await authorize(t)).body
    const first = await app.request("POST", "/v1/token", { apiKey: t.apiKey, body: { code, agentId: t.agentId } })
    expect(first.status).toBe(201)
    // near miss: one exchange and one refresh raise nothing
    const refreshed = await app.request("POST", "/v1/token/refresh", { apiKey: t.apiKey, body: { refreshToken: first.body.refreshToken, agentId: t.agentId } })
    expect(refreshed.status).toBe(201)
    expect(await alerts(app, t)).toEqual([])
    const replay = await app.request("POST", "/v1/token", { apiKey: t.apiKey, body: { code, agentId: t.agentId } })
    expect(replay.status).toBe(400)
    const [alert] = await ruleAlerts(app, t, "AD-009")
    expect(alert).toMatchObject({ severity: "critical", agentId: t.agentId, occurrences: 1, context: { kind: "code", grantId: first.body.grantId, revokedGrants: 1 } })
    expect((await app.query(`SELECT status FROM grants WHERE id = $1`, [first.body.grantId]))[0].status).toBe("revoked")
    // the second grant's refresh token used twice
    const { code: code2 } = (await authorize(t)).body
    const second = await app.request("POST", "/v1/token", { apiKey: t.apiKey, body: { code: code2, agentId: t.agentId } })
    const body = { refreshToken: second.body.refreshToken, agentId: t.agentId }
    expect((await app.request("POST", "/v1/token/refresh", { apiKey: t.apiKey, body })).status).toBe(201)
    expect((await app.request("POST", "/v1/token/refresh", { apiKey: t.apiKey, body })).status).toBe(400)
    expect(await ruleAlerts(app, t, "AD-009")).toMatchObject([{ alertId: alert.alertId, occurrences: 2, context: { kind: "refresh_token" } }])
  })
})

describe("modes and the allow-list", () => {
  test("off detects nothing; an allow-listed address triggers nothing; another address still does", async () => {
    const t = await tenant(app)
    await app.request("PUT", "/v1/anomaly/settings", { apiKey: t.apiKey, body: { mode: "off" } })
    for (let i = 0; i < 4; i++) await probe(t)
    expect(await alerts(app, t)).toEqual([])
    await app.request("PUT", "/v1/anomaly/settings", { apiKey: t.apiKey, body: { mode: "monitor", allowList: ["198.51.100.0/24", "2001:db8::1"] } })
    await app.adjust("11 minutes")
    for (let i = 0; i < 4; i++) await probe(t, "198.51.100.99")
    for (let i = 0; i < 4; i++) await probe(t, "2001:db8::1")
    expect(await alerts(app, t)).toEqual([])
    for (let i = 0; i < 3; i++) await probe(t, "203.0.113.4")
    expect(await ruleAlerts(app, t, "AD-002")).toMatchObject([{ occurrences: 1, context: { refusals: 3 } }])
  })
})
