/**
 * No open redirect from the consent page (decisions §19): every authorize's redirectUri is https (http
 * only to a loopback host), without userinfo or fragment, at most 2,048 characters; an agent with
 * registered redirectUris is sent only to one of them. Grant lifetimes are at most 366 days.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
let agentId: string

beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" } })
  dev = await app.signup({ plan: "enterprise" })
  agentId = await createAgent(app, dev.developerId, ["email:read"])
})
afterAll(() => app.stop())

const authorize = (body: Record<string, unknown>, agent = agentId) =>
  app.request("POST", "/v1/authorize", { apiKey: dev.apiKey, body: { agentId: agent, principalId: "user_1", scopes: ["email:read"], ...body } })
const requestCount = async () => (await app.query<{ n: number }>("SELECT count(*)::int AS n FROM auth_requests WHERE developer_id = $1", [dev.developerId]))[0]!.n

const longUri = (length: number) => {
  const base = "https://app.example/cb?x="
  return base + "a".repeat(length - base.length)
}

describe("redirectUri rules for every authorize", () => {
  test("400 INVALID_REDIRECT_URI for userinfo, public http, fragments, other schemes and over 2,048 characters; nothing stored", async () => {
    const before = await requestCount()
    for (const redirectUri of [
      "https://legit.example@evil.example/",
      "https://user:secret@app.example/cb",
      "https://@app.example/cb",
      "http://evil.example/cb",
      "http://192.168.1.10/cb",
      "http://127.0.0.1.evil.example/cb",
      "http://localhost.evil.example/cb",
      "https://app.example/cb#token",
      "https://app.example/cb#",
      "https:\\\\evil.example/cb",
      "https://app.example\\@evil.example/",
      "javascript:alert(1)",
      "data:text/html,hi",
      "ftp://app.example/cb",
      "//evil.example/cb",
      "app.example/cb",
      "",
      longUri(2049)
    ]) {
      const res = await authorize({ redirectUri })
      expect({ redirectUri, status: res.status, code: res.body.code }).toEqual({ redirectUri, status: 400, code: "INVALID_REDIRECT_URI" })
    }
    expect(await requestCount()).toBe(before)
  })

  test("https anywhere, http to 127.0.0.1, [::1] and localhost, up to 2,048 characters: 201, redirected there", async () => {
    for (const redirectUri of ["https://app.example/cb", "http://127.0.0.1:8080/cb", "http://[::1]:3000/cb", "http://localhost/cb", longUri(2048)]) {
      const res = await authorize({ redirectUri, state: "s" })
      expect({ redirectUri, status: res.status }).toEqual({ redirectUri, status: 201 })
      const approved = await app.request("POST", `/v1/consent/${res.body.authRequestId}/approve`)
      expect(approved.body).toMatchObject({ redirectUri, state: "s" })
    }
  })
})

describe("registered redirectUris", () => {
  test("POST /v1/agents registers them (shown in the agent view); authorize must name one exactly", async () => {
    const registered = ["https://app.example/callback", "http://127.0.0.1:7777/cb"]
    const created = await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "Registered", scopes: ["email:read"], redirectUris: registered } })
    expect(created.status).toBe(201)
    expect(created.body.redirectUris).toEqual(registered)
    const id = created.body.agentId
    expect((await app.request("GET", `/v1/agents/${id}`, { apiKey: dev.apiKey })).body.redirectUris).toEqual(registered)
    expect((await app.request("GET", "/v1/agents", { apiKey: dev.apiKey })).body.agents.find((a: any) => a.agentId === id).redirectUris).toEqual(registered)

    for (const redirectUri of ["https://app.example/callback/", "https://APP.example/callback", "https://app.example/callback?x=1", "https://other.example/callback"]) {
      const res = await authorize({ redirectUri }, id)
      expect({ redirectUri, status: res.status, code: res.body.code }).toEqual({ redirectUri, status: 400, code: "INVALID_REDIRECT_URI" })
    }
    for (const redirectUri of registered) expect((await authorize({ redirectUri }, id)).status).toBe(201)
    expect((await authorize({}, id)).status).toBe(201)

    // PATCH replaces them; an empty list lifts the restriction (the rules above still hold)
    const patched = await app.request("PATCH", `/v1/agents/${id}`, { apiKey: dev.apiKey, body: { redirectUris: ["https://new.example/cb"] } })
    expect(patched.body.redirectUris).toEqual(["https://new.example/cb"])
    expect((await authorize({ redirectUri: registered[0] }, id)).body.code).toBe("INVALID_REDIRECT_URI")
    expect((await app.request("PATCH", `/v1/agents/${id}`, { apiKey: dev.apiKey, body: { redirectUris: [] } })).body.redirectUris).toEqual([])
    expect((await authorize({ redirectUri: "https://anything.example/cb" }, id)).status).toBe(201)
    expect((await authorize({ redirectUri: "http://anything.example/cb" }, id)).body.code).toBe("INVALID_REDIRECT_URI")
    // agents made before redirect URIs existed show an empty list
    expect((await app.request("GET", `/v1/agents/${agentId}`, { apiKey: dev.apiKey })).body.redirectUris).toEqual([])
  })

  test("each registered URI follows the rules (400 INVALID_REDIRECT_URI), at most 20 (400 BAD_REQUEST); nothing changed", async () => {
    for (const uri of ["https://legit.example@evil.example/", "http://evil.example/cb", "https://app.example/#f", longUri(2049)]) {
      const res = await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "Bad", redirectUris: ["https://ok.example/cb", uri] } })
      expect({ uri, status: res.status, code: res.body.code }).toEqual({ uri, status: 400, code: "INVALID_REDIRECT_URI" })
    }
    const tooMany = Array.from({ length: 21 }, (_, i) => `https://app.example/cb${i}`)
    const many = await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "Many", redirectUris: tooMany } })
    expect([many.status, many.body.code]).toEqual([400, "BAD_REQUEST"])
    expect((await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "Twenty", redirectUris: tooMany.slice(0, 20) } })).status).toBe(201)
    const names = await app.query<{ name: string }>("SELECT name FROM agents WHERE developer_id = $1 AND name IN ('Bad', 'Many')", [dev.developerId])
    expect(names).toEqual([])

    const id = (await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "Kept", redirectUris: ["https://kept.example/cb"] } })).body.agentId
    const bad = await app.request("PATCH", `/v1/agents/${id}`, { apiKey: dev.apiKey, body: { name: "Changed", redirectUris: ["http://evil.example/"] } })
    expect([bad.status, bad.body.code]).toEqual([400, "INVALID_REDIRECT_URI"])
    const kept = (await app.request("GET", `/v1/agents/${id}`, { apiKey: dev.apiKey })).body
    expect([kept.name, kept.redirectUris]).toEqual(["Kept", ["https://kept.example/cb"]])
  })
})

describe("grant lifetimes", () => {
  test("authorize: expiresIn over 366 days → 400 BAD_REQUEST; 366 days is accepted", async () => {
    for (const expiresIn of ["367d", "8785h", "527041m", "31622401s", "25000d"]) {
      const res = await authorize({ expiresIn })
      expect({ expiresIn, status: res.status, code: res.body.code }).toEqual({ expiresIn, status: 400, code: "BAD_REQUEST" })
    }
    for (const expiresIn of ["366d", "8784h", "31622400s"]) expect((await authorize({ expiresIn })).status).toBe(201)
  })

  test("sandbox: the grant approved at once lives at most 366 days", async () => {
    const sandbox = await app.signup({ mode: "sandbox" })
    const agent = await createAgent(app, sandbox.developerId, ["email:read"])
    const ask = (expiresIn: string) =>
      app.request("POST", "/v1/authorize", { apiKey: sandbox.apiKey, body: { agentId: agent, principalId: "p", scopes: ["email:read"], expiresIn } })
    const tooLong = await ask("400d")
    expect([tooLong.status, tooLong.body.code]).toEqual([400, "BAD_REQUEST"])
    const ok = await ask("366d")
    expect(ok.status).toBe(201)
    const token = await app.request("POST", "/v1/token", { apiKey: sandbox.apiKey, body: { code: ok.body.code, agentId: agent } })
    const [grant] = await app.query<{ issuedAt: Date; expiresAt: Date }>("SELECT issued_at, expires_at FROM grants WHERE id = $1", [token.body.grantId])
    // (issued_at is read a moment after the approval's clock reading: within a second of 366 days)
    const lifetime = new Date(grant!.expiresAt).getTime() - new Date(grant!.issuedAt).getTime()
    expect(lifetime).toBeLessThanOrEqual(366 * 86400_000)
    expect(lifetime).toBeGreaterThan(366 * 86400_000 - 1000)
  })

  test("delegation: expiresIn over 366 days → 400 BAD_REQUEST, even under a long parent", async () => {
    const sub = await createAgent(app, dev.developerId, ["email:read"], "Sub")
    const root = await issueGrant(app, { developerId: dev.developerId, agentId, scopes: ["email:read"], expiresInSeconds: 400 * 86400 })
    const delegate = (expiresIn: string) =>
      app.request("POST", "/v1/grants/delegate", { apiKey: dev.apiKey, body: { parentGrantToken: root.token.grantToken, subAgentId: sub, scopes: ["email:read"], expiresIn } })
    const refused = await delegate("367d")
    expect([refused.status, refused.body.code]).toEqual([400, "BAD_REQUEST"])
    expect((await delegate("366d")).status).toBe(201)
  })
})
