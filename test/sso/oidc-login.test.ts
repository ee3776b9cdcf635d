/**
 * OIDC login against real providers on loopback (decisions §12): Okta-like (client_secret_basic,
 * groups in the ID token), Google-like (hd, email_verified, client_secret_post) and Entra-like
 * (multi-tenant issuer template with tid, claims from userinfo, groups overage). Each rule of the
 * ID token is broken once by a provider that re-signs its token (test/support/oidc-idp.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import type { TestApp } from "../support/app.ts"
import { type Idp, startIdp } from "../support/oidc-idp.ts"
import { createConnection, loginAt, loginJson, oidcConnection, startSsoApp } from "./helpers.ts"

const TENANT_A = "6f1c1a4e-2b7d-4c1e-9a51-0d3f4e5a6b7c"
const TENANT_B = "0b9e8d7c-6a5b-4c3d-8e2f-1a0b9c8d7e6f"

let app: TestApp
let okta: Idp
let google: Idp
let entra: Idp
let dev: { apiKey: string; developerId: string }
let oktaConn: { id: string }
let googleConn: { id: string }
let googleDev: { apiKey: string; developerId: string }
let entraDev: { apiKey: string; developerId: string }

beforeAll(async () => {
  const started = await startSsoApp({ env: { RATE_LIMIT_SCALE: "20" } })
  app = started.app
  const common = { clientId: "aas-client", clientSecret: "s3cret-value-never-returned", redirectUri: started.redirectUri }
  okta = await startIdp({
    ...common,
    flavor: "okta",
    accounts: [
      { sub: "00u-alice", email: "Alice@Example.com", email_verified: true, groups: ["engineering", "everyone"], name: "Alice" },
      { sub: "00u-bob", email: "bob@example.com", email_verified: true, groups: ["sales"] }
    ]
  })
  google = await startIdp({
    ...common,
    flavor: "google",
    accounts: [
      { sub: "g-1001", email: "carol@acme.test", email_verified: true, hd: "acme.test" },
      { sub: "g-1002", email: "mallory@other.test", email_verified: true, hd: "other.test" },
      { sub: "g-1003", email: "dave@acme.test", email_verified: false, hd: "acme.test" }
    ]
  })
  entra = await startIdp({
    ...common,
    flavor: "entra",
    tenantId: TENANT_A,
    accounts: [
      { sub: "e-1", email: "erin@contoso.test", email_verified: true, groups: ["g-admins"] },
      { sub: "e-2", email: "frank@contoso.test", email_verified: true, groups: ["g-admins"], overage: true },
      { sub: "e-3", email: "gina@fabrikam.test", email_verified: true, tid: TENANT_B }
    ]
  })
  dev = await app.signup()
  oktaConn = await createConnection(app, dev.apiKey, oidcConnection(okta, {
    groupsClaim: "groups",
    groupMappings: { engineering: ["repo:read", "repo:write"] },
    defaultScopes: ["profile:read"],
    domains: ["example.com"]
  }))
  googleDev = await app.signup()
  googleConn = await createConnection(app, googleDev.apiKey, oidcConnection(google, { tokenEndpointAuthMethod: "client_secret_post", domains: ["acme.test"], scopes: "openid email profile" }))
  entraDev = await app.signup()
  await createConnection(app, entraDev.apiKey, oidcConnection(entra, {
    tenantMode: "entra-multi", allowedTenants: [TENANT_A], domains: ["contoso.test"], groupsClaim: "groups", groupMappings: { "g-admins": ["admin:all"] }, defaultScopes: ["basic"]
  }))
}, 120_000)

afterAll(async () => {
  okta.tamper = null
  await Promise.all([okta?.stop(), google?.stop(), entra?.stop()])
  await app?.stop()
})

describe("Okta-like provider (client_secret_basic, groups claim)", () => {
  test("login: PKCE S256 and nonce sent; the session names the JIT-provisioned principal, groups and mapped scopes", async () => {
    const { code, state, authorizeUrl } = await loginAt(app, okta, dev.developerId, "00u-alice")
    const url = new URL(authorizeUrl)
    expect(url.searchParams.get("code_challenge_method")).toBe("S256")
    expect(url.searchParams.get("code_challenge")).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(url.searchParams.get("nonce")).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(url.searchParams.get("redirect_uri")).toBe(`${app.config.publicBaseUrl}/sso/oidc/callback`)
    const res = await app.request("POST", "/sso/callback/oidc", { body: { code, state } })
    expect(res.status).toBe(200)
    expect(res.body).toEqual({
      sessionId: expect.stringMatching(/^ssosess_/),
      principalId: "alice@example.com",
      developerId: dev.developerId,
      expiresAt: expect.any(String),
      groups: ["engineering", "everyone"],
      mappedScopes: ["profile:read", "repo:read", "repo:write"]
    })
    // 8 hours by default
    expect(Date.parse(res.body.expiresAt) - Date.now()).toBeGreaterThan(8 * 3600_000 - 60_000)
    expect(Date.parse(res.body.expiresAt) - Date.now()).toBeLessThanOrEqual(8 * 3600_000)
    // JIT wrote the directory through its own service: a SCIM user with the verified in-domain email, externalId = sso:<connection>:<sub>
    const users = await app.query("SELECT user_name, external_id, principal_id, active FROM scim_users WHERE developer_id = $1", [dev.developerId])
    expect(users).toEqual([{ userName: "alice@example.com", externalId: `sso:${oktaConn.id}:00u-alice`, principalId: "alice@example.com", active: true }])
    const events = await app.query("SELECT type, data FROM events WHERE developer_id = $1 AND type IN ('sso.login', 'scim.user.provisioned') ORDER BY created_at", [dev.developerId])
    expect(events.map((e: any) => e.type)).toEqual(["scim.user.provisioned", "sso.login"])
    expect(events[1].data).toEqual({ connectionId: oktaConn.id, protocol: "oidc", sessionId: res.body.sessionId })
    // the identity is keyed by (connection, iss, sub)
    const identities = await app.query("SELECT issuer, subject, principal_id FROM sso_identities WHERE connection_id = $1", [oktaConn.id])
    expect(identities).toEqual([{ issuer: okta.tokenIssuer, subject: "00u-alice", principalId: "alice@example.com" }])
  })

  test("a second login of the same identity reuses the principal; sessions list and delete", async () => {
    const res = await loginJson(app, okta, dev.developerId, "00u-alice")
    expect(res.status).toBe(200)
    expect(res.body.principalId).toBe("alice@example.com")
    expect(await app.query("SELECT count(*)::int AS n FROM scim_users WHERE developer_id = $1", [dev.developerId])).toEqual([{ n: 1 }])
    const list = await app.request("GET", "/v1/sso/sessions", { apiKey: dev.apiKey })
    expect(list.status).toBe(200)
    expect(list.body.sessions.length).toBe(2)
    expect(list.body.sessions[0]).toEqual({
      sessionId: res.body.sessionId, connectionId: oktaConn.id, principalId: "alice@example.com", groups: ["engineering", "everyone"],
      createdAt: expect.any(String), expiresAt: res.body.expiresAt
    })
    expect((await app.request("DELETE", `/v1/sso/sessions/${res.body.sessionId}`, { apiKey: dev.apiKey })).status).toBe(204)
    expect((await app.request("DELETE", `/v1/sso/sessions/${res.body.sessionId}`, { apiKey: dev.apiKey })).status).toBe(404)
    const other = await app.signup()
    expect((await app.request("GET", "/v1/sso/sessions", { apiKey: other.apiKey })).body.sessions).toEqual([])
  })

  test("a state is single use: the second callback with it answers 401 SSO_AUTH_FAILED", async () => {
    const { code, state } = await loginAt(app, okta, dev.developerId, "00u-bob")
    expect((await app.request("POST", "/sso/callback/oidc", { body: { code, state } })).status).toBe(200)
    const again = await app.request("POST", "/sso/callback/oidc", { body: { code, state } })
    expect(again.status).toBe(401)
    expect(again.body.code).toBe("SSO_AUTH_FAILED")
    const unknown = await app.request("POST", "/sso/callback/oidc", { body: { code, state: "x".repeat(43) } })
    expect(unknown.status).toBe(401)
  })

  test("a wrong client secret is the provider refusing us: 502 SSO_ERROR, not the person's fault", async () => {
    const d = await app.signup()
    await createConnection(app, d.apiKey, oidcConnection(okta, { clientSecret: "not-the-secret" }))
    const res = await loginJson(app, okta, d.developerId, "00u-bob")
    expect(res.status).toBe(502)
    expect(res.body.code).toBe("SSO_ERROR")
    expect(res.body.message).toContain("clientSecret")
    expect(res.text).not.toContain("not-the-secret")
  })

  test("the browser callback answers 303 to the stored redirect with the __Host- session cookie", async () => {
    const patched = await app.request("PATCH", `/v1/sso/connections/${oktaConn.id}`, { apiKey: dev.apiKey, body: { allowedRedirectUris: ["https://app.example.com/after-sso"] } })
    expect(patched.status).toBe(200)
    expect(patched.body.allowedRedirectUris).toEqual(["https://app.example.com/after-sso"])
    const { callback, cookie: preLogin } = await loginAt(app, okta, dev.developerId, "00u-bob", { redirect_uri: "https://app.example.com/after-sso" })
    const res = await app.request("GET", callback.pathname + callback.search, { headers: { cookie: preLogin } })
    expect(res.status).toBe(303)
    const location = new URL(res.headers.get("location")!)
    expect(location.origin + location.pathname).toBe("https://app.example.com/after-sso")
    expect(location.searchParams.get("sso_session")).toMatch(/^ssosess_/)
    const cookie = res.headers.get("set-cookie")!
    expect(cookie).toMatch(/^__Host-aas_sso=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=28800; HttpOnly; Secure; SameSite=Lax$/)
    // the cookie's token is stored only as its hash
    const token = /=([^;]+)/.exec(cookie)![1]!
    expect(await app.query("SELECT count(*)::int AS n FROM sso_sessions WHERE token_hash = $1", [token])).toEqual([{ n: 0 }])
  })

  test("login CSRF: the pre-login cookie is __Host-, HttpOnly, Secure, Lax, 10 minutes; a callback without it, or with another sign-in's, opens no session", async () => {
    const redirect = { redirect_uri: "https://app.example.com/after-sso" }
    const victim = await loginAt(app, okta, dev.developerId, "00u-alice", redirect)
    const begun = await app.request("GET", `/sso/login?org=${dev.developerId}&mode=redirect`)
    expect(begun.headers.get("set-cookie")).toMatch(/^__Host-aas_login_[A-Za-z0-9_-]{16}=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=600; HttpOnly; Secure; SameSite=Lax$/)
    const attacker = await loginAt(app, okta, dev.developerId, "00u-bob", redirect)
    const before = await app.query("SELECT count(*)::int AS n FROM sso_sessions")
    for (const cookie of [undefined, victim.cookie]) {
      const planted = await loginAt(app, okta, dev.developerId, "00u-bob", redirect)
      const res = await app.request("GET", planted.callback.pathname + planted.callback.search, cookie === undefined ? {} : { headers: { cookie } })
      expect(res.status).toBe(303)
      expect(res.headers.get("location")).toBe("https://app.example.com/after-sso?error=access_denied")
      expect(res.headers.get("set-cookie")).toBeNull()
    }
    expect(await app.query("SELECT count(*)::int AS n FROM sso_sessions")).toEqual(before)
    // the browser that started it signs in
    const own = await app.request("GET", attacker.callback.pathname + attacker.callback.search, { headers: { cookie: attacker.cookie } })
    expect(own.status).toBe(303)
    expect(own.headers.get("location")).toStartWith("https://app.example.com/after-sso?sso_session=ssosess_")
  })

  test("login routing: unknown domain 422 DOMAIN_NOT_CONFIGURED, redirect_uri not allowed 400, mode=redirect 302, no org 400", async () => {
    const unknown = await app.request("GET", `/sso/login?org=${dev.developerId}&domain=elsewhere.test`)
    expect(unknown.status).toBe(422)
    expect(unknown.body.code).toBe("DOMAIN_NOT_CONFIGURED")
    const claimed = await app.request("GET", `/sso/login?org=${dev.developerId}&domain=EXAMPLE.com`)
    expect(claimed.status).toBe(200)
    expect(claimed.body).toEqual({ authorizeUrl: expect.stringContaining(okta.url), protocol: "oidc", connectionId: oktaConn.id })
    const badRedirect = await app.request("GET", `/sso/login?org=${dev.developerId}&redirect_uri=${encodeURIComponent("https://evil.example/cb")}`)
    expect(badRedirect.status).toBe(400)
    expect(badRedirect.body.code).toBe("INVALID_REDIRECT_URI")
    const redirect = await app.request("GET", `/sso/login?org=${dev.developerId}&mode=redirect`)
    expect(redirect.status).toBe(302)
    expect(redirect.headers.get("location")).toStartWith(`${okta.url}/auth?`)
    expect((await app.request("GET", "/sso/login")).status).toBe(400)
    const none = await app.request("GET", "/sso/login?org=dev_unknown")
    expect(none.status).toBe(404)
  })

  test("a provider's refusal at the browser callback: 303 back with error=access_denied and no session", async () => {
    const begun = await app.request("GET", `/sso/login?org=${dev.developerId}&redirect_uri=${encodeURIComponent("https://app.example.com/after-sso")}`)
    const state = new URL(begun.body.authorizeUrl).searchParams.get("state")!
    const before = await app.query("SELECT count(*)::int AS n FROM sso_sessions")
    const res = await app.request("GET", `/sso/oidc/callback?error=access_denied&state=${state}`)
    expect(res.status).toBe(303)
    expect(res.headers.get("location")).toBe("https://app.example.com/after-sso?error=access_denied")
    expect(res.headers.get("set-cookie")).toBeNull()
    expect(await app.query("SELECT count(*)::int AS n FROM sso_sessions")).toEqual(before)
  })
})

describe("ID token rules (a provider that re-signs its token)", () => {
  const refused = async (tamper: Idp["tamper"]) => {
    okta.tamper = tamper
    try {
      const res = await loginJson(app, okta, dev.developerId, "00u-bob")
      return res
    } finally {
      okta.tamper = null
    }
  }
  const nowS = () => Math.floor(Date.now() / 1000)

  test("an untouched re-signed token passes (the tampering itself changes nothing)", async () => {
    const res = await refused({ claims: (c) => c })
    expect(res.status).toBe(200)
  })
  test("wrong issuer → 401", async () => {
    const res = await refused({ claims: (c) => ({ ...c, iss: "https://evil.example" }) })
    expect(res.status).toBe(401)
    expect(res.body.code).toBe("SSO_AUTH_FAILED")
    expect(res.body.message).toContain("iss")
  })
  test("another audience → 401; several audiences without azp → 401; with azp = client id → 200", async () => {
    expect((await refused({ claims: (c) => ({ ...c, aud: "someone-else" }) })).status).toBe(401)
    expect((await refused({ claims: (c) => ({ ...c, aud: ["aas-client", "someone-else"], azp: undefined }) })).status).toBe(401)
    expect((await refused({ claims: (c) => ({ ...c, aud: ["aas-client", "someone-else"], azp: "someone-else" }) })).status).toBe(401)
    expect((await refused({ claims: (c) => ({ ...c, aud: ["aas-client", "someone-else"], azp: "aas-client" }) })).status).toBe(200)
  })
  test("another nonce → 401", async () => {
    const res = await refused({ claims: (c) => ({ ...c, nonce: "not-the-nonce" }) })
    expect(res.status).toBe(401)
    expect(res.body.message).toContain("nonce")
  })
  test("expired more than 60 s ago → 401; expired 30 s ago passes (60 s skew)", async () => {
    expect((await refused({ claims: (c) => ({ ...c, iat: nowS() - 600, exp: nowS() - 90 }) })).status).toBe(401)
    expect((await refused({ claims: (c) => ({ ...c, iat: nowS() - 600, exp: nowS() - 30 }) })).status).toBe(200)
  })
  test("a symmetric signature (HS256 keyed with the client secret) → 401", async () => {
    const res = await refused({ hs256Secret: "s3cret-value-never-returned" })
    expect(res.status).toBe(401)
    expect(res.body.message).toContain("alg")
  })
  test("a signature by a key the provider does not publish → 401", async () => {
    const res = await refused({ foreignKey: true })
    expect(res.status).toBe(401)
    expect(res.body.code).toBe("SSO_AUTH_FAILED")
  })
})

describe("Google-like provider (hd, email_verified, client_secret_post)", () => {
  test("a Workspace account of a connection domain signs in with its verified email", async () => {
    const res = await loginJson(app, google, googleDev.developerId, "g-1001")
    expect(res.status).toBe(200)
    expect(res.body.principalId).toBe("carol@acme.test")
  })
  test("hd outside the connection's domains → 401", async () => {
    const res = await loginJson(app, google, googleDev.developerId, "g-1002")
    expect(res.status).toBe(401)
    expect(res.body.message).toContain("hd other.test")
  })
  test("an unverified email is not used: no link to the directory user with that userName; JIT names the principal sso:<connection>:<sub>", async () => {
    // a directory user already holds dave@acme.test: an unverified email must not sign in as them
    const token = await app.request("POST", "/v1/scim/tokens", { apiKey: googleDev.apiKey, body: { label: "idp" } })
    const scim = await app.request("POST", "/scim/v2/Users", {
      bearer: token.body.token,
      body: { schemas: ["urn:ietf:params:scim:schemas:core:2.0:User"], userName: "dave@acme.test" }
    })
    expect(scim.status).toBe(201)
    const res = await loginJson(app, google, googleDev.developerId, "g-1003")
    expect(res.status).toBe(200)
    expect(res.body.principalId).toBe(`sso:${googleConn.id}:g-1003`)
    const [identity] = await app.query("SELECT email, principal_id FROM sso_identities WHERE subject = 'g-1003'")
    expect(identity).toEqual({ email: null, principalId: `sso:${googleConn.id}:g-1003` })
  })
})

describe("Entra-like provider (multi-tenant issuer template, userinfo claims)", () => {
  test("the issuer is the template with the token's tid; groups from userinfo map to scopes", async () => {
    const res = await loginJson(app, entra, entraDev.developerId, "e-1")
    expect(res.status).toBe(200)
    expect(res.body.principalId).toBe("erin@contoso.test")
    expect(res.body.groups).toEqual(["g-admins"])
    expect(res.body.mappedScopes).toEqual(["admin:all", "basic"])
    const [identity] = await app.query("SELECT issuer FROM sso_identities WHERE subject = 'e-1'")
    expect(identity.issuer).toBe(`${entra.url}/${TENANT_A}/v2.0`)
  })
  test("a token whose tid does not match its issuer's tenant → 401", async () => {
    const res = await loginJson(app, entra, entraDev.developerId, "e-3")
    expect(res.status).toBe(401)
    expect(res.body.code).toBe("SSO_AUTH_FAILED")
  })
  test("a groups overage means no groups: default scopes only", async () => {
    const res = await loginJson(app, entra, entraDev.developerId, "e-2")
    expect(res.status).toBe(200)
    expect(res.body.groups).toEqual([])
    expect(res.body.mappedScopes).toEqual(["basic"])
  })
})
