/**
 * Deprovisioning (decisions §11): `active: false` or DELETE revokes the principal's grants through
 * the one revocation path (cascade, bundles, grant.revoked), denies their pending consent requests,
 * and makes the principal inactive for authorize, consent approval and bundles (403
 * PRINCIPAL_INACTIVE). Reactivation restores nothing.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import pg from "pg"
import { startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"
import { newUser, patch, type ScimClient, scimClient } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  // authorize is limited to 10 a minute per address; these tests make more than that
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "10" } })
})
afterAll(() => app.stop())

interface World {
  readonly c: ScimClient
  readonly agentId: string
  readonly scimUserId: string
  readonly rootToken: string
  readonly childGrantId: string
  readonly bundleId: string
  readonly pendingId: string
  readonly otherToken: string
}

/** bob is provisioned and holds a grant with a delegated child, a bundle and a pending request; ann holds a grant */
const world = async (settings: Record<string, string> = {}): Promise<World> => {
  const c = await scimClient(app)
  if (Object.keys(settings).length > 0) await app.request("PATCH", "/v1/scim/settings", { apiKey: c.apiKey, body: settings })
  const agentId = await createAgent(app, c.developerId, ["email:read", "calendar:read"])
  const subAgentId = await createAgent(app, c.developerId, ["email:read"], "Sub")
  const scimUserId = (await c.send("POST", "/Users", newUser("Bob@Example.com"))).body.id
  const root = await issueGrant(app, { developerId: c.developerId, agentId, principalId: "Bob@Example.com", scopes: ["email:read"] })
  const child = await app.request("POST", "/v1/grants/delegate", {
    apiKey: c.apiKey, body: { parentGrantToken: root.token.grantToken, subAgentId, scopes: ["email:read"] }
  })
  expect(child.status).toBe(201)
  const bundle = await app.request("POST", "/v1/consent-bundles", { apiKey: c.apiKey, body: { agentId, userId: "Bob@Example.com", scopes: ["calendar:read"] } })
  expect(bundle.status).toBe(201)
  const pending = await app.request("POST", "/v1/authorize", { apiKey: c.apiKey, body: { agentId, principalId: "Bob@Example.com", scopes: ["email:read"] } })
  expect(pending.status).toBe(201)
  const other = await issueGrant(app, { developerId: c.developerId, agentId, principalId: "ann@example.com", scopes: ["email:read"] })
  for (const principal of ["Bob@Example.com", "ann@example.com"]) {
    await app.query(
      `INSERT INTO webauthn_credentials (id, developer_id, principal_id, credential_id, public_key, device_type, created_at)
       VALUES ($1, $2, $3, $4, 'pk', 'singleDevice', now())`,
      [`pkc_${principal.slice(0, 3)}${Math.random().toString(36).slice(2)}`, c.developerId, principal, `cred-${principal}`]
    )
  }
  return {
    c, agentId, scimUserId, rootToken: root.token.grantToken, childGrantId: child.body.grantId, bundleId: bundle.body.bundleId ?? bundle.body.id,
    pendingId: pending.body.authRequestId, otherToken: other.token.grantToken
  }
}

const verify = async (w: World, token: string) => (await app.request("POST", "/v1/tokens/verify", { apiKey: w.c.apiKey, body: { token } })).body.valid
const authorize = (w: World) =>
  app.request("POST", "/v1/authorize", { apiKey: w.c.apiKey, body: { agentId: w.agentId, principalId: "Bob@Example.com", scopes: ["email:read"] } })
const newBundle = (w: World) =>
  app.request("POST", "/v1/consent-bundles", { apiKey: w.c.apiKey, body: { agentId: w.agentId, userId: "Bob@Example.com", scopes: ["email:read"] } })
const events = (w: World, type: string) =>
  app.query<{ data: any }>("SELECT data FROM events WHERE developer_id = $1 AND type = $2 ORDER BY id", [w.c.developerId, type])

