/**
 * Messages that say what to do (issue 17 item 3): an unknown event type names the valid ones, the
 * vault's 403 names the scope forms it accepts, a body not sent as JSON is told so, schema errors are
 * plain words without schema text or the value sent, a 429 says how long to wait.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { EVENT_TYPES } from "../../src/platform/Events.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }

beforeAll(async () => {
  app = await startTestApp()
  dev = await app.signup()
})
afterAll(() => app.stop())

describe("what to do instead", () => {
  test("an unknown webhook event type is named with the valid ones", async () => {
    const res = await app.request("POST", "/v1/webhooks", {
      apiKey: dev.apiKey,
      body: { url: "https://example.com/hook", events: ["grant.created", "grant.creatd"] }
    })
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("BAD_REQUEST")
    expect(res.body.message).toContain('"grant.creatd"')
    for (const type of EVENT_TYPES) expect(res.body.message).toContain(type)
  })

  test("the vault's 403 names the scope forms that would allow the exchange", async () => {
    const agentId = await createAgent(app, dev.developerId, ["calendar:read"])
    const { token } = await issueGrant(app, { developerId: dev.developerId, agentId, scopes: ["calendar:read"] })
    const res = await app.request("POST", "/v1/vault/credentials/exchange", { bearer: token.grantToken, body: { service: "github" } })
    expect(res.status).toBe(403)
    expect(res.body.code).toBe("FORBIDDEN")
    for (const scope of ["github:read", "github:credentials:read", "github:*", "vault:github:read", "vault:github:*", "vault:credentials:exchange"]) {
      expect(res.body.message).toContain(scope)
    }
  })

  test("a body sent without a JSON content type is refused with 415 and told which header to send", async () => {
    // what `curl -d '{"name":"x"}'` sends without -H: a form, whose fields all looked "missing"
    const form = await app.request("POST", "/v1/agents", {
      apiKey: dev.apiKey,
      rawBody: '{"name":"x"}',
      headers: { "content-type": "application/x-www-form-urlencoded" }
    })
    expect(form.status).toBe(415)
    expect(form.body).toMatchObject({ code: "UNSUPPORTED_MEDIA_TYPE", requestId: form.headers.get("x-request-id") })
    expect(form.body.message).toContain("Content-Type: application/json")
    expect(form.body.message).toContain("application/x-www-form-urlencoded")
    expect(form.body.message).not.toContain("missing")
    // a browser's fetch with a string body sends text/plain; a raw client may send no type at all
    const plain = await fetch(`${app.url}/v1/signup`, { method: "POST", body: '{"name":"x"}', headers: { "content-type": "text/plain;charset=UTF-8" } })
    expect(plain.status).toBe(415)
    expect((await plain.json()).message).toContain("text/plain")
    const untyped = await fetch(`${app.url}/v1/signup`, { method: "POST", body: '{"name":"x"}' })
    expect(untyped.status).toBe(415)
    expect((await untyped.json()).message).toContain("no Content-Type")
    const typed = await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, rawBody: '{"name":"x"}', headers: { "content-type": "application/json; charset=utf-8" } })
    expect(typed.status).toBe(201)
    // a POST without a body is not concerned
    const bare = await fetch(`${app.url}/v1/keys/rotate`, { method: "POST", headers: { authorization: `Bearer ${dev.apiKey}` } })
    expect(bare.status).toBe(200)
    dev = { ...dev, apiKey: (await bare.json()).apiKey }
  })

  test("schema errors are plain words: no schema text, no value echoed back", async () => {
    const cases: Array<[string, string, unknown, string, string]> = [
      ["POST", "/v1/agents", {}, "name", "is required"],
      ["POST", "/v1/agents", { name: 5 }, "name", "must be a string"],
      ["POST", "/v1/agents", { name: "" }, "name", "must not be empty"],
      ["POST", "/v1/agents", { name: "a".repeat(201) }, "name", "must be at most 200 characters long"],
      ["POST", "/v1/agents", { name: "a", scopes: "email:read" }, "scopes", "must be an array"],
      ["POST", "/v1/agents", [], "", "the body must be a JSON object"],
      ["PATCH", "/v1/agents/ag_x", { status: "paused" }, "status", 'must be one of "active", "suspended"'],
      ["POST", "/v1/budget/allocate", { grantId: "g", initialBudget: "SECRET_VALUE" }, "initialBudget", "must be a number"],
      ["POST", "/v1/vault/credentials", { principalId: "p", service: "s", accessToken: 12345678 }, "accessToken", "must be a string"],
      ["POST", "/v1/webauthn/register/verify", { challengeId: "c", response: null }, "response", "must be an object"],
      ["PATCH", "/v1/me", { fidoRequired: "yes" }, "fidoRequired", "must be true or false"]
    ]
    for (const [method, path, body, field, words] of cases) {
      const res = await app.request(method, path, { apiKey: dev.apiKey, body })
      const where = `${method} ${path} ${JSON.stringify(body).slice(0, 60)}`
      expect({ where, status: res.status }).toEqual({ where, status: 400 })
      expect({ where, details: res.body.details }).toEqual({ where, details: [{ path: field, message: words }] })
      expect({ where, message: res.body.message }).toEqual({ where, message: `Invalid request: ${field ? `${field}: ` : ""}${words}` })
      for (const internal of ["Expected", "actual", "readonly", "minLength", "maxLength", "SECRET_VALUE", "12345678"]) {
        expect({ where, text: res.text.includes(internal) }).toEqual({ where, text: false })
      }
    }
  })
})

describe("a 429 says how long to wait", () => {
  let limited: TestApp
  beforeAll(async () => {
    limited = await startTestApp({ testClock: true, env: { RATE_LIMIT_ROUTE_DEFAULT: "2", RATE_LIMIT_SCALE: "1" } })
  })
  afterAll(() => limited.stop())

  test("in words, the same figure as Retry-After (route limiter)", async () => {
    // 25 s into a one-minute window: 35 seconds to wait
    await limited.setTime(1_000 * 60_000 + 25_000)
    const { apiKey } = await limited.signup()
    await limited.request("GET", "/v1/me", { apiKey })
    await limited.request("GET", "/v1/me", { apiKey })
    const route = await limited.request("GET", "/v1/me", { apiKey })
    expect(route.status).toBe(429)
    expect(route.body.code).toBe("RATE_LIMITED")
    expect(route.headers.get("retry-after")).toBe("35")
    expect(route.body.message).toBe("Too many requests to this route; retry in 35 seconds")
    await limited.adjust("34 seconds")
    const last = await limited.request("GET", "/v1/me", { apiKey })
    expect(last.headers.get("retry-after")).toBe("1")
    expect(last.body.message).toBe("Too many requests to this route; retry in 1 second")
  })
})

describe("a 429 of the plan budget", () => {
  let limited: TestApp
  beforeAll(async () => {
    // plan free: 100 × 0.05 = 5 a minute; the route default (5,000 × 0.05) stays far above it
    limited = await startTestApp({ testClock: true, env: { RATE_LIMIT_SCALE: "0.05" } })
  })
  afterAll(() => limited.stop())

  test("says the same", async () => {
    await limited.setTime(1_000 * 60_000 + 48_000)
    const { apiKey } = await limited.signup()
    for (let i = 0; i < 5; i++) expect((await limited.request("GET", "/v1/me", { apiKey })).status).toBe(200)
    const over = await limited.request("GET", "/v1/me", { apiKey })
    expect(over.status).toBe(429)
    expect(over.body.code).toBe("RATE_LIMIT_EXCEEDED")
    expect(over.headers.get("retry-after")).toBe("12")
    expect(over.body.message).toBe("Rate limit exceeded; retry in 12 seconds")
  })
})
