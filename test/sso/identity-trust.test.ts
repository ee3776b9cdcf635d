/**
 * Which principal an OIDC sign-in becomes (decisions §12, revised; issue 33): the three ways a
 * reviewer signed in as ceo@corp.example against real providers on loopback now fail, and the
 * honest ways in still work. The directory holds ceo@corp.example (externalId 00u-ceo); the
 * developer's Corp connection claims corp.example; a second provider (Partner) claims partner.example.
 * Also: iat in the future, entra-multi's allowedTenants, and the SSO approval's scope ceiling
 * when the connection maps no groups.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import type { TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { type Idp, startIdp } from "../support/oidc-idp.ts"
import { newUser, type ScimClient, scimClient } from "../directory/support.ts"
import { createConnection, loginAt, loginJson, oidcConnection, startSsoApp } from "./helpers.ts"

const TENANT_A = "6f1c1a4e-2b7d-4c1e-9a51-0d3f4e5a6b7c"
const TENANT_B = "0b9e8d7c-6a5b-4c3d-8e2f-1a0b9c8d7e6f"

let app: TestApp
let corp: Idp
let partner: Idp
let entra: Idp
let scim: ScimClient
let corpConn: { id: string }
let partnerConn: { id: string }
let ceoScimId: string

beforeAll(async () => {
  const started = await startSsoApp({ env: { RATE_LIMIT_SCALE: "50" } })
  app = started.app
  const common = { clientId: "aas-client", clientSecret: "s3cret-value-never-returned", redirectUri: started.redirectUri }
  corp = await startIdp({
    ...common,
    flavor: "okta",
    accounts: [
      { sub: "00u-ceo-real", email: "ceo@corp.example", email_verified: true },
      { sub: "00u-mallory", email: "mallory@corp.example", email_verified: false },
      { sub: "00u-jdoe", email: "JDoe@corp.example", email_verified: true }
    ]
  })
  partner = await startIdp({
    ...common,
    flavor: "okta",
    accounts: [
      // a provider the developer also trusts, for another domain, asserting a verified email of corp.example
      { sub: "p-eve", email: "ceo@corp.example", email_verified: true },
      // a subject equal to the CEO's externalId in the directory
      { sub: "00u-ceo", email: "eve@partner.example", email_verified: true }
    ]
  })
  entra = await startIdp({
    ...common,
    flavor: "entra",
    tenantId: TENANT_A,
    accounts: [{ sub: "e-1", email: "erin@contoso.test", email_verified: true }]
  })
  scim = await scimClient(app)
  ceoScimId = (await scim.send("POST", "/Users", newUser("ceo@corp.example", { externalId: "00u-ceo" }))).body.id
  // userName is not an email; the primary email is
  expect((await scim.send("POST", "/Users", newUser("jdoe", { emails: [{ value: "jdoe@corp.example", primary: true, type: "work" }] }))).status).toBe(201)
  corpConn = await createConnection(app, scim.apiKey, oidcConnection(corp, { name: "Corp", domains: ["corp.example"] }))
  partnerConn = await createConnection(app, scim.apiKey, oidcConnection(partner, { name: "Partner", domains: ["partner.example"] }))
}, 120_000)

afterAll(async () => {
  for (const idp of [corp, partner, entra]) if (idp) idp.tamper = null
  await Promise.all([corp?.stop(), partner?.stop(), entra?.stop()])
  await app?.stop()
})

const usersNamed = (userName: string) =>
  app.query("SELECT user_name, external_id, principal_id FROM scim_users WHERE developer_id = $1 AND user_name = $2 AND deleted_at IS NULL", [scim.developerId, userName])

describe("three ways of becoming ceo@corp.example now fail", () => {
  test("1. email_verified as the string \"true\": the email is not used; a JIT user of its own", async () => {
    corp.tamper = { claims: (c) => ({ ...c, email: "ceo@corp.example", email_verified: "true" }) }
    const res = await loginJson(app, corp, scim.developerId, "00u-mallory", { connection: corpConn.id }).finally(() => (corp.tamper = null))
    expect(res.status).toBe(200)
    expect(res.body.principalId).toBe(`sso:${corpConn.id}:00u-mallory`)
    const [identity] = await app.query("SELECT email, principal_id FROM sso_identities WHERE connection_id = $1 AND subject = '00u-mallory'", [corpConn.id])
    expect(identity).toEqual({ email: null, principalId: `sso:${corpConn.id}:00u-mallory` })
  })

  test("2. a verified email of a domain this connection does not claim (another provider's domain): not linked", async () => {
    const res = await loginJson(app, partner, scim.developerId, "p-eve", { connection: partnerConn.id })
    expect(res.status).toBe(200)
    expect(res.body.principalId).toBe(`sso:${partnerConn.id}:p-eve`)
    expect(await usersNamed(`sso:${partnerConn.id}:p-eve`)).toEqual([
      { userName: `sso:${partnerConn.id}:p-eve`, externalId: `sso:${partnerConn.id}:p-eve`, principalId: `sso:${partnerConn.id}:p-eve` }
    ])
  })

  test("3. a subject equal to the CEO's externalId, from another provider: not linked", async () => {
    const res = await loginJson(app, partner, scim.developerId, "00u-ceo", { connection: partnerConn.id })
    expect(res.status).toBe(200)
    // eve's own verified in-domain email names her JIT user
    expect(res.body.principalId).toBe("eve@partner.example")
  })

  test("none of them touched the CEO: one directory user, no identity linked to them, no session as them", async () => {
    expect(await usersNamed("ceo@corp.example")).toEqual([{ userName: "ceo@corp.example", externalId: "00u-ceo", principalId: "ceo@corp.example" }])
    expect(await app.query("SELECT count(*)::int AS n FROM sso_identities WHERE principal_id = 'ceo@corp.example'")).toEqual([{ n: 0 }])
    expect(await app.query("SELECT count(*)::int AS n FROM sso_sessions WHERE principal_id = 'ceo@corp.example'")).toEqual([{ n: 0 }])
    const ceo = await scim.send("GET", `/Users/${ceoScimId}`)
    expect(ceo.body.meta.created).toBe(ceo.body.meta.lastModified)
  })

  test("with enforce, the attackers' sessions cannot approve the CEO's consent request (403 PRINCIPAL_MISMATCH)", async () => {
    expect((await app.request("PATCH", `/v1/sso/connections/${partnerConn.id}`, { apiKey: scim.apiKey, body: { enforce: true } })).status).toBe(200)
    try {
      const agentId = await createAgent(app, scim.developerId, ["email:read"])
      const auth = await app.request("POST", "/v1/authorize", { apiKey: scim.apiKey, body: { agentId, principalId: "ceo@corp.example", scopes: ["email:read"] } })
      expect(auth.status).toBe(201)
      const { callback, cookie } = await loginAt(app, partner, scim.developerId, "p-eve", { connection: partnerConn.id })
      const back = await app.request("GET", callback.pathname + callback.search, { headers: { cookie } })
      expect(back.status).toBe(200)
      const session = /^(__Host-aas_sso=[^;]+)/.exec(back.headers.get("set-cookie")!)![1]!
      const approve = await app.request("POST", `/v1/consent/${auth.body.authRequestId}/approve`, { headers: { cookie: session } })
      expect(approve.status).toBe(403)
      expect(approve.body.code).toBe("PRINCIPAL_MISMATCH")
      expect((await app.query("SELECT status, grant_id FROM auth_requests WHERE id = $1", [auth.body.authRequestId]))[0]).toEqual({ status: "pending", grantId: null })
    } finally {
      await app.request("PATCH", `/v1/sso/connections/${partnerConn.id}`, { apiKey: scim.apiKey, body: { enforce: false } })
    }
  })
})

describe("the honest ways in", () => {
  test("the connection that claims corp.example, with email_verified true, links to the CEO (no new directory user)", async () => {
    const res = await loginJson(app, corp, scim.developerId, "00u-ceo-real", { connection: corpConn.id })
    expect(res.status).toBe(200)
    expect(res.body.principalId).toBe("ceo@corp.example")
    expect(await usersNamed("ceo@corp.example")).toHaveLength(1)
    // the link is stored: the same identity finds the same user again
    const again = await loginJson(app, corp, scim.developerId, "00u-ceo-real", { connection: corpConn.id })
    expect(again.body.principalId).toBe("ceo@corp.example")
    expect(await app.query("SELECT issuer, subject, principal_id FROM sso_identities WHERE connection_id = $1 AND principal_id = 'ceo@corp.example'", [corpConn.id]))
      .toEqual([{ issuer: corp.tokenIssuer, subject: "00u-ceo-real", principalId: "ceo@corp.example" }])
  })

  test("a verified in-domain email equal to a user's primary email (case-insensitively) links to that user", async () => {
    const res = await loginJson(app, corp, scim.developerId, "00u-jdoe", { connection: corpConn.id })
    expect(res.status).toBe(200)
    expect(res.body.principalId).toBe("jdoe")
  })
})

describe("ID token time and tenant rules", () => {
  const nowS = () => Math.floor(Date.now() / 1000)
  test("iat 10 minutes in the future → 401 SSO_AUTH_FAILED; 30 s ahead is within the 60 s skew", async () => {
    corp.tamper = { claims: (c) => ({ ...c, iat: nowS() + 600, exp: nowS() + 1200 }) }
    const future = await loginJson(app, corp, scim.developerId, "00u-ceo-real", { connection: corpConn.id }).finally(() => (corp.tamper = null))
    expect(future.status).toBe(401)
    expect(future.body.code).toBe("SSO_AUTH_FAILED")
    expect(future.body.message).toBe("The identity provider's answer was refused: iat is in the future beyond the 60 s skew")
    corp.tamper = { claims: (c) => ({ ...c, iat: nowS() + 30 }) }
    const near = await loginJson(app, corp, scim.developerId, "00u-ceo-real", { connection: corpConn.id }).finally(() => (corp.tamper = null))
    expect(near.status).toBe(200)
  })

  test("entra-multi needs allowedTenants (tenant GUIDs) and refuses a token of another tenant", async () => {
    const d = await app.signup()
    const create = (extra: Record<string, unknown>) =>
      app.request("POST", "/v1/sso/connections", { apiKey: d.apiKey, body: oidcConnection(entra, { tenantMode: "entra-multi", domains: ["contoso.test"], ...extra }) })
    const missing = await create({})
    expect(missing.status).toBe(400)
    expect(missing.body.details).toEqual([{ path: "allowedTenants", message: "is required with tenantMode entra-multi: the Entra tenant ids whose people may sign in" }])
    const wrong = await create({ allowedTenants: ["contoso"] })
    expect(wrong.status).toBe(400)
    expect(wrong.body.details).toEqual([{ path: "allowedTenants", message: "contoso is not an Entra tenant id (a GUID)" }])
    const single = await app.request("POST", "/v1/sso/connections", { apiKey: d.apiKey, body: oidcConnection(corp, { allowedTenants: [TENANT_A] }) })
    expect(single.status).toBe(400)
    expect(single.body.details).toEqual([{ path: "allowedTenants", message: "only with tenantMode entra-multi" }])
    const made = await create({ allowedTenants: [TENANT_A.toUpperCase()] })
    expect(made.status).toBe(201)
    expect(made.body.allowedTenants).toEqual([TENANT_A])
    expect((await loginJson(app, entra, d.developerId, "e-1")).status).toBe(200)
    // a token of tenant B, its issuer consistent with its tid: a valid Entra token, of a tenant not allowed
    entra.tamper = { claims: (c) => ({ ...c, tid: TENANT_B, iss: `${entra.url}/${TENANT_B}/v2.0` }) }
    const other = await loginJson(app, entra, d.developerId, "e-1").finally(() => (entra.tamper = null))
    expect(other.status).toBe(401)
    expect(other.body.message).toBe("The identity provider's answer was refused: the token's tid is not one of the connection's allowedTenants")
    // allowing tenant B lets it in
    const patched = await app.request("PATCH", `/v1/sso/connections/${made.body.id}`, { apiKey: d.apiKey, body: { allowedTenants: [TENANT_A, TENANT_B] } })
    expect(patched.body.allowedTenants).toEqual([TENANT_A, TENANT_B])
    entra.tamper = { claims: (c) => ({ ...c, tid: TENANT_B, iss: `${entra.url}/${TENANT_B}/v2.0` }) }
    const allowed = await loginJson(app, entra, d.developerId, "e-1").finally(() => (entra.tamper = null))
    expect(allowed.status, allowed.text).toBe(200)
  })
})

describe("an SSO approval grants requested ∩ (group-mapped ∪ defaultScopes), mapping or not", () => {
  /** a developer whose enforce connection has the given scope settings; the CEO signed in; a request for two scopes */
  const approveWith = async (settings: Record<string, unknown>) => {
    const d = await app.signup()
    await createConnection(app, d.apiKey, oidcConnection(corp, { enforce: true, domains: ["corp.example"], ...settings }))
    const agentId = await createAgent(app, d.developerId, ["email:read", "files:write"])
    const auth = await app.request("POST", "/v1/authorize", { apiKey: d.apiKey, body: { agentId, principalId: "ceo@corp.example", scopes: ["email:read", "files:write"] } })
    const { callback, cookie } = await loginAt(app, corp, d.developerId, "00u-ceo-real")
    const back = await app.request("GET", callback.pathname + callback.search, { headers: { cookie } })
    const session = /^(__Host-aas_sso=[^;]+)/.exec(back.headers.get("set-cookie")!)![1]!
    const approve = await app.request("POST", `/v1/consent/${auth.body.authRequestId}/approve`, { headers: { cookie: session } })
    const [request] = await app.query("SELECT r.status, g.scopes FROM auth_requests r LEFT JOIN grants g ON g.id = r.grant_id WHERE r.id = $1", [auth.body.authRequestId])
    return { approve, request }
  }

  test("no group mapping and no defaultScopes: nothing is approvable (403 FORBIDDEN), nothing granted", async () => {
    const { approve, request } = await approveWith({})
    expect(approve.status).toBe(403)
    expect(approve.body.code).toBe("FORBIDDEN")
    expect(approve.body.message).toBe("None of the requested scopes is allowed for your groups")
    expect(request).toEqual({ status: "pending", scopes: null })
  })

  test("no group mapping, defaultScopes [email:read]: only email:read is granted", async () => {
    const { approve, request } = await approveWith({ defaultScopes: ["email:read"] })
    expect(approve.status).toBe(200)
    expect(request).toEqual({ status: "approved", scopes: ["email:read"] })
  })
})
