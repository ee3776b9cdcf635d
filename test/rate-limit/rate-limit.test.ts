/**
 * Rate limiting (issue 3): exact boundaries, window reset on TestClock, header reporting,
 * exemptions. Time is frozen on TestClock so a run never straddles a minute boundary.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { ConfigError, loadConfig } from "../../src/Config.ts"
import { clientAddress } from "../../src/platform/RateLimit.ts"
import { startTestApp, type TestApp } from "../support/app.ts"

const burst = async (app: TestApp, n: number, method: string, path: string, options: Parameters<TestApp["request"]>[2] = {}) => {
  const statuses: Array<number> = []
  // in order, a few at a time: the count must be exact whatever the interleaving
  for (let i = 0; i < n; i += 25) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(25, n - i) }, () => app.request(method, path, options).then((r) => r.status))
    )
    statuses.push(...batch)
  }
  return statuses
}

describe("plan budgets", () => {
  let app: TestApp
  beforeAll(async () => {
    app = await startTestApp({ testClock: true })
  })
  afterAll(() => app.stop())

  for (const [plan, limit] of [["free", 100], ["pro", 500], ["enterprise", 2000]] as const) {
    test(`${plan}: request ${limit} passes, ${limit + 1} answers 429 RATE_LIMIT_EXCEEDED`, async () => {
      const { apiKey } = await app.signup({ plan })
      const statuses = await burst(app, limit - 1, "GET", "/v1/me", { apiKey })
      expect(statuses.every((s) => s === 200)).toBe(true)
      const last = await app.request("GET", "/v1/me", { apiKey })
      expect(last.status).toBe(200)
      expect(last.headers.get("x-ratelimit-limit")).toBe(String(limit))
      expect(last.headers.get("x-ratelimit-remaining")).toBe("0")
      const over = await app.request("GET", "/v1/me", { apiKey })
      expect(over.status).toBe(429)
      expect(over.body).toEqual({
        code: "RATE_LIMIT_EXCEEDED",
        message: expect.any(String),
        requestId: over.headers.get("x-request-id")
      })
      expect(Number(over.headers.get("retry-after"))).toBeGreaterThan(0)
      expect(over.headers.get("x-ratelimit-limit")).toBe(String(limit))
      expect(over.headers.get("x-ratelimit-remaining")).toBe("0")
    })
  }

  test("the budget is per developer, across addresses", async () => {
    const a = await app.signup()
    const b = await app.signup()
    await burst(app, 100, "GET", "/v1/me", { apiKey: a.apiKey })
    expect((await app.request("GET", "/v1/me", { apiKey: a.apiKey })).status).toBe(429)
    expect((await app.request("GET", "/v1/me", { apiKey: b.apiKey })).status).toBe(200)
  })

  test("the window resets at the next clock minute (TestClock)", async () => {
    const { apiKey } = await app.signup()
    await burst(app, 100, "GET", "/v1/me", { apiKey })
    const over = await app.request("GET", "/v1/me", { apiKey })
    expect(over.status).toBe(429)
    const retryAfter = Number(over.headers.get("retry-after"))
    await app.adjust(`${retryAfter - 1} seconds`)
    expect((await app.request("GET", "/v1/me", { apiKey })).status).toBe(429)
    await app.adjust("1 second")
    const next = await app.request("GET", "/v1/me", { apiKey })
    expect(next.status).toBe(200)
    expect(next.headers.get("x-ratelimit-remaining")).toBe("99")
    expect(next.headers.get("x-ratelimit-reset")).toBe("60")
  })

  test("a request refused by the plan budget is not counted again", async () => {
    const { apiKey } = await app.signup()
    await burst(app, 130, "GET", "/v1/me", { apiKey })
    await app.adjust("60 seconds")
    const res = await app.request("GET", "/v1/me", { apiKey })
    expect(res.status).toBe(200)
    expect(res.headers.get("x-ratelimit-remaining")).toBe("99")
  })
})

describe("route limiter and headers", () => {
  let app: TestApp
  beforeAll(async () => {
    app = await startTestApp({ testClock: true, env: { RATE_LIMIT_ROUTE_DEFAULT: "3" } })
  })
  afterAll(() => app.stop())

  test("success on an API-key route reports the plan budget, with IETF fields", async () => {
    const { apiKey } = await app.signup()
    const res = await app.request("GET", "/v1/me", { apiKey })
    expect(res.status).toBe(200)
    expect(res.headers.get("x-ratelimit-limit")).toBe("100")
    expect(res.headers.get("x-ratelimit-remaining")).toBe("99")
    expect(res.headers.get("ratelimit-policy")).toBe('"plan-free";q=100;w=60')
    expect(res.headers.get("ratelimit")).toMatch(/^"plan-free";r=99;t=\d+$/)
    expect(res.headers.get("retry-after")).toBeNull()
  })

  test("the stricter limiter wins: route limit 3 rejects the 4th with RATE_LIMITED and reports itself", async () => {
    const { apiKey } = await app.signup()
    // the first request of this test was the signup's (another route); /v1/me has its own counter
    for (let i = 0; i < 2; i++) expect((await app.request("GET", "/v1/me", { apiKey })).status).toBe(200)
    const over = await app.request("GET", "/v1/me", { apiKey })
    expect(over.status).toBe(429)
    expect(over.body.code).toBe("RATE_LIMITED")
    expect(over.headers.get("x-ratelimit-limit")).toBe("3")
    expect(over.headers.get("x-ratelimit-remaining")).toBe("0")
    expect(over.headers.get("retry-after")).not.toBeNull()
    expect(over.headers.get("ratelimit-policy")).toBe('"route";q=3;w=60')
  })

  test("the route limit counts per source address, believing X-Forwarded-For only with TRUST_PROXY", async () => {
    const proxied = await startTestApp({ testClock: true, env: { RATE_LIMIT_ROUTE_DEFAULT: "2", TRUST_PROXY: "1" } })
    try {
      const { apiKey } = await proxied.signup({ plan: "enterprise" })
      const from = (ip: string) => proxied.request("GET", "/v1/me", { apiKey, headers: { "x-forwarded-for": ip } })
      expect((await from("203.0.113.1")).status).toBe(200)
      expect((await from("203.0.113.1")).status).toBe(200)
      expect((await from("203.0.113.1")).status).toBe(429)
      expect((await from("203.0.113.2")).status).toBe(200)
    } finally {
      await proxied.stop()
    }
    // without TRUST_PROXY the header is ignored: every request comes from 127.0.0.1
    const { apiKey } = await app.signup({ plan: "enterprise" })
    const statuses = []
    for (const ip of ["198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4"]) {
      statuses.push((await app.request("GET", "/v1/me", { apiKey, headers: { "x-forwarded-for": ip } })).status)
    }
    expect(statuses).toContain(429)
  })

  test("a route's own limit replaces the default: POST /v1/token allows 20 per address; POST /v1/signup has none", async () => {
    const isolated = await startTestApp({ testClock: true, env: { RATE_LIMIT_ROUTE_DEFAULT: "3" } })
    try {
      const { apiKey } = await isolated.signup({ plan: "enterprise" })
      // counted before the handler runs, which then refuses the empty body
      const statuses = await burst(isolated, 21, "POST", "/v1/token", { apiKey, body: {} })
      // (sent 21 at once, so which one is refused is not fixed; how many is)
      expect(statuses.filter((s) => s === 400)).toHaveLength(20)
      expect(statuses.filter((s) => s === 429)).toHaveLength(1)
      // signup has no figure of its own in the interface's table: the default (3 here) applies
      const signups = await burst(isolated, 3, "POST", "/v1/signup", { body: { name: "n" } })
      expect(signups).toEqual([201, 201, 429])
    } finally {
      await isolated.stop()
    }
  })

  test("every spelling the router accepts is the same route to the limiter (no way round a budget)", async () => {
    await app.adjust("60 seconds") // a fresh window: the tests above spent this address's /v1/me and signup counts
    const { apiKey } = await app.signup({ plan: "enterprise" })
    const spellings = ["/v1/me", "/V1/ME", "/v1/me/", "//v1/me", "/v1/%6De", "/v1/me?x=1"]
    const statuses = []
    for (const path of spellings) statuses.push((await app.request("GET", path, { apiKey })).status)
    // route default 3 in this app: three answers, then the same limiter refuses every spelling
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429])
    // HEAD runs the GET handler: the same route, the same limiter
    expect((await app.request("HEAD", "/v1/me", { apiKey })).status).toBe(429)
    const health = await app.request("GET", "/health/")
    expect(health.status).toBe(200)
    expect(health.headers.get("x-ratelimit-limit")).toBeNull()
  })

  test("a request refused for its credentials carries the headers of the limiter that counted it", async () => {
    await app.adjust("60 seconds")
    const res = await app.request("GET", "/v1/me", { apiKey: "sk_live_not-a-key" })
    expect(res.status).toBe(401)
    expect(res.headers.get("x-ratelimit-limit")).toBe("3")
    expect(Number(res.headers.get("x-ratelimit-remaining"))).toBeLessThanOrEqual(2)
    expect(res.headers.get("ratelimit-policy")).toBe('"route";q=3;w=60')
    expect(res.headers.get("retry-after")).toBeNull()
  })

  test("JWKS is exempt and /health is not counted", async () => {
    for (let i = 0; i < 10; i++) {
      const res = await app.request("GET", "/.well-known/jwks.json")
      expect(res.status).toBe(200)
      expect(res.headers.get("x-ratelimit-limit")).toBeNull()
      const health = await app.request("GET", "/health")
      expect(health.status).toBe(200)
    }
  })

  test("RATE_LIMIT_SCALE multiplies every figure", async () => {
    const scaled = await startTestApp({ testClock: true, env: { RATE_LIMIT_SCALE: "0.05" } })
    try {
      const { apiKey } = await scaled.signup()
      const statuses = await burst(scaled, 6, "GET", "/v1/me", { apiKey })
      expect(statuses.sort()).toEqual([200, 200, 200, 200, 200, 429])
    } finally {
      await scaled.stop()
    }
  })
})

describe("TRUST_PROXY", () => {
  const base = { DATABASE_URL: "pglite://memory", REDIS_URL: "memory://", AUTO_GENERATE_KEYS: "true" }

  test("a malformed CIDR list stops the start with one line naming the variable", () => {
    for (const raw of ["10.0.0.0/40", "999.1.1.1", "10.0.0.0/8/1", "fe80::/129", "proxy.internal", "10.0.0.0/x"]) {
      let error: unknown
      try {
        loadConfig({ ...base, TRUST_PROXY: raw })
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(ConfigError)
      expect((error as ConfigError).variable).toBe("TRUST_PROXY")
      expect((error as Error).message).not.toContain("\n")
    }
  })

  test("with a CIDR list, X-Forwarded-For is believed back to the first address outside it", () => {
    const { trustProxy } = loadConfig({ ...base, TRUST_PROXY: "10.0.0.0/8, 192.168.1.1, fd00::/8" })
    expect(clientAddress(trustProxy, "10.1.2.3", "203.0.113.9, 192.168.1.1")).toBe("203.0.113.9")
    expect(clientAddress(trustProxy, "10.1.2.3", "203.0.113.9, 198.51.100.7")).toBe("198.51.100.7")
    expect(clientAddress(trustProxy, "198.51.100.7", "203.0.113.9")).toBe("198.51.100.7")
    expect(clientAddress(trustProxy, "fd00::1", "2001:db8::5")).toBe("2001:db8::5")
  })
})
