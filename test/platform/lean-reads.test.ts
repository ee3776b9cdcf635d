/**
 * Issue 27: the light API-key reads (GET /v1/me, GET /v1/consent-bundles/:id and its revocation
 * status) are answered outside HttpApiBuilder (src/platform/LeanRoutes.ts). Each lean answer must
 * be the API's: status, body, every header (rate-limit headers included), the request metric and
 * the access line, for success, not found, a missing or wrong key, and a spent budget. The clock
 * stands still (TestClock), so both answers see the same window; the API's answer comes second,
 * so its budget has one request less.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { createDatabase, startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"
import { startProxy } from "../support/proxy.ts"
import { syncCedar } from "../policies/support.ts"

let app: TestApp
const lines: Array<string> = []
const consoleLog = console.log

beforeAll(async () => {
  app = await startTestApp({ testClock: true, env: { LOG_LEVEL: "info", RATE_LIMIT_PLAN_FREE: "30" } })
  console.log = (...args: Array<unknown>) => void lines.push(args.map(String).join(" "))
})
afterAll(async () => {
  console.log = consoleLog
  await app?.stop()
})

interface Answer {
  readonly status: number
  readonly body: string
  readonly headers: Array<[string, string]>
  readonly metric: number
  readonly access: Array<Record<string, unknown>>
}

const metricOf = async (route: string, status: number, method = "GET") => {
  const text = await (await app.server.viaApi(new Request(`${app.url}/metrics`))).text()
  const match = text.split("\n").find((l) => l.includes(`http_requests_total{method="${method}",route="${route}",status="${status}"}`))
  return match === undefined ? 0 : Number(match.split(" ").at(-1))
}

const ask = async (handler: (r: Request) => Promise<Response> | undefined, path: string, route: string, status: number, headers: Record<string, string>, sent?: string): Promise<Answer> => {
  const method = sent === undefined ? "GET" : "POST"
  const before = await metricOf(route, status, method)
  lines.length = 0
  const pending = handler(new Request(`${app.url}${path}`, { method, headers, body: sent }))
  expect(pending).toBeDefined()
  const response = await pending!
  const body = await response.text()
  const access = lines.map((l) => { try { return JSON.parse(l) } catch { return {} } })
    .filter((l) => l.message === "request")
    .map(({ time, durationMs, ...rest }) => ({ ...rest, timed: typeof time === "string" && typeof durationMs === "number" }))
  const metric = (await metricOf(route, status, method)) - before
  return { status: response.status, body, headers: [...response.headers.entries()].filter(([k]) => k !== "date").sort(([a], [b]) => a.localeCompare(b)), metric, access }
}

/** the lean answer, then the API's: equal but for the budget the first one spent */
const same = async (path: string, route: string, status: number, apiKey?: string, body?: string, contentType = "application/json", extra: Record<string, string> = {}) => {
  const headers: Record<string, string> = { "x-request-id": `probe-${Math.random().toString(36).slice(2, 8)}`, ...extra }
  if (apiKey !== undefined) headers.authorization = `Bearer ${apiKey}`
  // as a client sends it over the wire (a Request made in process carries no length of its own)
  if (body !== undefined) Object.assign(headers, { "content-type": contentType, "content-length": String(Buffer.byteLength(body)) })
  const lean = await ask(app.server.lean, path, route, status, headers, body)
  const api = await ask(app.server.viaApi, path, route, status, headers, body)
  const remaining = (a: Answer) => Number(a.headers.find(([k]) => k === "x-ratelimit-remaining")?.[1])
  const spent = status === 429 ? 0 : 1
  expect(remaining(api)).toBe(remaining(lean) - spent)
  const withoutBudget = (a: Answer) => ({
    ...a,
    headers: a.headers.filter(([k]) => k !== "x-ratelimit-remaining" && k !== "ratelimit")
  })
  expect(withoutBudget(lean)).toEqual(withoutBudget(api))
  expect(lean.status).toBe(status)
  expect(lean.metric).toBe(1)
  expect(lean.access).toHaveLength(1)
  expect(lean.access[0]).toMatchObject({ method: body === undefined ? "GET" : "POST", route, status, requestId: headers["x-request-id"] })
  expect(lean.headers).toContainEqual(["x-content-type-options", "nosniff"])
  return { lean, body: JSON.parse(lean.body) }
}

