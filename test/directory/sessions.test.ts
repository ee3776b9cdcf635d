/**
 * Deprovisioning ends every session (decisions §11, §12; issue 33): after SCIM deactivation or
 * deletion, the person's principal session answers 401 and their SSO session (made by a real
 * sign-in at an OIDC provider on loopback) no longer counts, in the transaction that revoked their
 * grants; a new principal session for them answers 403 PRINCIPAL_INACTIVE.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import type { TestApp } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"
import { type Idp, startIdp } from "../support/oidc-idp.ts"
import { createConnection, loginJson, oidcConnection, startSsoApp } from "../sso/helpers.ts"
import { newUser, patch, type ScimClient, scimClient } from "./support.ts"

let app: TestApp
let idp: Idp

beforeAll(async () => {
  const started = await startSsoApp({ env: { RATE_LIMIT_SCALE: "20" } })
  app = started.app
  idp = await startIdp({
    flavor: "okta", clientId: "aas-client", clientSecret: "s3cret-value-never-returned", redirectUri: started.redirectUri,
    accounts: [{ sub: "00u-bob", email: "bob@example.com", email_verified: true }, { sub: "00u-ann", email: "ann@example.com", email_verified: true }]
  })
}, 120_000)
afterAll(async () => {
  await idp?.stop()
  await app?.stop()
})

/** bob and ann in the directory, each with a grant, a principal session and an SSO session */
const world = async () => {
  const c: ScimClient = await scimClient(app)
  await createConnection(app, c.apiKey, oidcConnection(idp, { domains: ["example.com"] }))
  const agentId = await createAgent(app, c.developerId, ["email:read"])
  const people: Record<string, { scimUserId: string; sessionToken: string; ssoSessionId: string; grantId: string }> = {}
  for (const [name, sub] of [["bob", "00u-bob"], ["ann", "00u-ann"]] as const) {
    const principalId = `${name}@example.com`
    const scimUserId = (await c.send("POST", "/Users", newUser(principalId))).body.id
    const grant = await issueGrant(app, { developerId: c.developerId, agentId, principalId, scopes: ["email:read"] })
    const session = await app.request("POST", "/v1/principal-sessions", { apiKey: c.apiKey, body: { principalId } })
    expect(session.status).toBe(201)
    const sso = await loginJson(app, idp, c.developerId, sub)
    expect(sso.status, sso.text).toBe(200)
    expect(sso.body.principalId).toBe(principalId)
    expect((await app.request("GET", "/v1/principal/grants", { bearer: session.body.sessionToken })).status).toBe(200)
    people[name] = { scimUserId, sessionToken: session.body.sessionToken, ssoSessionId: sso.body.sessionId, grantId: grant.grant.id }
  }
  return { c, people: people as Record<"bob" | "ann", (typeof people)[string]> }
}

const ssoSessionIds = async (c: ScimClient) =>
  ((await app.request("GET", "/v1/sso/sessions", { apiKey: c.apiKey })).body.sessions as Array<{ sessionId: string }>).map((s) => s.sessionId).sort()

const expectEnded = async (c: ScimClient, w: Awaited<ReturnType<typeof world>>, deleted: boolean) => {
  const old = await app.request("GET", "/v1/principal/grants", { bearer: w.people.bob.sessionToken })
  expect(old.status).toBe(401)
  expect(old.body.code).toBe("UNAUTHORIZED")
  expect(await app.query("SELECT count(*)::int AS n FROM principal_sessions WHERE developer_id = $1 AND principal_id = 'bob@example.com'", [c.developerId])).toEqual([{ n: 0 }])
  // the SSO session is ended in the same transaction as the grant's revocation (one commit: one clock reading apart at most)
  const [sso] = await app.query("SELECT revoked_at FROM sso_sessions WHERE id = $1", [w.people.bob.ssoSessionId])
  const [grant] = await app.query("SELECT status, revoked_at FROM grants WHERE id = $1", [w.people.bob.grantId])
  expect(grant.status).toBe("revoked")
  expect(sso.revokedAt).not.toBeNull()
  expect(Math.abs(new Date(sso.revokedAt).getTime() - new Date(grant.revokedAt).getTime())).toBeLessThan(1000)
  expect(await ssoSessionIds(c)).toEqual([w.people.ann.ssoSessionId])
  // ann is untouched
  expect((await app.request("GET", "/v1/principal/grants", { bearer: w.people.ann.sessionToken })).status).toBe(200)
  // no new session for bob
  const again = await app.request("POST", "/v1/principal-sessions", { apiKey: c.apiKey, body: { principalId: "bob@example.com" } })
  expect(again.status).toBe(403)
  expect(again.body.code).toBe("PRINCIPAL_INACTIVE")
  // nor a new SSO sign-in while deactivated (a deleted user frees its userName, so JIT may provision the person anew: §11)
  if (deleted) return
  const relogin = await loginJson(app, idp, c.developerId, "00u-bob")
  expect(relogin.status).toBe(401)
  expect(relogin.body.code).toBe("SSO_AUTH_FAILED")
}

test("SCIM deactivation (Okta's PATCH active=false) ends bob's principal and SSO sessions with his grants", async () => {
  const w = await world()
  const res = await w.c.send("PATCH", `/Users/${w.people.bob.scimUserId}`, patch({ op: "replace", value: { active: false } }))
  expect(res.status).toBe(200)
  await expectEnded(w.c, w, false)
})

test("SCIM DELETE ends them too", async () => {
  const w = await world()
  expect((await w.c.send("DELETE", `/Users/${w.people.bob.scimUserId}`)).status).toBe(204)
  await expectEnded(w.c, w, true)
})
