/** Grants: list/get/revoke with cascade, delegation limits, token verification and revocation. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SignJWT, base64url } from "jose"
import { Effect } from "effect"
import { Grants } from "../../src/grants/Service.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
let agentId: string
let subAgentId: string

beforeAll(async () => {
  app = await startTestApp()
  dev = await app.signup({ plan: "enterprise" })
  agentId = await createAgent(app, dev.developerId, ["email:read", "email:write", "calendar:read"])
  subAgentId = await createAgent(app, dev.developerId, ["email:read", "calendar:read"], "Sub agent")
})
afterAll(() => app.stop())

const delegate = (parentGrantToken: string, body: Record<string, unknown> = {}) =>
  app.request("POST", "/v1/grants/delegate", { apiKey: dev.apiKey, body: { parentGrantToken, subAgentId, scopes: ["email:read"], ...body } })

const verify = async (token: string, apiKey = dev.apiKey) => (await app.request("POST", "/v1/tokens/verify", { apiKey, body: { token } })).body

describe("verify and revoke", () => {
  test("a live token verifies; after DELETE /v1/grants/:id it does not", async () => {
    const { grant, token } = await issueGrant(app, { developerId: dev.developerId, agentId, scopes: ["email:read"] })
    expect(await verify(token.grantToken)).toEqual({
      valid: true,
      grantId: grant.id,
      scopes: ["email:read"],
      principal: "user_1",
      agent: `did:service:${agentId}`,
      expiresAt: token.expiresAt.toISOString()
    })
    const res = await app.request("DELETE", `/v1/grants/${grant.id}`, { apiKey: dev.apiKey })
    expect(res.status).toBe(204)
    expect(await verify(token.grantToken)).toEqual({ valid: false })
    const view = await app.request("GET", `/v1/grants/${grant.id}`, { apiKey: dev.apiKey })
    expect(view.body.status).toBe("revoked")
    expect(view.body.revokedAt).not.toBeNull()
  })

  test("POST /v1/tokens/revoke revokes one token by jti", async () => {
    const { token } = await issueGrant(app, { developerId: dev.developerId, agentId, scopes: ["email:read"] })
    expect((await app.request("POST", "/v1/tokens/revoke", { apiKey: dev.apiKey, body: { jti: token.jti } })).status).toBe(204)
    expect(await verify(token.grantToken)).toEqual({ valid: false })
    // decisions §3: `{ jti }` → 204, also for a jti that names none of the developer's tokens
    expect((await app.request("POST", "/v1/tokens/revoke", { apiKey: dev.apiKey, body: { jti: "tok_unknown" } })).status).toBe(204)
  })

  test("alg none, HS256 keyed with the public key, tampered payload, another developer: all invalid", async () => {
    const { token } = await issueGrant(app, { developerId: dev.developerId, agentId, scopes: ["email:read"] })
    const [header, payload] = token.grantToken.split(".")
    const claims = JSON.parse(new TextDecoder().decode(base64url.decode(payload!)))
    const none = `${base64url.encode(JSON.stringify({ alg: "none", typ: "JWT" }))}.${payload}.`
    expect(await verify(none)).toEqual({ valid: false })
    const jwks = (await app.request("GET", "/.well-known/jwks.json")).body
    const hs = await new SignJWT(claims).setProtectedHeader({ alg: "HS256", kid: jwks.keys[0].kid })
      .sign(new TextEncoder().encode(JSON.stringify(jwks.keys[0])))
    expect(await verify(hs)).toEqual({ valid: false })
    const tampered = `${header}.${base64url.encode(JSON.stringify({ ...claims, scp: ["*"] }))}.${token.grantToken.split(".")[2]}`
    expect(await verify(tampered)).toEqual({ valid: false })
    const other = await app.signup()
    expect(await verify(token.grantToken, other.apiKey)).toEqual({ valid: false })
  })
})

describe("delegation", () => {
  test("scopes must be a subset; expiry is capped at the parent's; cascade revokes depth 3", async () => {
    const root = await issueGrant(app, { developerId: dev.developerId, agentId, scopes: ["email:read", "calendar:read"], expiresInSeconds: 3600 })
    const escalate = await delegate(root.token.grantToken, { scopes: ["email:write"] })
    expect(escalate.status).toBe(400)
    expect(escalate.body.code).toBe("SCOPE_ESCALATION")

    const child = await delegate(root.token.grantToken, { expiresIn: "30d" })
    expect(child.status).toBe(201)
    expect(new Date(child.body.expiresAt).getTime()).toBeLessThanOrEqual(root.grant.expiresAt.getTime())
    const claims = JSON.parse(new TextDecoder().decode(base64url.decode(child.body.grantToken.split(".")[1])))
    expect(claims).toMatchObject({ parentGrnt: root.grant.id, parentAgt: `did:service:${agentId}`, delegationDepth: 1, agt: `did:service:${subAgentId}` })

    const grandchild = await delegate(child.body.grantToken)
    const greatGrandchild = await delegate(grandchild.body.grantToken)
    expect(greatGrandchild.status).toBe(201)
    const tooDeep = await delegate(greatGrandchild.body.grantToken)
    expect(tooDeep.status).toBe(403)
    expect(tooDeep.body.code).toBe("DELEGATION_DEPTH_EXCEEDED")

    const res = await app.request("DELETE", `/v1/grants/${root.grant.id}`, { apiKey: dev.apiKey })
    expect(res.status).toBe(204)
    for (const token of [child.body.grantToken, grandchild.body.grantToken, greatGrandchild.body.grantToken]) {
      expect(await verify(token)).toEqual({ valid: false })
    }
    const ids = [root.grant.id, child.body.grantId, grandchild.body.grantId, greatGrandchild.body.grantId]
    const rows = await app.query<{ status: string }>("SELECT status FROM grants WHERE id = ANY($1)", [ids])
    expect(rows.map((r) => r.status)).toEqual(["revoked", "revoked", "revoked", "revoked"])
    const events = await app.query<{ data: { grantId: string; cascade: boolean } }>(
      "SELECT data FROM events WHERE type = 'grant.revoked' AND data->>'grantId' = ANY($1)", [ids]
    )
    expect(events).toHaveLength(4)
    expect(events.find((e) => e.data.grantId === root.grant.id)!.data.cascade).toBe(true)
    expect(events.find((e) => e.data.grantId === greatGrandchild.body.grantId)!.data.cascade).toBe(false)
  })

  test("a sub-agent gets only scopes registered for it (422 INVALID_SCOPES); every delegated token is announced", async () => {
    const root = await issueGrant(app, { developerId: dev.developerId, agentId, scopes: ["email:read", "email:write"] })
    const narrow = await createAgent(app, dev.developerId, ["email:read"], "Narrow")
    const refused = await app.request("POST", "/v1/grants/delegate", {
      apiKey: dev.apiKey,
      body: { parentGrantToken: root.token.grantToken, subAgentId: narrow, scopes: ["email:read", "email:write"] }
    })
    expect([refused.status, refused.body.code]).toEqual([422, "INVALID_SCOPES"])
    const ok = await app.request("POST", "/v1/grants/delegate", {
      apiKey: dev.apiKey,
      body: { parentGrantToken: root.token.grantToken, subAgentId: narrow, scopes: ["email:read"] }
    })
    expect(ok.status).toBe(201)
    const [issued] = await app.query<{ data: any }>("SELECT data FROM events WHERE type = 'token.issued' AND data->>'grantId' = $1", [ok.body.grantId])
    const data = typeof issued!.data === "string" ? JSON.parse(issued!.data) : issued!.data
    expect(data).toMatchObject({ grantId: ok.body.grantId, agentId: narrow, scopes: ["email:read"], expiresAt: ok.body.expiresAt })
  })

  test("a delegated grant lives no longer than the parent token presented", async () => {
    const root = await issueGrant(app, { developerId: dev.developerId, agentId, scopes: ["email:read"], expiresInSeconds: 86400 })
    // a short token on the long grant, as /v1/token issues (one hour at most)
    const short = await app.run(Effect.gen(function*() {
      const grants = yield* Grants
      return yield* grants.issueToken(root.grant, { expiresAt: new Date(Date.now() + 3600_000) })
    }))
    const child = await delegate(short.grantToken, { expiresIn: "7d" })
    expect(child.status).toBe(201)
    expect(child.body.expiresAt).toBe(short.expiresAt.toISOString())
  })

  test("cascade says whether this revocation revoked descendants (not whether there were any)", async () => {
    const root = await issueGrant(app, { developerId: dev.developerId, agentId, scopes: ["email:read"] })
    const child = await delegate(root.token.grantToken)
    expect((await app.request("DELETE", `/v1/grants/${child.body.grantId}`, { apiKey: dev.apiKey })).status).toBe(204)
    expect((await app.request("DELETE", `/v1/grants/${root.grant.id}`, { apiKey: dev.apiKey })).status).toBe(204)
    const [event] = await app.query<{ data: any }>("SELECT data FROM events WHERE type = 'grant.revoked' AND data->>'grantId' = $1", [root.grant.id])
    const data = typeof event!.data === "string" ? JSON.parse(event!.data) : event!.data
    expect(data).toEqual({ grantId: root.grant.id, cascade: false })
  })

  test("a delegation racing the revocation of its parent never leaves an active child under a revoked grant", async () => {
    for (let i = 0; i < 15; i++) {
      const root = await issueGrant(app, { developerId: dev.developerId, agentId, scopes: ["email:read"] })
      const [made] = await Promise.all([
        delegate(root.token.grantToken),
        app.request("DELETE", `/v1/grants/${root.grant.id}`, { apiKey: dev.apiKey })
      ])
      expect([201, 400]).toContain(made.status)
    }
    const orphans = await app.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM grants c JOIN grants p ON p.id = c.parent_grant_id
       WHERE p.status = 'revoked' AND c.status = 'active' AND c.developer_id = $1`,
      [dev.developerId]
    )
    expect(orphans[0]!.n).toBe(0)
  })

  test("a revoked parent cannot delegate", async () => {
    const root = await issueGrant(app, { developerId: dev.developerId, agentId, scopes: ["email:read"] })
    await app.request("DELETE", `/v1/grants/${root.grant.id}`, { apiKey: dev.apiKey })
    expect((await delegate(root.token.grantToken)).status).toBe(400)
  })
})

describe("listing and isolation", () => {
  test("cursor pages through every grant once, newest first; other developers see none", async () => {
    const own = await app.signup()
    const a = await createAgent(app, own.developerId, ["x:read"])
    const ids: Array<string> = []
    for (let i = 0; i < 7; i++) ids.push((await issueGrant(app, { developerId: own.developerId, agentId: a, scopes: ["x:read"] })).grant.id)
    const seen: Array<string> = []
    let cursor: string | null = null
    do {
      const res: any = await app.request("GET", `/v1/grants?limit=3${cursor ? `&cursor=${cursor}` : ""}`, { apiKey: own.apiKey })
      expect(res.status).toBe(200)
      seen.push(...res.body.grants.map((g: any) => g.grantId))
      cursor = res.body.nextCursor
    } while (cursor)
    expect(seen).toEqual([...ids].reverse())
    expect((await app.request("GET", "/v1/grants?limit=101", { apiKey: own.apiKey })).status).toBe(400)
    expect((await app.request("GET", "/v1/grants?cursor=garbage", { apiKey: own.apiKey })).status).toBe(400)
    const stranger = await app.signup()
    expect((await app.request("GET", "/v1/grants", { apiKey: stranger.apiKey })).body.grants).toEqual([])
    expect((await app.request("GET", `/v1/grants/${ids[0]}`, { apiKey: stranger.apiKey })).status).toBe(404)
    expect((await app.request("DELETE", `/v1/grants/${ids[0]}`, { apiKey: stranger.apiKey })).status).toBe(404)
  })
})
