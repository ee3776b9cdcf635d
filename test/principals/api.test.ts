/**
 * Principal sessions (decisions §12): creation with the developer's API key, the principal's own
 * routes with the session token only, tenant and principal isolation, revocation through the one
 * path (cascade, events, audit chain, verification failing), expiry on TestClock, rate limits.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Clock } from "effect"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"

const START = Date.parse("2026-11-22T10:00:00.000Z")

let app: TestApp
let dev: { apiKey: string; developerId: string }
let other: { apiKey: string; developerId: string }
let agentId: string
let subAgentId: string

beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: START, env: { PUBLIC_BASE_URL: "https://auth.example.test", RATE_LIMIT_SCALE: "100" } })
  dev = await app.signup({ plan: "enterprise" })
  other = await app.signup({ plan: "enterprise" })
  agentId = await createAgent(app, dev.developerId, ["email:read", "calendar:write"], "Mail helper")
  subAgentId = await createAgent(app, dev.developerId, ["email:read"], "Summariser")
}, 120_000)
afterAll(async () => {
  await app.stop()
}, 120_000)

const session = async (principalId: string, apiKey = dev.apiKey, expiresIn?: string) => {
  const res = await app.request("POST", "/v1/principal-sessions", { apiKey, body: { principalId, ...(expiresIn ? { expiresIn } : {}) } })
  expect(res.status).toBe(201)
  return res.body.sessionToken as string
}

/** a grant made the way a person makes one: authorize, approve on the consent JSON, exchange the code */
const consentGrant = async (principalId: string, scopes = ["email:read"], apiKey = dev.apiKey, agent = agentId) => {
  const authz = await app.request("POST", "/v1/authorize", { apiKey, body: { agentId: agent, principalId, scopes } })
  expect(authz.status).toBe(201)
  const approve = await app.request("POST", `/v1/consent/${authz.body.authRequestId}/approve`)
  expect(approve.status).toBe(200)
  const token = await app.request("POST", "/v1/token", { apiKey, body: { code: approve.body.code, agentId: agent } })
  expect(token.status).toBe(201)
  return token.body as { grantId: string; grantToken: string }
}

const verify = (token: string) => app.request("POST", "/v1/tokens/verify", { apiKey: dev.apiKey, body: { token } })

describe("POST /v1/principal-sessions", () => {
  test("201: token, dashboard URL with the token in the fragment, 1 h by default", async () => {
    const res = await app.request("POST", "/v1/principal-sessions", { apiKey: dev.apiKey, body: { principalId: "alice" } })
    expect(res.status).toBe(201)
    const now = await app.run(Clock.currentTimeMillis)
    expect(res.body).toEqual({
      sessionToken: expect.stringMatching(/^pst_[A-Za-z0-9_-]{43}$/),
      dashboardUrl: `https://auth.example.test/permissions#session=${res.body.sessionToken}`,
      expiresAt: new Date(now + 3600_000).toISOString()
    })
    // only a hash is stored
    const rows = await app.query(`SELECT id, token_hash, principal_id FROM principal_sessions WHERE principal_id = 'alice'`)
    expect(rows[0].id).toMatch(/^psess_/)
    expect(rows[0].tokenHash).not.toContain(res.body.sessionToken.slice(4))
  })

  test("expiresIn up to 24h; more, or malformed, is 400 BAD_REQUEST; principalId is required", async () => {
    const ok = await app.request("POST", "/v1/principal-sessions", { apiKey: dev.apiKey, body: { principalId: "alice", expiresIn: "24h" } })
    expect(ok.status).toBe(201)
    expect(Date.parse(ok.body.expiresAt) - (await app.run(Clock.currentTimeMillis))).toBe(24 * 3600_000)
    for (const body of [{ principalId: "alice", expiresIn: "25h" }, { principalId: "alice", expiresIn: "2d" }, { principalId: "alice", expiresIn: "soon" }, { principalId: "" }, {}]) {
      const res = await app.request("POST", "/v1/principal-sessions", { apiKey: dev.apiKey, body })
      expect(res.status).toBe(400)
      expect(res.body.code).toBe("BAD_REQUEST")
    }
  })

  test("401 UNAUTHORIZED without an API key, or with a session token in its place", async () => {
    const res = await app.request("POST", "/v1/principal-sessions", { body: { principalId: "alice" } })
    expect(res.status).toBe(401)
    expect(res.body.code).toBe("UNAUTHORIZED")
    const token = await session("alice")
    const withSession = await app.request("POST", "/v1/principal-sessions", { bearer: token, body: { principalId: "alice" } })
    expect(withSession.status).toBe(401)
  })
})