test("GET /v1/me, a bundle and its revocation status: the lean answer is the API's", async () => {
  const { apiKey, developerId } = await app.signup({ mode: "sandbox" })
  const agent = await app.request("POST", "/v1/agents", { apiKey, body: { name: "lean", scopes: ["email:read"] } })
  const bundle = await app.request("POST", "/v1/consent-bundles", { apiKey, body: { agentId: agent.body.agentId, userId: "u1", scopes: ["email:read"] } })
  expect(bundle.status).toBe(201)
  const id = bundle.body.bundleId as string

  const me = await same("/v1/me", "/v1/me", 200, apiKey)
  expect(me.body).toMatchObject({ developerId, mode: "sandbox", plan: "free" })
  expect(me.lean.access[0]).toMatchObject({ developerId })
  expect(me.lean.headers).toContainEqual(["ratelimit-policy", '"plan-free";q=30;w=60'])

  const got = await same(`/v1/consent-bundles/${id}`, "/v1/consent-bundles/:id", 200, apiKey)
  expect(got.body).toMatchObject({ id, agentId: agent.body.agentId, userId: "u1", scopes: ["email:read"], status: "active", lastSyncAt: null, auditEntryCount: 0 })
  const status = await same(`/v1/consent-bundles/${id}/revocation-status`, "/v1/consent-bundles/:id/revocation-status", 200, apiKey)
  expect(status.body).toEqual({ bundleId: id, status: "active", revokedAt: null })

  expect((await app.request("POST", `/v1/consent-bundles/${id}/revoke`, { apiKey })).status).toBe(200)
  const revoked = await same(`/v1/consent-bundles/${id}/revocation-status`, "/v1/consent-bundles/:id/revocation-status", 200, apiKey)
  expect(revoked.body).toMatchObject({ bundleId: id, status: "revoked", revokedAt: expect.any(String) })
  expect((await same(`/v1/consent-bundles/${id}`, "/v1/consent-bundles/:id", 200, apiKey)).body.status).toBe("revoked")

  // another developer's bundle, or none: 404 BUNDLE_NOT_FOUND on both paths
  const other = await app.signup()
  const missing = await same(`/v1/consent-bundles/${id}`, "/v1/consent-bundles/:id", 404, other.apiKey)
  expect(missing.body).toMatchObject({ code: "BUNDLE_NOT_FOUND", requestId: expect.any(String) })
  expect((await same("/v1/consent-bundles/bnd_nothing/revocation-status", "/v1/consent-bundles/:id/revocation-status", 404, apiKey)).body.code)
    .toBe("BUNDLE_NOT_FOUND")
})

test("POST /v1/tokens/verify: valid, invalid, another developer's token, and bodies the API refuses, alike on both paths", async () => {
  const { apiKey, developerId } = await app.signup()
  const agentId = await createAgent(app, developerId, ["email:read"])
  const { token } = await issueGrant(app, { developerId, agentId, scopes: ["email:read"] })
  const tokensVerified = async () => {
    const text = await (await app.server.viaApi(new Request(`${app.url}/metrics`))).text()
    return text.split("\n").filter((l) => l.startsWith("agent_auth_tokens_verified_total{")).join("\n")
  }
  const before = await tokensVerified()
  const valid = await same("/v1/tokens/verify", "/v1/tokens/verify", 200, apiKey, JSON.stringify({ token: token.grantToken }))
  expect(valid.body).toMatchObject({ valid: true, scopes: ["email:read"], agent: expect.stringContaining(agentId) })
  expect(await tokensVerified()).not.toBe(before)
  expect((await same("/v1/tokens/verify", "/v1/tokens/verify", 200, apiKey, JSON.stringify({ token: "not.a.token" }))).body).toEqual({ valid: false })
  const other = await app.signup()
  expect((await same("/v1/tokens/verify", "/v1/tokens/verify", 200, other.apiKey, JSON.stringify({ token: token.grantToken }))).body)
    .toEqual({ valid: false })
  // bodies the payload schema or the reader refuses: the API answers them, counted once
  const missing = await same("/v1/tokens/verify", "/v1/tokens/verify", 400, apiKey, JSON.stringify({ jwt: "x" }))
  expect(missing.body).toMatchObject({ code: "BAD_REQUEST", details: expect.any(Array) })
  expect((await same("/v1/tokens/verify", "/v1/tokens/verify", 400, apiKey, "{not json")).body.code).toBe("BAD_REQUEST")
  expect((await same("/v1/tokens/verify", "/v1/tokens/verify", 415, apiKey, JSON.stringify({ token: "x" }), "text/plain")).body.code)
    .toBe("UNSUPPORTED_MEDIA_TYPE")
  expect((await same("/v1/tokens/verify", "/v1/tokens/verify", 401, "sk_test_not_a_real_key_0000000000", JSON.stringify({ token: "x" }))).body.code)
    .toBe("UNAUTHORIZED")
})

