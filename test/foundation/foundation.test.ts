import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Clock, Effect } from "effect"
import { startTestApp, type TestApp } from "../support/app.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(async () => {
  await app.stop()
})

describe("health, jwks and docs", () => {
  test("GET /health answers ok with both dependencies up", async () => {
    const res = await app.request("GET", "/health")
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ status: "ok" })
    expect(res.headers.get("x-ratelimit-limit")).toBeNull()
  })

  test("JWKS publishes the RS256 key with an RFC 7638 kid", async () => {
    const res = await app.request("GET", "/.well-known/jwks.json")
    expect(res.status).toBe(200)
    expect(res.body.keys).toHaveLength(1)
    const key = res.body.keys[0]
    expect(key).toMatchObject({ kty: "RSA", alg: "RS256", use: "sig" })
    const { calculateJwkThumbprint } = await import("jose")
    expect(key.kid).toBe(await calculateJwkThumbprint({ kty: key.kty, n: key.n, e: key.e }))
  })

  test("OpenAPI 3.1 document and the docs page", async () => {
    const spec = await app.request("GET", "/openapi.json")
    expect(spec.status).toBe(200)
    expect(spec.body.openapi).toBe("3.1.0")
    expect(Object.keys(spec.body.paths)).toContain("/v1/signup")
    const docs = await app.request("GET", "/docs")
    expect(docs.status).toBe(200)
    expect(docs.headers.get("content-type")).toContain("text/html")
  })

  test("metrics in Prometheus text format", async () => {
    const res = await app.request("GET", "/metrics")
    expect(res.status).toBe(200)
    expect(res.text).toContain("http_requests_total{")
    expect(res.text).toContain("http_request_duration_seconds_bucket{")
    expect(res.text).toContain("process_resident_memory_bytes")
  })
})

describe("errors", () => {
  test("unknown route → 404 NOT_FOUND with the request id", async () => {
    const res = await app.request("GET", "/v1/nothing-here", { headers: { "x-request-id": "trace-123" } })
    expect(res.status).toBe(404)
    expect(res.body).toEqual({ code: "NOT_FOUND", message: "No such route", requestId: "trace-123" })
    expect(res.headers.get("x-request-id")).toBe("trace-123")
  })

  test("malformed JSON → 400 BAD_REQUEST in the error shape", async () => {
    const res = await app.request("POST", "/v1/signup", { rawBody: "{not json" })
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("BAD_REQUEST")
    expect(res.body.requestId).toBe(res.headers.get("x-request-id"))
  })

  test("schema failure → 400 with details", async () => {
    const res = await app.request("POST", "/v1/signup", { body: { name: "" } })
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("BAD_REQUEST")
    expect(res.body.details[0].path).toBe("name")
  })

  test("a malformed X-Request-Id is replaced by a generated one", async () => {
    const res = await app.request("GET", "/v1/nothing", { headers: { "x-request-id": "bad id with spaces" } })
    expect(res.body.requestId).toMatch(/^req_[0-9A-Z]{26}$/)
  })
})

describe("developers and keys", () => {
  test("signup, me, patch, rotate; the old key stops working", async () => {
    const signup = await app.request("POST", "/v1/signup", { body: { name: "Acme", email: "ops@acme.test" } })
    expect(signup.status).toBe(201)
    expect(signup.body).toMatchObject({ name: "Acme", email: "ops@acme.test", mode: "live", plan: "free" })
    expect(signup.body.apiKey).toMatch(/^sk_live_[A-Za-z0-9_-]{43}$/)
    expect(signup.body.developerId).toMatch(/^dev_[0-9A-Z]{26}$/)
    const stored = await app.query<{ apiKeyHash: string }>("SELECT api_key_hash FROM developers WHERE id = $1", [signup.body.developerId])
    expect(stored[0]!.apiKeyHash).toMatch(/^[0-9a-f]{64}$/)
    expect(stored[0]!.apiKeyHash).not.toContain(signup.body.apiKey)

    const me = await app.request("GET", "/v1/me", { apiKey: signup.body.apiKey })
    expect(me.status).toBe(200)
    expect(me.body.developerId).toBe(signup.body.developerId)
    expect(me.body.apiKey).toBeUndefined()

    const patched = await app.request("PATCH", "/v1/me", { apiKey: signup.body.apiKey, body: { fidoRequired: true } })
    expect(patched.status).toBe(200)
    expect(patched.body.fidoRequired).toBe(true)

    const rotated = await app.request("POST", "/v1/keys/rotate", { apiKey: signup.body.apiKey })
    expect(rotated.status).toBe(200)
    expect(rotated.body.apiKey).not.toBe(signup.body.apiKey)
    expect((await app.request("GET", "/v1/me", { apiKey: signup.body.apiKey })).status).toBe(401)
    expect((await app.request("GET", "/v1/me", { apiKey: rotated.body.apiKey })).status).toBe(200)
  })

  test("duplicate email → 409 CONFLICT", async () => {
    await app.request("POST", "/v1/signup", { body: { name: "A", email: "dup@x.test" } })
    const res = await app.request("POST", "/v1/signup", { body: { name: "B", email: "DUP@x.test" } })
    expect(res.status).toBe(409)
    expect(res.body.code).toBe("CONFLICT")
  })

  test("sandbox keys start sk_test_", async () => {
    const res = await app.request("POST", "/v1/signup", { body: { name: "S", mode: "sandbox" } })
    expect(res.body.apiKey).toStartWith("sk_test_")
  })

  test("missing and invalid keys → 401 UNAUTHORIZED", async () => {
    for (const headers of [{}, { authorization: "Bearer sk_live_nope_nope_nope_nope_nope" }, { authorization: "Basic abc" }] as Array<Record<string, string>>) {
      const res = await app.request("GET", "/v1/me", { headers })
      expect(res.status).toBe(401)
      expect(res.body.code).toBe("UNAUTHORIZED")
    }
  })
})

test("TestClock drives the service's clock", async () => {
  const clocked = await startTestApp({ testClock: true, startTime: Date.parse("2030-01-01T00:00:00Z") })
  try {
    expect(await clocked.run(Clock.currentTimeMillis)).toBe(Date.parse("2030-01-01T00:00:00Z"))
    await clocked.adjust("72 hours")
    expect(await clocked.run(Clock.currentTimeMillis)).toBe(Date.parse("2030-01-04T00:00:00Z"))
    const res = await clocked.request("POST", "/v1/signup", { body: { name: "T" } })
    expect(res.body.createdAt).toBe("2030-01-04T00:00:00.000Z")
  } finally {
    await clocked.stop()
  }
})

void Effect