describe("the session token works on the principal routes only", () => {
  test("refused (401) on developer routes, grant-token routes and everywhere else", async () => {
    const token = await session("bob")
    const { grantId, grantToken } = await consentGrant("bob")
    for (const [method, path, body] of [
      ["GET", "/v1/grants", undefined],
      ["GET", `/v1/grants/${grantId}`, undefined],
      ["DELETE", `/v1/grants/${grantId}`, undefined],
      ["POST", "/v1/tokens/verify", { token: grantToken }],
      ["GET", "/v1/agents", undefined],
      ["GET", "/v1/audit/entries", undefined],
      ["GET", "/v1/webauthn/credentials?principalId=bob", undefined],
      ["POST", "/v1/principal-sessions", { principalId: "mallory" }],
      ["POST", "/v1/vault/credentials/exchange", { service: "github" }] // a grant-token route
    ] as const) {
      const res = await app.request(method, path, { bearer: token, ...(body ? { body } : {}) })
      expect([method, path, res.status, res.body.code]).toEqual([method, path, 401, "UNAUTHORIZED"])
    }
    // and the grant is untouched
    expect((await verify(grantToken)).body.valid).toBe(true)
  })

  test("an API key, a grant token, a malformed or unknown token are refused on the principal routes (401)", async () => {
    const { grantId, grantToken } = await consentGrant("carol")
    const bearers = [dev.apiKey, grantToken, "pst_short", `pst_${"A".repeat(43)}`, undefined]
    for (const bearer of bearers) {
      for (const [method, path] of [["GET", "/v1/principal/grants"], ["GET", "/v1/principal/audit"], ["DELETE", `/v1/principal/grants/${grantId}`]] as const) {
        const res = await app.request(method, path, bearer === undefined ? {} : { bearer })
        expect([path, res.status, res.body.code]).toEqual([path, 401, "UNAUTHORIZED"])
      }
    }
    expect((await verify(grantToken)).body.valid).toBe(true)
  })

  test("an expired session is refused (TestClock)", async () => {
    const token = await session("dave", dev.apiKey, "15m")
    expect((await app.request("GET", "/v1/principal/grants", { bearer: token })).status).toBe(200)
    await app.adjust("15 minutes")
    const res = await app.request("GET", "/v1/principal/grants", { bearer: token })
    expect(res.status).toBe(401)
    expect(res.body.code).toBe("UNAUTHORIZED")
  })
})

