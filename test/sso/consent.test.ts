/**
 * What SSO is for (decisions §12): with an enforce connection the consent page sends the person to
 * their provider first; only the request's principal approves (else 403 PRINCIPAL_MISMATCH), for
 * the requested scopes their groups allow; the grant records approvalMethod "sso"; a policy allow
 * no longer approves alone and a bundle needs such an approval. Also the permissions page's
 * sign-in, and the 10-minute state on TestClock.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import type { TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { type Idp, startIdp } from "../support/oidc-idp.ts"
import { createConnection, loginAt, oidcConnection, preLoginCookie, startSsoApp } from "./helpers.ts"

let app: TestApp
let idp: Idp
let base: string
let dev: { apiKey: string; developerId: string }
let agentId: string

const cookieOf = (res: { headers: Headers }) => /^(__Host-aas_sso=[^;]+)/.exec(res.headers.get("set-cookie") ?? "")?.[1]

beforeAll(async () => {
  const started = await startSsoApp({ env: { RATE_LIMIT_SCALE: "20" } })
  app = started.app
  base = started.base
  idp = await startIdp({
    flavor: "okta", clientId: "aas-client", clientSecret: "s3cret-value-never-returned", redirectUri: started.redirectUri,
    accounts: [
      { sub: "00u-alice", email: "alice@example.com", email_verified: true, groups: ["engineering"] },
      { sub: "00u-bob", email: "bob@example.com", email_verified: true, groups: ["engineering"] }
    ]
  })
  dev = await app.signup()
  await createConnection(app, dev.apiKey, oidcConnection(idp, {
    enforce: true, domains: ["example.com"], groupsClaim: "groups", groupMappings: { engineering: ["email:read"] }, defaultScopes: ["calendar:read"]
  }))
  agentId = await createAgent(app, dev.developerId, ["email:read", "calendar:read", "files:write"])
}, 120_000)
afterAll(async () => {
  await idp?.stop()
  await app?.stop()
})

const authorize = async (principalId: string, scopes = ["email:read", "files:write", "calendar:read"]) => {
  const res = await app.request("POST", "/v1/authorize", {
    apiKey: dev.apiKey, body: { agentId, principalId, scopes, redirectUri: "https://agent.example.com/cb", state: "xyz" }
  })
  expect(res.status).toBe(201)
  expect(res.body.code).toBeUndefined()
  return res.body.authRequestId as string
}

/** consent page → provider (as `sub`) → callback: the session cookie, and where the callback sent the browser */
const signInFromConsent = async (req: string, sub: string) => {
  const page = await app.request("GET", `/consent?req=${req}`)
  expect(page.status).toBe(303)
  const location = page.headers.get("location")!
  expect(location).toStartWith(`${idp.url}/auth?`)
  const back = await idp.login(location, sub)
  const callback = await app.request("GET", back.pathname + back.search, { headers: { cookie: preLoginCookie(page.headers)! } })
  expect(callback.status).toBe(303)
  return { cookie: cookieOf(callback)!, location: callback.headers.get("location")! }
}