test("POST /v1/vault/credentials/exchange (grant token): success, 401, 400, 403 and 404 alike on both paths", async () => {
  const { apiKey, developerId } = await app.signup()
  const agentId = await createAgent(app, developerId, ["github:read", "email:read"])
  const stored = await app.request("POST", "/v1/vault/credentials", { apiKey, body: { principalId: "user_1", service: "github", accessToken: "gho_lean_TOKEN" } })
  expect(stored.status).toBe(201)
  const route = "/v1/vault/credentials/exchange"
  const tokenFor = async (scopes: Array<string>) => (await issueGrant(app, { developerId, agentId, scopes })).token.grantToken
  const ok = await same(route, route, 200, await tokenFor(["github:read"]), JSON.stringify({ service: "github" }))
  expect(ok.body).toMatchObject({ accessToken: "gho_lean_TOKEN" })
  expect(ok.lean.access[0]).toMatchObject({ developerId })
  // both exchanges committed their event and audit entry
  const events = await app.query("SELECT count(*)::int AS n FROM events WHERE developer_id = $1 AND type = 'vault.credential.exchanged'", [developerId])
  expect(events[0].n).toBe(2)
  expect((await same(route, route, 401, undefined, JSON.stringify({ service: "github" }))).body.code).toBe("UNAUTHORIZED")
  expect((await same(route, route, 401, "not.a.token", JSON.stringify({ service: "github" }))).body.code).toBe("UNAUTHORIZED")
  expect((await same(route, route, 400, await tokenFor(["github:read"]), JSON.stringify({}))).body.code).toBe("BAD_REQUEST")
  expect((await same(route, route, 403, await tokenFor(["email:read"]), JSON.stringify({ service: "github" }))).body.code).toBe("FORBIDDEN")
  expect((await same(route, route, 404, await tokenFor(["gitlab:read"]), JSON.stringify({ service: "gitlab" }))).body.code).toBe("NOT_FOUND")
})

test("the exchange's policies see the request (its user agent) on the lean path as on the API's", async () => {
  const { apiKey, developerId } = await app.signup()
  const agentId = await createAgent(app, developerId, ["github:read"])
  expect((await app.request("POST", "/v1/vault/credentials", { apiKey, body: { principalId: "user_1", service: "github", accessToken: "gho_ua" } })).status).toBe(201)
  await syncCedar(app, apiKey, `forbid(principal, action == Action::"vault.exchange", resource)
    when { context.request has userAgent && context.request.userAgent == "blocked-agent" };`)
  const route = "/v1/vault/credentials/exchange"
  const token = async () => (await issueGrant(app, { developerId, agentId, scopes: ["github:read"] })).token.grantToken
  const body = JSON.stringify({ service: "github" })
  const blocked = await same(route, route, 403, await token(), body, "application/json", { "user-agent": "blocked-agent" })
  expect(blocked.body.code).toBe("FORBIDDEN")
  expect((await same(route, route, 200, await token(), body, "application/json", { "user-agent": "fine-agent" })).body.accessToken).toBe("gho_ua")
})