describe("GET /v1/principal/grants", () => {
  test("the principal's active grants only, with agent name, DID, scopes in words, how and until when", async () => {
    const mine = await consentGrant("erin", ["email:read", "calendar:write"])
    const revoked = await consentGrant("erin")
    expect((await app.request("DELETE", `/v1/grants/${revoked.grantId}`, { apiKey: dev.apiKey })).status).toBe(204)
    await consentGrant("frank")
    const otherAgent = await createAgent(app, other.developerId, ["email:read"], "Other tenant's agent")
    await consentGrant("erin", ["email:read"], other.apiKey, otherAgent)
    // a delegated child of erin's grant is erin's too (made a second later: lists are newest first)
    await app.adjust("1 second")
    const child = await app.request("POST", "/v1/grants/delegate", {
      apiKey: dev.apiKey,
      body: { parentGrantToken: mine.grantToken, subAgentId, scopes: ["email:read"] }
    })
    expect(child.status).toBe(201)

    const res = await app.request("GET", "/v1/principal/grants", { bearer: await session("erin") })
    expect([res.status, res.body.principalId]).toEqual([200, "erin"])
    expect(res.body.nextCursor).toBeNull()
    expect(res.body.grants.map((g: any) => g.grantId)).toEqual([child.body.grantId, mine.grantId])
    const [delegated, root] = res.body.grants
    expect(root).toEqual({
      grantId: mine.grantId,
      agentId,
      agentName: "Mail helper",
      agentDid: `did:service:${agentId}`,
      agentStatus: "active",
      scopes: ["email:read", "calendar:write"],
      scopeDescriptions: { "email:read": "Read your Email data", "calendar:write": "Create and change your Calendar data" },
      approvalMethod: "consent",
      issuedAt: expect.any(String),
      expiresAt: expect.any(String),
      parentGrantId: null,
      delegationDepth: 0
    })
    expect(delegated).toMatchObject({ agentName: "Summariser", parentGrantId: mine.grantId, delegationDepth: 1, approvalMethod: "developer" })
  })

  test("an expired grant is not listed; pages with limit and cursor; 400 for a bad limit or cursor", async () => {
    const a = await consentGrant("gina")
    await app.adjust("1 second")
    const b = await consentGrant("gina")
    const token = await session("gina")
    const first = await app.request("GET", "/v1/principal/grants?limit=1", { bearer: token })
    expect(first.body.grants.map((g: any) => g.grantId)).toEqual([b.grantId])
    expect(first.body.nextCursor).toEqual(expect.any(String))
    const second = await app.request("GET", `/v1/principal/grants?limit=1&cursor=${first.body.nextCursor}`, { bearer: token })
    expect(second.body).toEqual({ principalId: "gina", grants: [expect.objectContaining({ grantId: a.grantId })], nextCursor: null })
    for (const q of ["limit=0", "limit=101", "limit=x", "cursor=nope"]) {
      const res = await app.request("GET", `/v1/principal/grants?${q}`, { bearer: token })
      expect([q, res.status, res.body.code]).toEqual([q, 400, "BAD_REQUEST"])
    }
    const now = await app.run(Clock.currentTimeMillis)
    await app.query(`UPDATE grants SET expires_at = $2 WHERE id = $1`, [a.grantId, new Date(now - 60_000)])
    const after = await app.request("GET", "/v1/principal/grants", { bearer: token })
    expect(after.body.grants.map((g: any) => g.grantId)).toEqual([b.grantId])
  })

  test("approvalMethod: consent, a bundle made from a consent approval, a bundle without one, a sandbox approval", async () => {
    const consented = await consentGrant("pia")
    // a bundle from an approval the person made (consentRequestId): how the bundle's grant was made
    const authz = await app.request("POST", "/v1/authorize", { apiKey: dev.apiKey, body: { agentId, principalId: "pia", scopes: ["email:read"] } })
    await app.request("POST", `/v1/consent/${authz.body.authRequestId}/approve`)
    await app.adjust("1 second")
    const fromConsent = await app.request("POST", "/v1/consent-bundles", {
      apiKey: dev.apiKey,
      body: { agentId, userId: "pia", scopes: ["email:read"], consentRequestId: authz.body.authRequestId }
    })
    expect(fromConsent.status).toBe(201)
    await app.adjust("1 second")
    const plain = await app.request("POST", "/v1/consent-bundles", { apiKey: dev.apiKey, body: { agentId, userId: "pia", scopes: ["email:read"] } })
    expect(plain.status).toBe(201)
    const res = await app.request("GET", "/v1/principal/grants?limit=100", { bearer: await session("pia") })
    const method = (grantId: string) => res.body.grants.find((g: any) => g.grantId === grantId)?.approvalMethod
    const grantOf = async (bundleId: string) => (await app.query(`SELECT grant_id FROM consent_bundles WHERE id = $1`, [bundleId]))[0].grantId
    expect(method(consented.grantId)).toBe("consent")
    expect(method(await grantOf(fromConsent.body.bundleId))).toBe("consent")
    expect(method(await grantOf(plain.body.bundleId))).toBe("developer")
    const sandbox = await app.signup({ mode: "sandbox", plan: "enterprise" })
    const sandboxAgent = await createAgent(app, sandbox.developerId, ["email:read"])
    const auto = await app.request("POST", "/v1/authorize", { apiKey: sandbox.apiKey, body: { agentId: sandboxAgent, principalId: "pia", scopes: ["email:read"] } })
    const token = await app.request("POST", "/v1/token", { apiKey: sandbox.apiKey, body: { code: auto.body.code, agentId: sandboxAgent } })
    const sandboxList = await app.request("GET", "/v1/principal/grants", { bearer: await session("pia", sandbox.apiKey) })
    // decisions §20: a sandbox's automatic approval is "sandbox"
    expect(sandboxList.body.grants.map((g: any) => [g.grantId, g.approvalMethod])).toEqual([[token.body.grantId, "sandbox"]])
  })

  test("a suspended agent's grant is listed (it may resume) and revocable; a deleted agent's is not listed", async () => {
    const paused = await createAgent(app, dev.developerId, ["email:read"], "Paused agent")
    const gone = await createAgent(app, dev.developerId, ["email:read"], "Deleted agent")
    const pausedGrant = await consentGrant("omar", ["email:read"], dev.apiKey, paused)
    await consentGrant("omar", ["email:read"], dev.apiKey, gone)
    expect((await app.request("PATCH", `/v1/agents/${paused}`, { apiKey: dev.apiKey, body: { status: "suspended" } })).status).toBe(200)
    expect((await app.request("DELETE", `/v1/agents/${gone}`, { apiKey: dev.apiKey })).status).toBe(204)
    const token = await session("omar")
    const res = await app.request("GET", "/v1/principal/grants", { bearer: token })
    expect(res.body.grants.map((g: any) => [g.agentName, g.agentStatus])).toEqual([["Paused agent", "suspended"]])
    expect((await app.request("DELETE", `/v1/principal/grants/${pausedGrant.grantId}`, { bearer: token })).status).toBe(204)
    await app.request("PATCH", `/v1/agents/${paused}`, { apiKey: dev.apiKey, body: { status: "active" } })
    expect((await verify(pausedGrant.grantToken)).body.valid).toBe(false)
  })
})