describe("consent with an enforce connection", () => {
  test("the page sends the person to the provider, then back; approved as the principal with the scopes their groups allow", async () => {
    const req = await authorize("alice@example.com")
    const { cookie, location } = await signInFromConsent(req, "00u-alice")
    expect(location).toBe(`${base}/consent?req=${req}`)
    const page = await app.request("GET", `/consent?req=${req}`, { headers: { cookie } })
    expect(page.status).toBe(200)
    expect(page.text).toContain("Signed in as alice@example.com")
    expect(page.text).toContain("<code>email:read</code>")
    expect(page.text).toContain("<code>calendar:read</code>")
    expect(page.text).not.toContain("<code>files:write</code>")
    // without the cookie the approval is refused
    const anonymous = await app.request("POST", `/v1/consent/${req}/approve`)
    expect(anonymous.status).toBe(403)
    expect(anonymous.body.code).toBe("PRINCIPAL_MISMATCH")
    const approved = await app.request("POST", "/consent/approve", {
      rawBody: `req=${req}`, headers: { "content-type": "application/x-www-form-urlencoded", cookie }
    })
    expect(approved.status).toBe(303)
    const redirect = new URL(approved.headers.get("location")!)
    expect(redirect.searchParams.get("state")).toBe("xyz")
    const [request] = await app.query("SELECT status, grant_id, sso_session_id FROM auth_requests WHERE id = $1", [req])
    expect(request.status).toBe("approved")
    expect(request.ssoSessionId).toMatch(/^ssosess_/)
    const [grant] = await app.query("SELECT scopes, approval_method, principal_id FROM grants WHERE id = $1", [request.grantId])
    expect(grant).toEqual({ scopes: ["email:read", "calendar:read"], approvalMethod: "sso", principalId: "alice@example.com" })
    const [created] = await app.query("SELECT data FROM events WHERE type = 'grant.created' AND data->>'grantId' = $1", [request.grantId])
    expect(created.data).toMatchObject({ approvalMethod: "sso", scopes: ["email:read", "calendar:read"] })
    // the code exchanges for a token carrying only those scopes
    const token = await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code: redirect.searchParams.get("code"), agentId } })
    expect(token.status).toBe(201)
    expect(token.body.scopes).toEqual(["email:read", "calendar:read"])
  })

  test("signed in as another principal: the page and both approvals answer 403 PRINCIPAL_MISMATCH; nothing is granted", async () => {
    const req = await authorize("alice@example.com")
    const { cookie } = await signInFromConsent(req, "00u-bob")
    const page = await app.request("GET", `/consent?req=${req}`, { headers: { cookie } })
    expect(page.status).toBe(403)
    expect(page.text).toContain("PRINCIPAL_MISMATCH")
    const json = await app.request("POST", `/v1/consent/${req}/approve`, { headers: { cookie } })
    expect(json.status).toBe(403)
    expect(json.body.code).toBe("PRINCIPAL_MISMATCH")
    const form = await app.request("POST", "/consent/approve", { rawBody: `req=${req}`, headers: { "content-type": "application/x-www-form-urlencoded", cookie } })
    expect(form.status).toBe(403)
    expect(form.text).toContain("PRINCIPAL_MISMATCH")
    const [request] = await app.query("SELECT status, grant_id FROM auth_requests WHERE id = $1", [req])
    expect(request).toEqual({ status: "pending", grantId: null })
  })

  test("a refused sign-in comes back to the consent page with error=access_denied and no session", async () => {
    const req = await authorize("alice@example.com")
    const page = await app.request("GET", `/consent?req=${req}`)
    const state = new URL(page.headers.get("location")!).searchParams.get("state")!
    const callback = await app.request("GET", `/sso/oidc/callback?error=access_denied&state=${state}`)
    expect(callback.status).toBe(303)
    expect(callback.headers.get("location")).toBe(`${base}/consent?req=${req}&error=access_denied`)
    expect(callback.headers.get("set-cookie")).toBeNull()
    const refused = await app.request("GET", `/consent?req=${req}&error=access_denied`)
    expect(refused.status).toBe(401)
    expect(refused.text).toContain("Sign-in refused")
  })

  test("a deleted session no longer counts", async () => {
    const req = await authorize("alice@example.com")
    const { cookie } = await signInFromConsent(req, "00u-alice")
    const [session] = await app.query("SELECT id FROM sso_sessions WHERE principal_id = 'alice@example.com' ORDER BY created_at DESC LIMIT 1")
    expect((await app.request("DELETE", `/v1/sso/sessions/${session.id}`, { apiKey: dev.apiKey })).status).toBe(204)
    const page = await app.request("GET", `/consent?req=${req}`, { headers: { cookie } })
    expect(page.status).toBe(303)
    expect((await app.request("POST", `/v1/consent/${req}/approve`, { headers: { cookie } })).body.code).toBe("PRINCIPAL_MISMATCH")
  })

  test("a policy allow does not approve alone; a bundle needs an SSO approval for scopes within its grant", async () => {
    const policy = await app.request("POST", "/v1/policies", { apiKey: dev.apiKey, body: { name: "allow all", effect: "allow", scopes: ["email:read", "calendar:read", "files:write"] } })
    expect(policy.status).toBe(201)
    const req = await authorize("alice@example.com", ["email:read"])
    await app.request("DELETE", `/v1/policies/${policy.body.id}`, { apiKey: dev.apiKey })
    const bundle = (body: Record<string, unknown>) =>
      app.request("POST", "/v1/consent-bundles", { apiKey: dev.apiKey, body: { agentId, userId: "alice@example.com", scopes: ["email:read"], ...body } })
    const without = await bundle({})
    expect(without.status).toBe(403)
    expect(without.body.code).toBe("CONSENT_REQUIRED")
    expect(without.body.message).toContain("signed in through SSO")
    const { cookie } = await signInFromConsent(req, "00u-alice")
    expect((await app.request("POST", `/v1/consent/${req}/approve`, { headers: { cookie } })).status).toBe(200)
    // files:write was never granted by the SSO approval: a bundle cannot claim it
    const beyond = await bundle({ consentRequestId: req, scopes: ["email:read", "files:write"] })
    expect(beyond.status).toBe(403)
    const made = await bundle({ consentRequestId: req })
    expect(made.status).toBe(201)
  })

  test("the permissions page's sign-in: provider, then the page with a fresh principal session", async () => {
    const start = await app.request("GET", `/permissions/login?org=${dev.developerId}`)
    expect(start.status).toBe(303)
    const back = await idp.login(start.headers.get("location")!, "00u-alice")
    const callback = await app.request("GET", back.pathname + back.search, { headers: { cookie: preLoginCookie(start.headers)! } })
    expect(callback.status).toBe(303)
    const location = callback.headers.get("location")!
    expect(location).toMatch(new RegExp(`^${base}/permissions#session=pst_`))
    const token = location.split("#session=")[1]!
    const grants = await app.request("GET", "/v1/principal/grants", { bearer: token })
    expect(grants.status).toBe(200)
    expect(grants.body.grants.every((g: any) => g.approvalMethod === "sso")).toBe(true)
    const other = await app.signup()
    expect((await app.request("GET", `/permissions/login?org=${other.developerId}`)).status).toBe(404)
  })
})