test("Okta's deactivation revokes every grant of the principal (cascade, bundle), denies pending requests and blocks new ones", async () => {
  const w = await world()
  expect(await verify(w, w.rootToken)).toBe(true)
  const off = await w.c.send("PATCH", `/Users/${w.scimUserId}`, patch({ op: "replace", value: { active: false } }))
  expect([off.status, off.body.active]).toEqual([200, false])

  expect(await verify(w, w.rootToken)).toBe(false)
  expect(await verify(w, w.otherToken)).toBe(true)
  const revoked = (await events(w, "grant.revoked")).map((e) => e.data.grantId)
  expect(revoked).toHaveLength(3)
  expect(revoked).toContain(w.childGrantId)
  expect((await events(w, "consent_bundle.revoked")).map((e) => e.data.bundleId)).toEqual([w.bundleId])
  const [deprovisioned] = await events(w, "scim.user.deprovisioned")
  expect(deprovisioned!.data).toEqual({ scimUserId: w.scimUserId, principalId: "Bob@Example.com", revokedGrants: 3 })
  const [request] = await app.query("SELECT status FROM auth_requests WHERE id = $1", [w.pendingId])
  expect(request.status).toBe("denied")
  // bob's passkeys are gone (reactivation restores nothing); ann's stay
  const passkeys = await app.query("SELECT principal_id AS p FROM webauthn_credentials WHERE developer_id = $1 AND deleted_at IS NULL", [w.c.developerId])
  expect(passkeys.map((r) => r.p)).toEqual(["ann@example.com"])
  expect(await events(w, "fido.credential.deleted")).toHaveLength(1)
  const audit = await app.query("SELECT action, principal_id AS p FROM audit_log WHERE developer_id = $1 AND action LIKE 'service.scim.user%' ORDER BY seq", [w.c.developerId])
  expect(audit.map((a) => a.action)).toEqual(["service.scim.user_provisioned", "service.scim.user_deprovisioned"])

  for (const res of [await authorize(w), await newBundle(w)]) {
    expect([res.status, res.body.code]).toEqual([403, "PRINCIPAL_INACTIVE"])
  }
  // reactivation restores nothing, but the principal may be authorized again
  const on = await w.c.send("PATCH", `/Users/${w.scimUserId}`, patch({ op: "Replace", path: "active", value: "True" }))
  expect(on.body.active).toBe(true)
  expect(await verify(w, w.rootToken)).toBe(false)
  expect((await app.query("SELECT status FROM consent_bundles WHERE id = $1", [w.bundleId]))[0].status).toBe("revoked")
  expect((await authorize(w)).status).toBe(201)
})

test("DELETE deprovisions the same way; a new user with the same principalId makes the principal active again", async () => {
  const w = await world()
  expect((await w.c.send("DELETE", `/Users/${w.scimUserId}`)).status).toBe(204)
  expect(await verify(w, w.rootToken)).toBe(false)
  expect((await events(w, "scim.user.deprovisioned"))[0]!.data.revokedGrants).toBe(3)
  expect((await authorize(w)).body.code).toBe("PRINCIPAL_INACTIVE")
  // principalId is taken from userName as sent: another case is another principal
  const other = await w.c.send("POST", "/Users", newUser("bob@example.com"))
  expect((await authorize(w)).body.code).toBe("PRINCIPAL_INACTIVE")
  expect((await w.c.send("DELETE", `/Users/${other.body.id}`)).status).toBe(204)
  expect((await w.c.send("POST", "/Users", newUser("Bob@Example.com"))).status).toBe(201)
  expect((await authorize(w)).status).toBe(201)
  expect(await verify(w, w.rootToken)).toBe(false)
})

test("with deprovision \"none\" grants stay, but the inactive principal cannot approve consent, be authorized or get a bundle", async () => {
  const w = await world({ deprovision: "none" })
  const off = await w.c.send("PUT", `/Users/${w.scimUserId}`, newUser("Bob@Example.com", { active: "false" }))
  expect([off.status, off.body.active]).toEqual([200, false])
  // the grants stay (reactivation restores them), but no point lets an inactive principal's grant be used (§20)
  expect((await app.query("SELECT status FROM grants WHERE developer_id = $1 AND principal_id = 'Bob@Example.com'", [w.c.developerId])).every((g) => g.status === "active")).toBe(true)
  expect(await verify(w, w.rootToken)).toBe(false)
  expect((await events(w, "scim.user.deprovisioned"))[0]!.data.revokedGrants).toBe(0)
  expect((await app.query("SELECT count(*)::int AS n FROM webauthn_credentials WHERE developer_id = $1 AND deleted_at IS NULL", [w.c.developerId]))[0].n).toBe(2)
  const approve = await app.request("POST", `/v1/consent/${w.pendingId}/approve`)
  expect([approve.status, approve.body.code]).toEqual([403, "PRINCIPAL_INACTIVE"])
  // the consent page's own form says so too
  const form = await fetch(`${app.url}/consent/approve`, {
    method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: `req=${w.pendingId}`, redirect: "manual"
  })
  expect(form.status).toBe(403)
  const page = await form.text()
  expect(page).toContain("Not allowed")
  expect(page).toContain("deactivated in this organisation")
  expect((await app.query("SELECT status FROM auth_requests WHERE id = $1", [w.pendingId]))[0].status).toBe("pending")
  expect((await authorize(w)).body.code).toBe("PRINCIPAL_INACTIVE")
  expect((await newBundle(w)).body.code).toBe("PRINCIPAL_INACTIVE")
})