describe("DELETE /v1/principal/grants/:id", () => {
  test("204: revoked through the one path (cascade, events, audit chain); the token then fails verification", async () => {
    const parent = await consentGrant("hana")
    const child = await app.request("POST", "/v1/grants/delegate", {
      apiKey: dev.apiKey,
      body: { parentGrantToken: parent.grantToken, subAgentId, scopes: ["email:read"] }
    })
    const token = await session("hana")
    const res = await app.request("DELETE", `/v1/principal/grants/${parent.grantId}`, { bearer: token })
    expect(res.status).toBe(204)
    expect((await verify(parent.grantToken)).body).toEqual({ valid: false })
    expect((await verify(child.body.grantToken)).body).toEqual({ valid: false })
    const grants = await app.query(`SELECT id, status FROM grants WHERE id = ANY($1) ORDER BY id`, [[parent.grantId, child.body.grantId]])
    expect(grants.map((g: any) => g.status)).toEqual(["revoked", "revoked"])
    const events = await app.query(`SELECT type, data FROM events WHERE developer_id = $1 AND (data->>'grantId') = ANY($2) AND type IN ('grant.revoked', 'principal.grant_revoked') ORDER BY type, data->>'grantId'`,
      [dev.developerId, [parent.grantId, child.body.grantId]])
    expect(events).toEqual([
      { type: "grant.revoked", data: { grantId: parent.grantId, cascade: true } },
      { type: "grant.revoked", data: { grantId: child.body.grantId, cascade: false } },
      { type: "principal.grant_revoked", data: { grantId: parent.grantId } }
    ].sort((x, y) => (x.type + x.data.grantId).localeCompare(y.type + y.data.grantId)))
    const audit = await app.request("GET", "/v1/principal/audit", { bearer: token })
    expect(audit.body.entries[0]).toMatchObject({
      action: "service.principal.grant_revoked",
      grantId: parent.grantId,
      principalId: "hana",
      metadata: { revokedGrantIds: [parent.grantId, child.body.grantId] }
    })
    expect((await app.request("GET", "/v1/audit/verify", { apiKey: dev.apiKey })).body.valid).toBe(true)
    // listed no more; a second revoke is harmless
    expect((await app.request("GET", "/v1/principal/grants", { bearer: token })).body.grants).toEqual([])
    expect((await app.request("DELETE", `/v1/principal/grants/${parent.grantId}`, { bearer: token })).status).toBe(204)
  })

  test("404 NOT_FOUND for another principal's, another developer's, or an unknown grant; nothing revoked", async () => {
    const ivan = await consentGrant("ivan")
    const otherAgent = await createAgent(app, other.developerId, ["email:read"])
    const foreign = await consentGrant("jane", ["email:read"], other.apiKey, otherAgent)
    const token = await session("jane")
    for (const id of [ivan.grantId, foreign.grantId, "grnt_unknown"]) {
      const res = await app.request("DELETE", `/v1/principal/grants/${id}`, { bearer: token })
      expect([id, res.status, res.body.code]).toEqual([id, 404, "NOT_FOUND"])
    }
    expect((await verify(ivan.grantToken)).body.valid).toBe(true)
    const foreignCheck = await app.request("POST", "/v1/tokens/verify", { apiKey: other.apiKey, body: { token: foreign.grantToken } })
    expect(foreignCheck.body.valid).toBe(true)
  })

  test("concurrent revocations of one grant: all 204, one principal.grant_revoked, one audit entry", async () => {
    const grant = await consentGrant("lena")
    const token = await session("lena")
    const results = await Promise.all(Array.from({ length: 5 }, () => app.request("DELETE", `/v1/principal/grants/${grant.grantId}`, { bearer: token })))
    expect(results.map((r) => r.status)).toEqual([204, 204, 204, 204, 204])
    const events = await app.query(`SELECT count(*)::int AS n FROM events WHERE type = 'principal.grant_revoked' AND data->>'grantId' = $1`, [grant.grantId])
    expect(events[0].n).toBe(1)
    const entries = await app.query(`SELECT count(*)::int AS n FROM audit_log WHERE action = 'service.principal.grant_revoked' AND grant_id = $1`, [grant.grantId])
    expect(entries[0].n).toBe(1)
  })
})

