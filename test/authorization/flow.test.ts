/** The core flow end to end over HTTP: agent → authorize → consent → token → refresh → verify. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { createLocalJWKSet, jwtVerify } from "jose"
import { startTestApp, type TestApp } from "../support/app.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
let agentId: string

beforeAll(async () => {
  // authorize allows 10/min per address and per developer: lifted here, its own test below
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" } })
  dev = await app.signup({ plan: "enterprise" })
  const agent = await app.request("POST", "/v1/agents", {
    apiKey: dev.apiKey,
    body: { name: "Mail helper", description: "Sorts your inbox", scopes: ["email:read", "email:write", "calendar:read"] }
  })
  expect(agent.status).toBe(201)
  agentId = agent.body.agentId
})
afterAll(() => app.stop())

const authorize = (body: Record<string, unknown>, apiKey = dev.apiKey) =>
  app.request("POST", "/v1/authorize", { apiKey, body: { agentId, principalId: "user_42", scopes: ["email:read"], ...body } })

describe("agents", () => {
  test("create, get, list, patch, delete; DID; tenant isolation", async () => {
    const created = await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "A", scopes: ["x:read", "x:read"] } })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ name: "A", description: null, scopes: ["x:read"], status: "active", developerId: dev.developerId })
    expect(created.body.did).toBe(`did:service:${created.body.agentId}`)
    const id = created.body.agentId
    expect((await app.request("GET", `/v1/agents/${id}`, { apiKey: dev.apiKey })).body.name).toBe("A")
    const list = await app.request("GET", "/v1/agents", { apiKey: dev.apiKey })
    expect(list.body.agents.map((a: any) => a.agentId)).toContain(id)
    const patched = await app.request("PATCH", `/v1/agents/${id}`, { apiKey: dev.apiKey, body: { status: "suspended", scopes: ["y:read"] } })
    expect(patched.body).toMatchObject({ status: "suspended", scopes: ["y:read"] })
    const other = await app.signup()
    expect((await app.request("GET", `/v1/agents/${id}`, { apiKey: other.apiKey })).status).toBe(404)
    expect((await app.request("DELETE", `/v1/agents/${id}`, { apiKey: other.apiKey })).status).toBe(404)
    expect((await app.request("GET", "/v1/agents", { apiKey: other.apiKey })).body.agents).toEqual([])
    expect((await app.request("DELETE", `/v1/agents/${id}`, { apiKey: dev.apiKey })).status).toBe(204)
    expect((await app.request("GET", `/v1/agents/${id}`, { apiKey: dev.apiKey })).status).toBe(404)
  })
})

describe("agents list", () => {
  test("pages of the interface's size (default 50, at most 100), newest first, each agent once", async () => {
    const d = await app.signup({ plan: "enterprise" })
    const ids: Array<string> = []
    for (let i = 0; i < 5; i++) ids.push((await app.request("POST", "/v1/agents", { apiKey: d.apiKey, body: { name: `a${i}` } })).body.agentId)
    const all = await app.request("GET", "/v1/agents", { apiKey: d.apiKey })
    expect(all.body.nextCursor).toBeNull()
    expect(all.body.agents.map((a: any) => a.agentId)).toEqual([...ids].reverse())
    const seen: Array<string> = []
    let cursor: string | null = null
    let pages = 0
    do {
      const res: any = await app.request("GET", `/v1/agents?limit=2${cursor ? `&cursor=${cursor}` : ""}`, { apiKey: d.apiKey })
      expect(res.status).toBe(200)
      seen.push(...res.body.agents.map((a: any) => a.agentId))
      cursor = res.body.nextCursor
      pages++
    } while (cursor)
    expect([pages, seen]).toEqual([3, [...ids].reverse()])
    for (const query of ["limit=0", "limit=101", "limit=abc", "cursor=%%%"]) {
      const res = await app.request("GET", `/v1/agents?${query}`, { apiKey: d.apiKey })
      expect([res.status, res.body.code]).toEqual([400, "BAD_REQUEST"])
    }
  })
})

describe("authorization flow", () => {
  test("authorize → consent JSON → approve → token → refresh; the token verifies against the JWKS", async () => {
    const auth = await authorize({ scopes: ["email:read", "calendar:read"], redirectUri: "https://app.example/cb", state: "xyz", expiresIn: "2h" })
    expect(auth.status).toBe(201)
    expect(auth.body.authRequestId).toMatch(/^areq_/)
    expect(auth.body.consentUrl).toBe(`${app.config.publicBaseUrl}/consent?req=${auth.body.authRequestId}`)
    expect(auth.body.sandbox).toBeUndefined()

    const consent = await app.request("GET", `/v1/consent/${auth.body.authRequestId}`)
    expect(consent.status).toBe(200)
    expect(consent.body).toMatchObject({
      agentName: "Mail helper",
      agentDid: `did:service:${agentId}`,
      scopes: ["email:read", "calendar:read"],
      status: "pending",
      fidoRequired: false
    })
    expect(consent.body.scopeDescriptions["email:read"]).toBe("Read your Email data")

    const approved = await app.request("POST", `/v1/consent/${auth.body.authRequestId}/approve`)
    expect(approved.status).toBe(200)
    expect(approved.body).toMatchObject({ redirectUri: "https://app.example/cb", state: "xyz" })
    expect((await app.request("GET", `/v1/consent/${auth.body.authRequestId}`)).status).toBe(410)

    const token = await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code: approved.body.code, agentId } })
    expect(token.status).toBe(201)
    expect(token.body.scopes).toEqual(["email:read", "calendar:read"])
    const jwks = (await app.request("GET", "/.well-known/jwks.json")).body
    const { payload, protectedHeader } = await jwtVerify(token.body.grantToken, createLocalJWKSet(jwks), { issuer: "https://agent-auth.local" })
    expect(protectedHeader).toMatchObject({ alg: "RS256", typ: "JWT", kid: jwks.keys[0].kid })
    expect(payload).toMatchObject({ sub: "user_42", agt: `did:service:${agentId}`, dev: dev.developerId, scp: ["email:read", "calendar:read"], grnt: token.body.grantId })
    expect(new Date(token.body.expiresAt).getTime()).toBe(payload.exp! * 1000)

    const refreshed = await app.request("POST", "/v1/token/refresh", { apiKey: dev.apiKey, body: { refreshToken: token.body.refreshToken, agentId } })
    expect(refreshed.status).toBe(201)
    expect(refreshed.body.refreshToken).not.toBe(token.body.refreshToken)
    expect(refreshed.body.grantId).toBe(token.body.grantId)

    const events = await app.query<{ type: string }>("SELECT type FROM events WHERE developer_id = $1 ORDER BY created_at, id", [dev.developerId])
    expect(events.map((e) => e.type)).toEqual(["grant.created", "token.issued", "token.issued"])
  })

  test("a suspended agent: its tokens stop verifying, no code, refresh or consent for it; active again, they work", async () => {
    const own = (await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "Pausable", scopes: ["email:read"] } })).body.agentId
    const ask = () => app.request("POST", "/v1/authorize", { apiKey: dev.apiKey, body: { agentId: own, principalId: "user_9", scopes: ["email:read"] } })
    const approve = async () => (await app.request("POST", `/v1/consent/${(await ask()).body.authRequestId}/approve`)).body.code as string
    const token = (await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code: await approve(), agentId: own } })).body
    const spareCode = await approve()
    const pending = (await ask()).body.authRequestId
    const verify = async () => (await app.request("POST", "/v1/tokens/verify", { apiKey: dev.apiKey, body: { token: token.grantToken } })).body.valid
    const setStatus = (status: string) => app.request("PATCH", `/v1/agents/${own}`, { apiKey: dev.apiKey, body: { status } })
    await app.request("POST", "/v1/vault/credentials", { apiKey: dev.apiKey, body: { principalId: "user_9", service: "email", accessToken: "upstream" } })
    const exchange = async () =>
      (await app.request("POST", "/v1/vault/credentials/exchange", { bearer: token.grantToken, body: { service: "email" } })).status
    expect(await verify()).toBe(true)
    expect(await exchange()).toBe(200)

    expect((await setStatus("suspended")).status).toBe(200)
    expect(await verify()).toBe(false)
    expect(await exchange()).toBe(401)
    for (const res of [
      await app.request("POST", "/v1/token/refresh", { apiKey: dev.apiKey, body: { refreshToken: token.refreshToken, agentId: own } }),
      await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code: spareCode, agentId: own } }),
      await app.request("POST", `/v1/consent/${pending}/approve`)
    ]) {
      expect([res.status, res.body.code]).toEqual([403, "AGENT_SUSPENDED"])
    }

    // suspension is a pause: nothing refused above was used up
    expect((await setStatus("active")).status).toBe(200)
    expect(await verify()).toBe(true)
    expect(await exchange()).toBe(200)
    expect((await app.request("POST", "/v1/token/refresh", { apiKey: dev.apiKey, body: { refreshToken: token.refreshToken, agentId: own } })).status).toBe(201)
    expect((await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code: spareCode, agentId: own } })).status).toBe(201)
    expect((await app.request("POST", `/v1/consent/${pending}/approve`)).status).toBe(200)

    // a deleted agent's tokens stop for good
    expect((await app.request("DELETE", `/v1/agents/${own}`, { apiKey: dev.apiKey })).status).toBe(204)
    expect(await verify()).toBe(false)
  })

  test("a reused code answers 400 and revokes the grant", async () => {
    const auth = await authorize({})
    const { code } = (await app.request("POST", `/v1/consent/${auth.body.authRequestId}/approve`)).body
    const first = await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code, agentId } })
    expect(first.status).toBe(201)
    const again = await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code, agentId } })
    expect(again.status).toBe(400)
    expect(again.body.code).toBe("INVALID_GRANT")
    const [grant] = await app.query<{ status: string }>("SELECT status FROM grants WHERE id = $1", [first.body.grantId])
    expect(grant!.status).toBe("revoked")
  })

  test("a reused refresh token answers 400 and revokes the grant", async () => {
    const auth = await authorize({})
    const { code } = (await app.request("POST", `/v1/consent/${auth.body.authRequestId}/approve`)).body
    const token = (await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code, agentId } })).body
    expect((await app.request("POST", "/v1/token/refresh", { apiKey: dev.apiKey, body: { refreshToken: token.refreshToken, agentId } })).status).toBe(201)
    const reuse = await app.request("POST", "/v1/token/refresh", { apiKey: dev.apiKey, body: { refreshToken: token.refreshToken, agentId } })
    expect(reuse.status).toBe(400)
    expect(reuse.body.code).toBe("INVALID_GRANT")
    const [grant] = await app.query<{ status: string }>("SELECT status FROM grants WHERE id = $1", [token.grantId])
    expect(grant!.status).toBe("revoked")
  })

  test("PKCE S256: the verifier must match", async () => {
    const verifier = "a".repeat(20) + "-verifier-that-is-long-enough-1234567890"
    const challenge = new Bun.CryptoHasher("sha256").update(verifier).digest("base64url")
    const auth = await authorize({ codeChallenge: challenge })
    const { code } = (await app.request("POST", `/v1/consent/${auth.body.authRequestId}/approve`)).body
    expect((await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code, agentId } })).body.code).toBe("INVALID_GRANT")
    const auth2 = await authorize({ codeChallenge: challenge })
    const code2 = (await app.request("POST", `/v1/consent/${auth2.body.authRequestId}/approve`)).body.code
    expect((await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code: code2, agentId, codeVerifier: "wrong" } })).status).toBe(400)
    const auth3 = await authorize({ codeChallenge: challenge })
    const code3 = (await app.request("POST", `/v1/consent/${auth3.body.authRequestId}/approve`)).body.code
    // RFC 7636 lengths: 42 and 129 characters are refused before the code is used (it still works after)
    for (const wrongLength of ["v".repeat(42), "v".repeat(129), "v".repeat(300)]) {
      const refused = await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code: code3, agentId, codeVerifier: wrongLength } })
      expect([refused.status, refused.body.code, refused.body.message]).toEqual([400, "INVALID_GRANT", "codeVerifier must be 43 to 128 characters"])
    }
    expect((await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code: code3, agentId, codeVerifier: verifier } })).status).toBe(201)
  })

  test("errors: unknown agent 404, unregistered scope 422, bad expiresIn 400, another developer's agent 404", async () => {
    expect((await authorize({ agentId: "ag_nope" })).body.code).toBe("AGENT_NOT_FOUND")
    const bad = await authorize({ scopes: ["email:read", "drive:write"] })
    expect(bad.status).toBe(422)
    expect(bad.body.code).toBe("INVALID_SCOPES")
    expect((await authorize({ expiresIn: "forever" })).status).toBe(400)
    expect((await authorize({ redirectUri: "javascript:alert(1)" })).status).toBe(400)
    const other = await app.signup()
    const foreign = await authorize({}, other.apiKey)
    expect(foreign.status).toBe(404)
    expect(foreign.body.code).toBe("AGENT_NOT_FOUND")
  })

  test("deny answers the redirect and the request cannot be approved afterwards", async () => {
    const auth = await authorize({ redirectUri: "https://app.example/cb", state: "s1" })
    const denied = await app.request("POST", `/v1/consent/${auth.body.authRequestId}/deny`)
    expect(denied.body).toEqual({ redirectUri: "https://app.example/cb", state: "s1" })
    const late = await app.request("POST", `/v1/consent/${auth.body.authRequestId}/approve`)
    expect(late.status).toBe(410)
    expect(late.body.code).toBe("GONE")
  })

  test("sandbox developers get a code at once", async () => {
    const sandbox = await app.signup({ mode: "sandbox" })
    const agent = (await app.request("POST", "/v1/agents", { apiKey: sandbox.apiKey, body: { name: "S", scopes: ["a:read"] } })).body
    const auth = await app.request("POST", "/v1/authorize", { apiKey: sandbox.apiKey, body: { agentId: agent.agentId, principalId: "p", scopes: ["a:read"] } })
    expect(auth.status).toBe(201)
    expect(auth.body.sandbox).toBe(true)
    const token = await app.request("POST", "/v1/token", { apiKey: sandbox.apiKey, body: { code: auth.body.code, agentId: agent.agentId } })
    expect(token.status).toBe(201)
  })

  test("FIDO required: approval without a passkey answers 403 FIDO_REQUIRED", async () => {
    const fido = await app.signup()
    await app.request("PATCH", "/v1/me", { apiKey: fido.apiKey, body: { fidoRequired: true } })
    const agent = (await app.request("POST", "/v1/agents", { apiKey: fido.apiKey, body: { name: "F", scopes: ["a:read"] } })).body
    const auth = await app.request("POST", "/v1/authorize", { apiKey: fido.apiKey, body: { agentId: agent.agentId, principalId: "p", scopes: ["a:read"] } })
    const res = await app.request("POST", `/v1/consent/${auth.body.authRequestId}/approve`)
    expect(res.status).toBe(403)
    expect(res.body.code).toBe("FIDO_REQUIRED")
    expect((await app.request("GET", `/v1/consent/${auth.body.authRequestId}`)).body.fidoRequired).toBe(true)
  })

  test("consent page HTML: strict CSP, no third-party assets, form posts work without JavaScript", async () => {
    const auth = await authorize({ redirectUri: "https://app.example/cb", state: "st" })
    const page = await app.request("GET", `/consent?req=${auth.body.authRequestId}`)
    expect(page.status).toBe(200)
    expect(page.headers.get("content-type")).toContain("text/html")
    const csp = page.headers.get("content-security-policy")!
    expect(csp).toContain("default-src 'none'")
    expect(csp).toContain("form-action 'self' https://app.example")
    expect(page.text).toContain("Mail helper")
    expect(page.text).toContain("Read your Email data")
    expect(page.text).not.toMatch(/https?:\/\/(?!app\.example)[^"']+\.(js|css)/)
    const form = await fetch(`${app.url}/consent/approve`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: `req=${auth.body.authRequestId}`,
      redirect: "manual"
    })
    expect(form.status).toBe(303)
    const location = new URL(form.headers.get("location")!)
    expect(location.origin + location.pathname).toBe("https://app.example/cb")
    expect(location.searchParams.get("state")).toBe("st")
    expect(location.searchParams.get("code")).toBeTruthy()
    const again = await app.request("GET", `/consent?req=${auth.body.authRequestId}`)
    expect(again.status).toBe(410)
    expect(again.text).toContain("already")
  })
})

test("POST /v1/authorize: the 10th request in a minute passes, the 11th is limited; the developer bucket is shared", async () => {
  const limited = await startTestApp({ testClock: true })
  try {
    const d = await limited.signup({ plan: "enterprise" })
    const agent = (await limited.request("POST", "/v1/agents", { apiKey: d.apiKey, body: { name: "L", scopes: ["a:read"] } })).body
    const body = { agentId: agent.agentId, principalId: "p", scopes: ["a:read"] }
    for (let i = 0; i < 10; i++) {
      expect((await limited.request("POST", "/v1/authorize", { apiKey: d.apiKey, body })).status).toBe(201)
    }
    const over = await limited.request("POST", "/v1/authorize", { apiKey: d.apiKey, body })
    expect(over.status).toBe(429)
    expect(over.headers.get("x-ratelimit-limit")).toBe("10")
    // from another address the route limiter has room, but the developer's authorization bucket is spent
    const proxied = await limited.request("POST", "/v1/authorize", { apiKey: d.apiKey, body, headers: { "x-forwarded-for": "203.0.113.9" } })
    expect(proxied.status).toBe(429)
    await limited.adjust("1 minute")
    expect((await limited.request("POST", "/v1/authorize", { apiKey: d.apiKey, body })).status).toBe(201)
  } finally {
    await limited.stop()
  }
})

test("a refreshed token carries the grant's remaining budget in bdg", async () => {
  const budgetApp = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" } })
  try {
    const d = await budgetApp.signup({ plan: "enterprise", mode: "sandbox" })
    const agent = (await budgetApp.request("POST", "/v1/agents", { apiKey: d.apiKey, body: { name: "B", scopes: ["pay:write"] } })).body
    const auth = (await budgetApp.request("POST", "/v1/authorize", { apiKey: d.apiKey, body: { agentId: agent.agentId, principalId: "p", scopes: ["pay:write"] } })).body
    const token = (await budgetApp.request("POST", "/v1/token", { apiKey: d.apiKey, body: { code: auth.code, agentId: agent.agentId } })).body
    expect((await budgetApp.request("POST", "/v1/budget/allocate", { apiKey: d.apiKey, body: { grantId: token.grantId, initialBudget: 100 } })).status).toBe(201)
    expect((await budgetApp.request("POST", "/v1/budget/debit", { apiKey: d.apiKey, body: { grantId: token.grantId, amount: 12.5 } })).status).toBe(200)
    const refreshed = (await budgetApp.request("POST", "/v1/token/refresh", { apiKey: d.apiKey, body: { refreshToken: token.refreshToken, agentId: agent.agentId } })).body
    const claims = JSON.parse(Buffer.from(refreshed.grantToken.split(".")[1], "base64url").toString())
    expect(claims.bdg).toBe(87.5)
  } finally {
    await budgetApp.stop()
  }
})
