/**
 * What an operator sees (issue 18): one log shape with an access line per request and the events
 * that matter, the domain's metrics on /metrics, and the live and ready probes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import pkg from "../../package.json" with { type: "json" }
import { startTestApp, type TestApp } from "../support/app.ts"

let app: TestApp
const lines: Array<any> = []
const raw: Array<string> = []
const originalLog = console.log
beforeAll(async () => {
  console.log = (...args: Array<unknown>) => {
    for (const arg of args) {
      raw.push(String(arg))
      try {
        lines.push(JSON.parse(String(arg)))
      } catch {
        lines.push({ unparsed: String(arg) })
      }
    }
  }
  app = await startTestApp({ env: { LOG_LEVEL: "info", RATE_LIMIT_PLAN_FREE: "3" } })
})
afterAll(async () => {
  await app.stop()
  console.log = originalLog
})

const metricValue = (text: string, series: string): number => {
  const line = text.split("\n").find((l) => l.startsWith(series + " "))
  return line === undefined ? 0 : Number(line.slice(series.length + 1))
}
const scrape = async () => (await app.request("GET", "/metrics")).text

/** authorize → approve → exchange; returns the code and the token answer */
const flow = async (apiKey: string, agentId: string) => {
  const auth = await app.request("POST", "/v1/authorize", { apiKey, body: { agentId, principalId: "user_1", scopes: ["email:read"] } })
  expect(auth.status).toBe(201)
  const approved = await app.request("POST", `/v1/consent/${auth.body.authRequestId}/approve`)
  const token = await app.request("POST", "/v1/token", { apiKey, body: { code: approved.body.code, agentId } })
  expect(token.status).toBe(201)
  return { code: approved.body.code as string, token: token.body }
}

describe("logs", () => {
  test("every line has time, level and message first; one access line per request with the route template, never a secret", async () => {
    const dev = await app.signup({ plan: "enterprise" })
    const agent = await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "A", scopes: ["email:read"] } })
    const agentId = agent.body.agentId
    await app.request("GET", `/v1/agents/${agentId}?secret=${dev.apiKey}`, { apiKey: dev.apiKey, headers: { "x-request-id": "acc-1" } })
    const { code, token } = await flow(dev.apiKey, agentId)
    // a replayed code revokes its grant: a warning naming the grant
    const replay = await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code, agentId } })
    expect(replay.status).toBe(400)
    const refreshed = await app.request("POST", "/v1/token/refresh", { apiKey: dev.apiKey, body: { refreshToken: token.refreshToken, agentId } })
    expect(refreshed.status).toBe(400) // its grant was revoked by the replay
    await app.request("GET", "/no/such/route", { headers: { "x-request-id": "acc-2" } })

    for (const line of lines) {
      expect(Object.keys(line).slice(0, 3)).toEqual(["time", "level", "message"])
      expect(line.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      expect(["debug", "info", "warn", "error"]).toContain(line.level)
      expect(line.logLevel).toBeUndefined()
    }
    const access = lines.find((l) => l.message === "request" && l.requestId === "acc-1")
    expect(access).toMatchObject({ level: "info", method: "GET", route: "/v1/agents/:id", status: 200, developerId: dev.developerId })
    expect(typeof access.durationMs).toBe("number")
    expect(lines.find((l) => l.message === "request" && l.requestId === "acc-2")).toMatchObject({ route: "unmatched", status: 404 })
    // one access line per request
    expect(lines.filter((l) => l.message === "request" && l.requestId === "acc-1")).toHaveLength(1)
    const replayed = lines.find((l) => l.message === "authorization code replayed; grant revoked")
    expect(replayed).toMatchObject({ level: "warn", developerId: dev.developerId, agentId, grantId: token.grantId, grantsRevoked: 1 })
    // no secret anywhere: API key, grant token, refresh token, code
    const all = raw.join("\n")
    for (const secret of [dev.apiKey, token.grantToken, token.refreshToken, code]) expect(all).not.toContain(secret)
    expect(all).not.toContain("?secret=")
  })

  test("LOG_LEVEL=none writes nothing at all", async () => {
    const quiet = await startTestApp({ env: { LOG_LEVEL: "none" } })
    const before = raw.length
    try {
      await quiet.signup()
      await quiet.request("GET", "/nope")
    } finally {
      await quiet.stop()
    }
    expect(raw.length).toBe(before)
  })

  test("a dependency going away and coming back is logged once each way", async () => {
    const { Dependencies } = await import("../../src/platform/Dependencies.ts")
    const { Effect } = await import("effect")
    await app.run(Effect.flatMap(Dependencies, (d) => Effect.zipRight(d.report("redis", false, "ECONNREFUSED"), d.report("redis", false, "ECONNREFUSED"))))
    await app.run(Effect.flatMap(Dependencies, (d) => Effect.zipRight(d.report("redis", true), d.report("redis", true))))
    const transitions = lines.filter((l) => l.dependency === "redis").map((l) => [l.level, l.message])
    expect(transitions).toEqual([["warn", "dependency unavailable"], ["info", "dependency available again"]])
  })
})