describe("GET /v1/principal/audit", () => {
  test("the principal's own entries of this developer only, newest first, paged", async () => {
    const log = (apiKey: string, principalId: string, action: string) =>
      app.request("POST", "/v1/audit/log", { apiKey, body: { agentId, agentDid: `did:service:${agentId}`, grantId: "grnt_x", principalId, action } })
    expect((await log(dev.apiKey, "kim", "email.read")).status).toBe(201)
    await app.adjust("1 second")
    await log(dev.apiKey, "kim", "email.send")
    await log(dev.apiKey, "lee", "email.read")
    await log(other.apiKey, "kim", "calendar.read")
    const token = await session("kim")
    const res = await app.request("GET", "/v1/principal/audit", { bearer: token })
    expect(res.status).toBe(200)
    expect(res.body.entries.map((e: any) => [e.principalId, e.developerId, e.action])).toEqual([
      ["kim", dev.developerId, "email.send"],
      ["kim", dev.developerId, "email.read"]
    ])
    const page = await app.request("GET", "/v1/principal/audit?limit=1", { bearer: token })
    expect(page.body.entries).toHaveLength(1)
    const rest = await app.request("GET", `/v1/principal/audit?limit=1&cursor=${page.body.nextCursor}`, { bearer: token })
    expect(rest.body.entries[0].action).toBe("email.read")
  })
})

describe("rate limits", () => {
  test("the principal routes are limited per address (429 RATE_LIMITED with the headers)", async () => {
    const limited = await startTestApp({ env: { RATE_LIMIT_SCALE: "0.05" } })
    try {
      const d = await limited.signup({ plan: "enterprise" })
      const created = await limited.request("POST", "/v1/principal-sessions", { apiKey: d.apiKey, body: { principalId: "p" } })
      const token = created.body.sessionToken
      const statuses: Array<number> = []
      // GET /v1/principal/grants: 60 a minute, scaled to 3
      for (let i = 0; i < 4; i++) statuses.push((await limited.request("GET", "/v1/principal/grants", { bearer: token })).status)
      expect(statuses).toEqual([200, 200, 200, 429])
      const refused = await limited.request("GET", "/v1/principal/grants", { bearer: token })
      expect(refused.body.code).toBe("RATE_LIMITED")
      expect(refused.headers.get("retry-after")).not.toBeNull()
      // an unknown token is counted too: guessing is limited like anything else
      const guesses: Array<number> = []
      for (let i = 0; i < 3; i++) guesses.push((await limited.request("GET", "/v1/principal/audit", { bearer: `pst_${"B".repeat(43)}` })).status)
      expect(guesses).toEqual([401, 401, 401])
      expect((await limited.request("GET", "/v1/principal/audit", { bearer: `pst_${"B".repeat(43)}` })).status).toBe(429)
    } finally {
      await limited.stop()
    }
  }, 120_000)
})
