/**
 * Suspending or deleting an agent stops everything it holds and everything derived from it
 * (decisions §19): its consent bundles are revoked for good, and tokens delegated from its grants
 * fail the online checks (token verify, vault exchange) while it is suspended and once it is deleted.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }

const SCOPES = ["email:read", "github:read"]

beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" } })
  dev = await app.signup({ plan: "enterprise" })
  const stored = await app.request("POST", "/v1/vault/credentials", {
    apiKey: dev.apiKey,
    body: { principalId: "user_1", service: "github", accessToken: "gho_suspension_TOKEN" }
  })
  expect(stored.status).toBe(201)
})
afterAll(() => app.stop())

const setStatus = (agentId: string, status: "active" | "suspended") =>
  app.request("PATCH", `/v1/agents/${agentId}`, { apiKey: dev.apiKey, body: { status } })
const verify = async (token: string) => (await app.request("POST", "/v1/tokens/verify", { apiKey: dev.apiKey, body: { token } })).body.valid
const exchange = async (token: string) =>
  (await app.request("POST", "/v1/vault/credentials/exchange", { bearer: token, body: { service: "github" } })).status
const delegate = async (parentGrantToken: string, subAgentId: string) => {
  const res = await app.request("POST", "/v1/grants/delegate", { apiKey: dev.apiKey, body: { parentGrantToken, subAgentId, scopes: ["github:read"] } })
  expect(res.status).toBe(201)
  return res.body as { grantToken: string; grantId: string }
}
const createBundle = (agentId: string) =>
  app.request("POST", "/v1/consent-bundles", { apiKey: dev.apiKey, body: { agentId, userId: "user_1", scopes: ["email:read"] } })
const eventsOf = async (type: string, key: string, value: string) =>
  app.query<{ data: any }>("SELECT data FROM events WHERE developer_id = $1 AND type = $2 AND data->>$3 = $4", [dev.developerId, type, key, value])

describe("tokens delegated from a suspended or deleted agent's grants", () => {
  test("fail verify and vault exchange while it is suspended, resume on reactivation, and stop for good once deleted", async () => {
    const root = await createAgent(app, dev.developerId, SCOPES, "Root")
    const middle = await createAgent(app, dev.developerId, SCOPES, "Middle")
    const leaf = await createAgent(app, dev.developerId, SCOPES, "Leaf")
    const grant = await issueGrant(app, { developerId: dev.developerId, agentId: root, scopes: SCOPES })
    const child = await delegate(grant.token.grantToken, middle)
    const grandchild = await delegate(child.grantToken, leaf)
    const all = [grant.token.grantToken, child.grantToken, grandchild.grantToken]
    const state = async () => Promise.all(all.map(async (t) => [await verify(t), await exchange(t)]))
    expect(await state()).toEqual([[true, 200], [true, 200], [true, 200]])

    // the root agent suspended: its own token and both handed on stop
    expect((await setStatus(root, "suspended")).status).toBe(200)
    expect(await state()).toEqual([[false, 401], [false, 401], [false, 401]])
    expect((await setStatus(root, "active")).status).toBe(200)
    expect(await state()).toEqual([[true, 200], [true, 200], [true, 200]])

    // the middle agent suspended: what it holds and what it handed on stop; its parent's do not
    expect((await setStatus(middle, "suspended")).status).toBe(200)
    expect(await state()).toEqual([[true, 200], [false, 401], [false, 401]])
    // nothing can be delegated on from a paused chain either
    const onward = await app.request("POST", "/v1/grants/delegate", {
      apiKey: dev.apiKey,
      body: { parentGrantToken: grandchild.grantToken, subAgentId: root, scopes: ["github:read"] }
    })
    expect([onward.status, onward.body.code]).toEqual([400, "INVALID_TOKEN"])
    expect((await setStatus(middle, "active")).status).toBe(200)
    expect(await state()).toEqual([[true, 200], [true, 200], [true, 200]])

    // the root agent deleted: stopped for good (a deleted agent cannot be set active again)
    expect((await app.request("DELETE", `/v1/agents/${root}`, { apiKey: dev.apiKey })).status).toBe(204)
    expect(await state()).toEqual([[false, 401], [false, 401], [false, 401]])
    expect((await setStatus(root, "active")).status).toBe(404)
    expect(await state()).toEqual([[false, 401], [false, 401], [false, 401]])
    // the grants themselves are untouched (a pause is not a revocation): only the ancestry stops them
    const rows = await app.query<{ status: string }>("SELECT status FROM grants WHERE id = ANY($1) ORDER BY delegation_depth", [[child.grantId, grandchild.grantId]])
    expect(rows.map((r) => r.status)).toEqual(["active", "active"])
  })

  test("a delegated grant records the agents it descends from, root first", async () => {
    const a = await createAgent(app, dev.developerId, SCOPES, "A")
    const b = await createAgent(app, dev.developerId, SCOPES, "B")
    const c = await createAgent(app, dev.developerId, SCOPES, "C")
    const grant = await issueGrant(app, { developerId: dev.developerId, agentId: a, scopes: SCOPES })
    const child = await delegate(grant.token.grantToken, b)
    const grandchild = await delegate(child.grantToken, c)
    const rows = await app.query<{ id: string; ancestorAgentIds: Array<string> }>(
      "SELECT id, ancestor_agent_ids FROM grants WHERE id = ANY($1) ORDER BY delegation_depth",
      [[grant.grant.id, child.grantId, grandchild.grantId]]
    )
    expect(rows.map((r) => r.ancestorAgentIds)).toEqual([[], [a], [a, b]])
  })
})

describe("a suspended or deleted agent's consent bundles", () => {
  test("suspension revokes them (consent_bundle.revoked, grant.revoked); reactivation does not restore them; create 403, refresh 409", async () => {
    const agent = await createAgent(app, dev.developerId, SCOPES, "Device agent")
    const first = (await createBundle(agent)).body
    const second = (await createBundle(agent)).body
    const bundles = [first, second]
    const grantOf = (b: any) => JSON.parse(Buffer.from(b.grantToken.split(".")[1], "base64url").toString()).grnt as string
    for (const b of bundles) {
      expect((await app.request("GET", `/v1/consent-bundles/${b.bundleId}`, { apiKey: dev.apiKey })).body.status).toBe("active")
    }

    expect((await setStatus(agent, "suspended")).status).toBe(200)
    for (const b of bundles) {
      expect((await app.request("GET", `/v1/consent-bundles/${b.bundleId}`, { apiKey: dev.apiKey })).body.status).toBe("revoked")
      const status = await app.request("GET", `/v1/consent-bundles/${b.bundleId}/revocation-status`, { apiKey: dev.apiKey })
      expect(status.body).toMatchObject({ bundleId: b.bundleId, status: "revoked" })
      expect(status.body.revokedAt).not.toBeNull()
      const [stored] = await app.query<{ status: string }>("SELECT status FROM consent_bundles WHERE id = $1", [b.bundleId])
      expect(stored!.status).toBe("revoked")
      const [grant] = await app.query<{ status: string }>("SELECT status FROM grants WHERE id = $1", [grantOf(b)])
      expect(grant!.status).toBe("revoked")
      const revokedEvents = await eventsOf("consent_bundle.revoked", "bundleId", b.bundleId)
      expect(revokedEvents).toHaveLength(1)
      expect(revokedEvents[0]!.data).toMatchObject({ bundleId: b.bundleId, grantId: grantOf(b) })
      expect((await eventsOf("grant.revoked", "grantId", grantOf(b))).map((e) => e.data)).toEqual([{ grantId: grantOf(b), cascade: false }])
      // the device is told at its next sync or check; refresh is refused
      const refresh = await app.request("POST", `/v1/consent-bundles/${b.bundleId}/refresh`, { apiKey: dev.apiKey })
      expect([refresh.status, refresh.body.code]).toEqual([409, "BUNDLE_REVOKED"])
    }
    const refused = await createBundle(agent)
    expect([refused.status, refused.body.code]).toEqual([403, "AGENT_SUSPENDED"])
    const [{ n }] = await app.query<{ n: number }>("SELECT count(*)::int AS n FROM consent_bundles WHERE agent_id = $1", [agent]) as any
    expect(n).toBe(2)

    // active again: the revoked bundles stay revoked, their tokens stay dead; a new bundle can be made
    expect((await setStatus(agent, "active")).status).toBe(200)
    for (const b of bundles) {
      expect((await app.request("GET", `/v1/consent-bundles/${b.bundleId}`, { apiKey: dev.apiKey })).body.status).toBe("revoked")
      expect(await verify(b.grantToken)).toBe(false)
      expect((await app.request("POST", `/v1/consent-bundles/${b.bundleId}/refresh`, { apiKey: dev.apiKey })).body.code).toBe("BUNDLE_REVOKED")
    }
    expect((await createBundle(agent)).status).toBe(201)
  })

  test("deletion revokes them too, with both events", async () => {
    const agent = await createAgent(app, dev.developerId, SCOPES, "Deleted device agent")
    const b = (await createBundle(agent)).body
    expect((await app.request("DELETE", `/v1/agents/${agent}`, { apiKey: dev.apiKey })).status).toBe(204)
    const [stored] = await app.query<{ status: string; grantId: string }>("SELECT status, grant_id FROM consent_bundles WHERE id = $1", [b.bundleId])
    expect(stored!.status).toBe("revoked")
    expect(await eventsOf("consent_bundle.revoked", "bundleId", b.bundleId)).toHaveLength(1)
    expect(await eventsOf("grant.revoked", "grantId", stored!.grantId)).toHaveLength(1)
    expect((await app.request("POST", `/v1/consent-bundles/${b.bundleId}/refresh`, { apiKey: dev.apiKey })).body.code).toBe("BUNDLE_REVOKED")
  })

  test("a bundle created while the agent is being suspended never stays active", async () => {
    for (let i = 0; i < 8; i++) {
      const agent = await createAgent(app, dev.developerId, SCOPES, `Racing ${i}`)
      const [made, suspended] = await Promise.all([createBundle(agent), setStatus(agent, "suspended")])
      expect(suspended.status).toBe(200)
      expect([201, 403]).toContain(made.status)
      const active = await app.query("SELECT id FROM consent_bundles WHERE agent_id = $1 AND status = 'active'", [agent])
      expect(active).toEqual([])
    }
  })
})