describe("policies read the SSO sign-in", () => {
  test("principal.ssoVerified is true only for a principal with a live SSO session of this developer", async () => {
    const d = await app.signup()
    await createConnection(app, d.apiKey, oidcConnection(idp, { domains: ["example.com"] }))
    const agent = await createAgent(app, d.developerId, ["email:read"])
    const cedar = `forbid (principal, action == Action::"authorize", resource) unless { resource.ssoVerified };`
    const synced = await app.request("POST", "/v1/policies/sync", { apiKey: d.apiKey, body: { format: "cedar", version: "1", content: Buffer.from(cedar).toString("base64") } })
    expect(synced.status).toBe(201)
    const evaluate = (principalId: string) =>
      app.request("POST", "/v1/policies/evaluate", { apiKey: d.apiKey, body: { agentId: agent, principalId, scopes: ["email:read"] } })
    expect((await evaluate("alice@example.com")).body.effect).toBe("deny")
    const { code, state } = await loginAt(app, idp, d.developerId, "00u-alice")
    expect((await app.request("POST", "/sso/callback/oidc", { body: { code, state } })).status).toBe(200)
    expect((await evaluate("alice@example.com")).body.effect).toBeNull()
    expect((await evaluate("bob@example.com")).body.effect).toBe("deny")
  })
})

describe("login state on TestClock", () => {
  test("a state older than 10 minutes is refused (401); a younger one works", async () => {
    const started = await startSsoApp({ testClock: true, startTime: Date.now() })
    const clockIdp = await startIdp({
      flavor: "okta", clientId: "aas-client", clientSecret: "s3cret-value-never-returned", redirectUri: started.redirectUri,
      accounts: [{ sub: "u1", email: "u1@example.com", email_verified: true }]
    })
    try {
      const d = await started.app.signup()
      await createConnection(started.app, d.apiKey, oidcConnection(clockIdp))
      const late = await loginAt(started.app, clockIdp, d.developerId, "u1")
      await started.app.adjust("10 minutes")
      const refused = await started.app.request("POST", "/sso/callback/oidc", { body: { code: late.code, state: late.state } })
      expect(refused.status).toBe(401)
      expect(refused.body.code).toBe("SSO_AUTH_FAILED")
      expect(refused.body.message).toContain("10 minutes")
      // back to the real time (the provider's tokens carry it), then a state 9 minutes old still works
      await started.app.setTime(Date.now())
      const timely = await loginAt(started.app, clockIdp, d.developerId, "u1")
      await started.app.adjust("9 minutes")
      const ok = await started.app.request("POST", "/sso/callback/oidc", { body: { code: timely.code, state: timely.state } })
      expect(ok.status).toBe(200)
    } finally {
      await clockIdp.stop()
      await started.app.stop()
    }
  })
})