describe("metrics", () => {
  test("grants, tokens verified, replays, rate-limit refusals, offline and vault outcomes and the scrape-time gauges", async () => {
    const before = await scrape()
    const dev = await app.signup({ plan: "enterprise" })
    const agentId = (await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "B", scopes: ["email:read"] } })).body.agentId
    const { code, token } = await flow(dev.apiKey, agentId)
    expect((await app.request("POST", "/v1/tokens/verify", { apiKey: dev.apiKey, body: { token: token.grantToken } })).body.valid).toBe(true)
    expect((await app.request("POST", "/v1/tokens/verify", { apiKey: dev.apiKey, body: { token: "nope" } })).body.valid).toBe(false)
    await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code, agentId } })
    // a vault exchange whose credential does not exist
    const vault = await app.request("POST", "/v1/vault/credentials/exchange", { bearer: token.grantToken, body: { service: "github" } })
    expect(vault.status).toBe(401) // the replay revoked the grant
    // a free developer's plan budget is 3 a minute here
    const free = await app.signup()
    for (let i = 0; i < 4; i++) await app.request("GET", "/v1/agents", { apiKey: free.apiKey })
    const after = await scrape()
    const delta = (series: string) => metricValue(after, series) - metricValue(before, series)
    expect(delta("agent_auth_grants_issued_total")).toBe(1)
    expect(delta("agent_auth_grants_revoked_total")).toBe(1)
    expect(delta('agent_auth_tokens_verified_total{result="valid"}')).toBe(1)
    expect(delta('agent_auth_tokens_verified_total{result="invalid"}')).toBe(1)
    expect(delta('agent_auth_replays_total{kind="code"}')).toBe(1)
    expect(delta('agent_auth_vault_exchanges_total{outcome="unauthorized"}')).toBe(1)
    expect(delta('agent_auth_rate_limit_refusals_total{policy="plan-free"}')).toBe(1)
    expect(after).toContain('agent_auth_http_requests_total{method="GET",route="/v1/agents",status="200"}')
    expect(after).toContain("# TYPE agent_auth_webhook_deliveries_total counter")
    expect(after).toContain("# TYPE agent_auth_offline_entries_total counter")
    expect(after).toMatch(/^agent_auth_webhook_oldest_pending_delivery_age_seconds \d/m)
    expect(after).toMatch(/^agent_auth_breaches_open \d+$/m)
    expect(after).toMatch(/^agent_auth_breaches_overdue \d+$/m)
  })

  test("the ready probe's latency is a histogram per dependency", async () => {
    await app.request("GET", "/health/ready")
    const text = await scrape()
    expect(text).toMatch(/^agent_auth_dependency_probe_duration_seconds_count\{dependency="db",result="ok"\} [1-9]/m)
    expect(text).toMatch(/^agent_auth_dependency_probe_duration_seconds_count\{dependency="redis",result="ok"\} [1-9]/m)
  })
})

describe("health", () => {
  test("/health/live answers with the version and touches nothing; /health/ready checks db, Redis and migrations", async () => {
    const live = await app.request("GET", "/health/live")
    expect([live.status, live.body]).toEqual([200, { status: "ok", version: pkg.version }])
    const ready = await app.request("GET", "/health/ready")
    expect([ready.status, ready.body]).toEqual([200, { status: "ready", version: pkg.version, commit: expect.stringMatching(/^[0-9a-f]{40}$/), builtAt: "source", checks: { db: "ok", redis: "ok", migrations: "ok" } }])
    // exempt from rate limits, like /health
    expect(live.headers.get("x-ratelimit-limit")).toBeNull()
    expect(ready.headers.get("x-ratelimit-limit")).toBeNull()
  })

  test("a migration missing from schema_migrations: ready → 503 naming it", async () => {
    const own = await startTestApp()
    try {
      await own.query("DELETE FROM schema_migrations WHERE migration_id = 20")
      const ready = await own.request("GET", "/health/ready")
      expect(ready.status).toBe(503)
      expect(ready.body).toMatchObject({ status: "not_ready", checks: { db: "ok", redis: "ok", migrations: "pending" }, pendingMigrations: ["0020_operator_gauges"] })
      expect((await own.request("GET", "/health/live")).status).toBe(200)
    } finally {
      await own.stop()
    }
  })
})