test("with deprovision \"none\" a deleted user is inactive: delegation stops with 403 PRINCIPAL_INACTIVE (§20)", async () => {
  const w = await world({ deprovision: "none" })
  expect((await w.c.send("DELETE", `/Users/${w.scimUserId}`)).status).toBe(204)
  expect(await verify(w, w.rootToken)).toBe(false)
  const subAgentId = await createAgent(app, w.c.developerId, ["email:read"], "Sub 2")
  const delegated = await app.request("POST", "/v1/grants/delegate", {
    apiKey: w.c.apiKey, body: { parentGrantToken: w.rootToken, subAgentId, scopes: ["email:read"] }
  })
  expect([delegated.status, delegated.body.code]).toEqual([403, "PRINCIPAL_INACTIVE"])
  expect((await authorize(w)).body.code).toBe("PRINCIPAL_INACTIVE")
})

test.skipIf(!usingRealPostgres)("a deprovisioning in flight while a bundle is made: the bundle waits for it and is refused, no grant is left (§20)", async () => {
  const w = await world({ deprovision: "none" })
  const before = (await app.query("SELECT count(*)::int AS n FROM grants WHERE developer_id = $1", [w.c.developerId]))[0].n
  // another connection deprovisions Bob and holds its transaction open while the bundle is asked for
  const other = new pg.Client({ connectionString: app.databaseUrl })
  await other.connect()
  try {
    await other.query("BEGIN")
    await other.query("UPDATE scim_users SET active = false WHERE id = $1", [w.scimUserId])
    const pending = newBundle(w)
    // the request reaches the user's row and waits on its lock
    const waiting = async () => (await app.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"))[0].n > 0
    for (let i = 0; i < 200 && !(await waiting()); i++) await Bun.sleep(25)
    expect(await waiting()).toBe(true)
    await other.query("COMMIT")
    const res = await pending
    expect([res.status, res.body.code]).toEqual([403, "PRINCIPAL_INACTIVE"])
  } finally {
    await other.end()
  }
  expect((await app.query("SELECT count(*)::int AS n FROM grants WHERE developer_id = $1", [w.c.developerId]))[0].n).toBe(before)
})

test("principals the directory does not know are not restricted", async () => {
  const w = await world()
  const res = await app.request("POST", "/v1/authorize", { apiKey: w.c.apiKey, body: { agentId: w.agentId, principalId: "nobody@example.com", scopes: ["email:read"] } })
  expect(res.status).toBe(201)
})

test("deprovisioning is one transaction: a revocation that fails leaves the user active and nothing revoked or emitted", async () => {
  const c = await scimClient(app)
  const agentId = await createAgent(app, c.developerId, ["email:read"])
  const user = (await c.send("POST", "/Users", newUser("Carol@Example.com"))).body
  const grants = await Promise.all([1, 2].map(() =>
    issueGrant(app, { developerId: c.developerId, agentId, principalId: "Carol@Example.com", scopes: ["email:read"] })))
  // revoking the second grant fails (an injected database error) in the middle of the deprovisioning
  await app.query(`CREATE FUNCTION fail_carol() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.status = 'revoked' AND NEW.id = '${grants[1]!.grant.id}' THEN RAISE EXCEPTION 'injected'; END IF; RETURN NEW; END $$`)
  await app.query("CREATE TRIGGER fail_carol BEFORE UPDATE ON grants FOR EACH ROW EXECUTE FUNCTION fail_carol()")
  try {
    const off = await c.send("PATCH", `/Users/${user.id}`, patch({ op: "replace", value: { active: false } }))
    expect([off.status, off.body.schemas]).toEqual([500, ["urn:ietf:params:scim:api:messages:2.0:Error"]])
  } finally {
    await app.query("DROP TRIGGER fail_carol ON grants")
    await app.query("DROP FUNCTION fail_carol()")
  }
  const after = await c.send("GET", `/Users/${user.id}`)
  expect([after.body.active, after.body.meta.version]).toEqual([true, 'W/"1"'])
  const statuses = await app.query("SELECT status FROM grants WHERE principal_id = 'Carol@Example.com' AND developer_id = $1", [c.developerId])
  expect(statuses.map((g) => g.status)).toEqual(["active", "active"])
  const emitted = await app.query("SELECT type FROM events WHERE developer_id = $1 AND type IN ('grant.revoked', 'scim.user.updated', 'scim.user.deprovisioned')", [c.developerId])
  expect(emitted).toEqual([])
  // once the fault is gone, the same request deprovisions
  const retry = await c.send("PATCH", `/Users/${user.id}`, patch({ op: "replace", value: { active: false } }))
  expect(retry.status).toBe(200)
  expect((await events({ c } as World, "scim.user.deprovisioned"))[0]!.data.revokedGrants).toBe(2)
})