test("a missing or wrong key (401) and a spent budget (429) are refused alike, with the same headers", async () => {
  const noKey = await same("/v1/me", "/v1/me", 401)
  expect(noKey.body).toMatchObject({ code: "UNAUTHORIZED", message: "Invalid or missing API key" })
  expect(noKey.lean.headers.find(([k]) => k === "ratelimit-policy")?.[1]).toMatch(/^"route";/)
  expect((await same("/v1/me", "/v1/me", 401, "sk_test_not_a_real_key_0000000000")).body.code).toBe("UNAUTHORIZED")

  const { apiKey } = await app.signup()
  for (let i = 0; i < 30; i++) expect((await app.request("GET", "/v1/me", { apiKey })).status).toBe(200)
  const spent = await same("/v1/me", "/v1/me", 429, apiKey)
  expect(spent.body).toMatchObject({ code: "RATE_LIMIT_EXCEEDED" })
  expect(spent.lean.headers.find(([k]) => k === "retry-after")).toBeDefined()
})

test("what the lean path does not recognise exactly goes to the API, uncounted by the lean path", async () => {
  const { apiKey } = await app.signup()
  const headers = { authorization: `Bearer ${apiKey}` }
  for (const [method, path] of [
    ["GET", "/v1/me?x=1"], ["GET", "/v1/me/"], ["GET", "/V1/me"], ["HEAD", "/v1/me"], ["PATCH", "/v1/me"],
    ["GET", "/v1/consent-bundles/a%2Fb"], ["GET", "/v1/consent-bundles"], ["GET", "/v1/agents"], ["GET", "/v1/tokens/verify"],
    ["POST", "/v1/tokens/verify?x=1"], ["POST", "/v1/tokens/revoke"]
  ] as const) {
    expect(app.server.lean(new Request(`${app.url}${path}`, { method, headers }))).toBeUndefined()
  }
  // and over the wire, the handler answers them through the API as before
  expect((await app.request("GET", "/v1/me?x=1", { apiKey })).status).toBe(200)
  expect((await app.request("GET", "/v1/me/", { apiKey })).status).toBe(200)
})

test.skipIf(!usingRealPostgres)("PostgreSQL away: a lean read answers 503 DATABASE_UNAVAILABLE as the API does", async () => {
  const db = await createDatabase()
  const direct = new URL(db.url)
  const proxy = await startProxy(direct.hostname, Number(direct.port || 5432))
  const viaProxy = new URL(db.url)
  viaProxy.hostname = "127.0.0.1"
  viaProxy.port = String(proxy.port)
  const own = await startTestApp({ databaseUrl: viaProxy.toString() })
  try {
    const known = await own.signup()
    const unseen = await own.signup()
    // the first key is looked up (and cached) before the cut, the second one never
    expect((await own.server.lean(new Request(`${own.url}/v1/me`, { headers: { authorization: `Bearer ${known.apiKey}` } }))!).status).toBe(200)
    await proxy.cut()
    const ask = async (handler: (r: Request) => Promise<Response> | undefined, apiKey: string) => {
      const response = await handler(new Request(`${own.url}/v1/consent-bundles/bnd_x`, { headers: { authorization: `Bearer ${apiKey}`, "x-request-id": "cut-1" } }))!
      const headers = [...response.headers.entries()].filter(([k]) => k !== "date" && k !== "x-ratelimit-remaining" && k !== "ratelimit")
      return { status: response.status, body: await response.text(), headers: headers.sort(([a], [b]) => a.localeCompare(b)) }
    }
    // the bundle's read fails (the key was cached), and the key's own lookup fails: 503 on both paths
    for (const apiKey of [known.apiKey, unseen.apiKey]) {
      const lean = await ask(own.server.lean, apiKey)
      expect(lean.status).toBe(503)
      expect(JSON.parse(lean.body)).toEqual({ code: "DATABASE_UNAVAILABLE", message: "Database unavailable; try again shortly", requestId: "cut-1" })
      expect(lean).toEqual(await ask(own.server.viaApi, apiKey))
    }
  } finally {
    await own.stop()
    await proxy.close()
    await db.drop()
  }
}, 120_000)
