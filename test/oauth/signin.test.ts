/**
 * Sign-in at the OAuth authorization endpoint (decisions §22.5), driven with fetch and a cookie jar
 * per browser: the chooser, SSO against a real OIDC provider on loopback (JIT, a live session
 * reused with its creation time as auth_time, another developer's session not reused, enforce →
 * only SSO), a usernameless passkey (software authenticator: user handle, counter), fidoRequired's
 * passkey after SSO, an inactive principal → access_denied, and the refusals without the cookie.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as jose from "jose"
import type { TestApp } from "../support/app.ts"
import { type Idp, startIdp } from "../support/oidc-idp.ts"
import { SoftAuthenticator } from "../passkeys/softAuthenticator.ts"
import { createConnection, oidcConnection, startSsoApp } from "../sso/helpers.ts"
import { pkce, postForm, registerClient, registerServer } from "./support.ts"

const ORIGIN = "https://id.example.test"
const RP_ID = "example.test"
const REDIRECT = "http://127.0.0.1:7777/callback"

let app: TestApp
let idp: Idp
let devA: { apiKey: string; developerId: string }
let devB: { apiKey: string; developerId: string }
let clientA: any
let clientB: any
let connA: { id: string }

/** a browser: its cookies, carried by hand (every answer here is a 303 or a page) */
class Browser {
  readonly jar = new Map<string, string>()
  take(headers: Headers) {
    for (const c of headers.getSetCookie()) {
      const [pair] = c.split(";")
      const at = pair!.indexOf("=")
      this.jar.set(pair!.slice(0, at), pair!.slice(at + 1))
    }
  }
  get cookie() {
    return [...this.jar].map(([k, v]) => `${k}=${v}`).join("; ")
  }
  async get(url: string) {
    const u = new URL(url, app.config.publicBaseUrl)
    const res = await app.request("GET", u.pathname + u.search, { headers: { cookie: this.cookie } })
    this.take(res.headers)
    return res
  }
  async post(url: string, body: unknown) {
    const res = await app.request("POST", new URL(url, app.config.publicBaseUrl).pathname, { body, headers: { cookie: this.cookie } })
    this.take(res.headers)
    return res
  }
}

beforeAll(async () => {
  const started = await startSsoApp({ env: { RATE_LIMIT_SCALE: "100", WEBAUTHN_ORIGIN: ORIGIN, WEBAUTHN_RP_ID: RP_ID } })
  app = started.app
  idp = await startIdp({
    flavor: "okta", clientId: "aas-client", clientSecret: "s3cret-value-never-returned", redirectUri: started.redirectUri,
    accounts: [
      { sub: "00u-alice", email: "alice@example.com", email_verified: true, groups: ["engineering"] },
      { sub: "00u-carl", email: "carl@example.com", email_verified: true, groups: ["engineering"] }
    ]
  })
  devA = await app.signup({ plan: "enterprise" })
  connA = await createConnection(app, devA.apiKey, oidcConnection(idp, { name: "Example Corp", domains: ["example.com"] }))
  await registerServer(app, devA.apiKey, { login: { sso: true, passkey: true, developerLoginUrl: "http://127.0.0.1:9/login" } })
  clientA = await registerClient(app, devA.developerId)
  // devB enforces SSO: whatever its resource server lists, only SSO is offered
  devB = await app.signup({ plan: "enterprise" })
  await createConnection(app, devB.apiKey, oidcConnection(idp, { name: "B Corp", domains: ["example.com"], enforce: true }))
  await registerServer(app, devB.apiKey, { identifier: "http://127.0.0.1:9/b-mcp", login: { passkey: true, developerLoginUrl: "http://127.0.0.1:9/login" } })
  clientB = await registerClient(app, devB.developerId)
}, 120_000)
afterAll(async () => {
  await idp?.stop()
  await app?.stop()
})

const issuerOf = (dev: { developerId: string }) => `${app.config.publicBaseUrl}/oauth/${dev.developerId}`

/** /authorize in this browser: the interaction cookie set, the chooser's URL */
const start = async (browser: Browser, dev: { developerId: string }, client: any, extra: Record<string, string> = {}) => {
  const { challenge, verifier } = pkce()
  const query = new URLSearchParams({
    response_type: "code", client_id: client.client_id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: "S256", state: "st", ...extra
  })
  const res = await browser.get(`/oauth/${dev.developerId}/authorize?${query}`)
  expect(res.status).toBe(303)
  const login = res.headers.get("location")!
  expect(login).toStartWith(`${issuerOf(dev)}/login?ix=areq_`)
  return { login, ix: new URL(login).searchParams.get("ix")!, verifier }
}

/** the provider's login as `sub`, then our callback: where it sends the browser */
const throughProvider = async (browser: Browser, providerUrl: string, sub: string) => {
  expect(providerUrl).toStartWith(`${idp.url}/auth?`)
  const back = await idp.login(providerUrl, sub)
  const callback = await browser.get(back.toString())
  expect(callback.status).toBe(303)
  return callback.headers.get("location")!
}

const approve = async (browser: Browser, ix: string) => {
  const res = await app.request("POST", "/consent/approve", {
    rawBody: new URLSearchParams({ req: ix }).toString(), headers: { "content-type": "application/x-www-form-urlencoded", cookie: browser.cookie }
  })
  expect(res.status).toBe(303)
  return new URL(res.headers.get("location")!)
}

const requestRow = async (ix: string) =>
  (await app.query("SELECT status, principal_id, auth_method, auth_time, fido_verified_at FROM auth_requests WHERE id = $1", [ix]))[0]

describe("the chooser", () => {
  test("lists the resource server's methods on a page with the consent page's CSP; needs the interaction cookie", async () => {
    const browser = new Browser()
    const { login } = await start(browser, devA, clientA)
    const page = await browser.get(login)
    expect(page.status).toBe(200)
    expect(page.headers.get("content-security-policy")).toContain("default-src 'none'")
    expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
    expect(page.headers.get("x-frame-options")).toBe("DENY")
    const links = [...page.text.matchAll(/<a href="([^"]+)">([^<]+)<\/a>/g)].map((m) => [m[2], new URL(m[1]!.replace(/&amp;/g, "&")).pathname])
    expect(links).toEqual([
      ["Sign in with Example Corp", `/oauth/${devA.developerId}/login/sso`],
      ["Sign in with a passkey", `/oauth/${devA.developerId}/login/passkey`],
      ["Sign in with your account", `/oauth/${devA.developerId}/login/developer`]
    ])
    // another browser (no cookie, or another flow's): refused on every step
    const stranger = new Browser()
    for (const path of ["login", "login/sso", "login/passkey", "login/developer"]) {
      const res = await stranger.get(`${issuerOf(devA)}/${path}?ix=${new URL(login).searchParams.get("ix")}`)
      expect(res.status).toBe(403)
      expect(res.text).toContain("only in the browser that started it")
    }
    const options = await stranger.post(`${issuerOf(devA)}/login/passkey/options`, { ix: new URL(login).searchParams.get("ix") })
    expect(options.status).toBe(403)
  })

  test("an SSO enforce connection: only SSO is offered, straight to the provider", async () => {
    const browser = new Browser()
    const { login } = await start(browser, devB, clientB)
    const res = await browser.get(login)
    expect(res.status).toBe(303)
    expect(res.headers.get("location")!).toStartWith(`${idp.url}/auth?`)
    const { ix } = await start(browser, devB, clientB)
    expect((await browser.get(`${issuerOf(devB)}/login/passkey?ix=${ix}`)).status).toBe(404)
    expect((await browser.get(`${issuerOf(devB)}/login/developer?ix=${ix}`)).status).toBe(404)
  })
})

describe("SSO", () => {
  const browser = new Browser()
  let firstSessionCreated: Date

  test("the provider signs the person in (JIT): consent, code, an access token whose auth_time is the session's creation", async () => {
    const { login, ix, verifier } = await start(browser, devA, clientA, { login_hint: "alice@example.com" })
    const chooser = await browser.get(login)
    const ssoLink = /href="([^"]+login\/sso[^"]+)"/.exec(chooser.text)![1]!.replace(/&amp;/g, "&")
    const toProvider = await browser.get(ssoLink)
    expect(toProvider.status).toBe(303)
    expect(new URL(toProvider.headers.get("location")!).searchParams.get("login_hint")).toBe("alice@example.com")
    const back = await throughProvider(browser, toProvider.headers.get("location")!, "00u-alice")
    expect(back).toStartWith(`${issuerOf(devA)}/login/sso?ix=${ix}`)
    expect(browser.jar.has("__Host-aas_sso")).toBe(true)
    const signedIn = await browser.get(back)
    expect(signedIn.status).toBe(303)
    expect(signedIn.headers.get("location")).toBe(`${app.config.publicBaseUrl}/consent?req=${ix}`)
    const [session] = await app.query("SELECT id, principal_id, created_at FROM sso_sessions WHERE developer_id = $1", [devA.developerId])
    expect(session.principalId).toBe("alice@example.com")
    firstSessionCreated = session.createdAt
    expect(await requestRow(ix)).toMatchObject({ status: "pending", principalId: "alice@example.com", authMethod: "sso" })
    const redirect = await approve(browser, ix)
    const code = redirect.searchParams.get("code")!
    expect(redirect.searchParams.get("iss")).toBe(issuerOf(devA))
    const token = await postForm(app, `/oauth/${devA.developerId}/token`, {
      grant_type: "authorization_code", code, code_verifier: verifier, client_id: clientA.client_id, redirect_uri: REDIRECT
    })
    expect(token.status).toBe(200)
    const claims = jose.decodeJwt(token.body.access_token)
    expect(claims.sub).toBe("alice@example.com")
    expect(claims.auth_time).toBe(Math.floor(new Date(firstSessionCreated).getTime() / 1000))
    const [grant] = await app.query("SELECT auth_method, auth_time FROM grants WHERE id = $1", [claims.grnt])
    expect(grant.authMethod).toBe("sso")
    expect(new Date(grant.authTime).getTime()).toBe(new Date(firstSessionCreated).getTime())
  })

  test("a live session of this developer is reused: no provider round trip, the same auth_time", async () => {
    const { ix } = await start(browser, devA, clientA)
    const res = await browser.get(`${issuerOf(devA)}/login/sso?ix=${ix}&connection=${connA.id}`)
    expect(res.status).toBe(303)
    expect(res.headers.get("location")).toBe(`${app.config.publicBaseUrl}/consent?req=${ix}`)
    const row = await requestRow(ix)
    expect(row.authMethod).toBe("sso")
    expect(new Date(row.authTime).getTime()).toBe(new Date(firstSessionCreated).getTime())
  })

  test("another developer's session is not reused: that developer's provider login runs", async () => {
    const { login } = await start(browser, devB, clientB)
    const res = await browser.get(login)
    expect(res.status).toBe(303)
    expect(res.headers.get("location")!).toStartWith(`${idp.url}/auth?`)
  })

  test("a session that comes back without the session cookie is not signed in; a refused provider answer is access_denied", async () => {
    const other = new Browser()
    const { ix } = await start(other, devA, clientA)
    const done = await other.get(`${issuerOf(devA)}/login/sso?ix=${ix}&connection=${connA.id}&done=1`)
    expect(done.status).toBe(400)
    const refused = await other.get(`${issuerOf(devA)}/login/sso?ix=${ix}&connection=${connA.id}&error=access_denied`)
    expect(refused.status).toBe(303)
    const to = new URL(refused.headers.get("location")!)
    expect(to.origin + to.pathname).toBe(REDIRECT)
    expect(to.searchParams.get("error")).toBe("access_denied")
    expect(to.searchParams.get("state")).toBe("st")
    expect((await requestRow(ix)).status).toBe("denied")
  })

  test("fidoRequired: a passkey of the signed-in person follows SSO", async () => {
    const authenticator = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    const options = await app.request("POST", "/v1/webauthn/register/options", { apiKey: devA.apiKey, body: { principalId: "alice@example.com" } })
    expect((await app.request("POST", "/v1/webauthn/register/verify", {
      apiKey: devA.apiKey, body: { challengeId: options.body.challengeId, response: authenticator.register(options.body.publicKey) }
    })).status).toBe(201)
    await app.request("PATCH", "/v1/me", { apiKey: devA.apiKey, body: { fidoRequired: true } })
    try {
      const { ix } = await start(browser, devA, clientA)
      const res = await browser.get(`${issuerOf(devA)}/login/sso?ix=${ix}&connection=${connA.id}`)
      expect(res.headers.get("location")).toBe(`${issuerOf(devA)}/login/passkey?ix=${ix}`)
      expect((await requestRow(ix)).status).toBe("authenticating")
      // the chooser now leads to the passkey step, not to another sign-in
      expect((await browser.get(`${issuerOf(devA)}/login?ix=${ix}`)).headers.get("location")).toBe(`${issuerOf(devA)}/login/passkey?ix=${ix}`)
      const page = await browser.get(`${issuerOf(devA)}/login/passkey?ix=${ix}`)
      expect(page.status).toBe(200)
      expect(page.text).toContain("Confirm with your passkey")
      const asked = await browser.post(`${issuerOf(devA)}/login/passkey/options`, { ix })
      expect(asked.status).toBe(200)
      expect(asked.body.publicKey.allowCredentials.map((c: any) => c.id)).toEqual([authenticator.id])
      const verified = await browser.post(`${issuerOf(devA)}/login/passkey/verify`, {
        ix, challengeId: asked.body.challengeId, response: authenticator.assert(asked.body.publicKey)
      })
      expect(verified.status).toBe(200)
      expect(verified.body.location).toBe(`${app.config.publicBaseUrl}/consent?req=${ix}`)
      const row = await requestRow(ix)
      expect(row).toMatchObject({ status: "pending", authMethod: "sso" })
      expect(row.fidoVerifiedAt).not.toBeNull()
      // the consent page does not ask for a second passkey: its plain Approve makes a passkey-approved grant
      const consent = await browser.get(verified.body.location)
      expect(consent.status).toBe(200)
      expect(consent.text).toContain('id="approve"')
      expect(consent.text).not.toContain("passkey-approve")
      const redirect = await approve(browser, ix)
      expect(redirect.searchParams.get("code")).toBeTruthy()
      const [grant] = await app.query("SELECT approval_method, auth_method FROM grants WHERE id = (SELECT grant_id FROM auth_requests WHERE id = $1)", [ix])
      expect(grant).toEqual({ approvalMethod: "passkey", authMethod: "sso" })
    } finally {
      await app.request("PATCH", "/v1/me", { apiKey: devA.apiKey, body: { fidoRequired: false } })
    }
  })

  test("an inactive principal: access_denied back to the client", async () => {
    await app.query("UPDATE scim_users SET active = false WHERE developer_id = $1 AND principal_id = 'alice@example.com'", [devA.developerId])
    const { ix } = await start(browser, devA, clientA)
    const res = await browser.get(`${issuerOf(devA)}/login/sso?ix=${ix}&connection=${connA.id}`)
    expect(res.status).toBe(303)
    const to = new URL(res.headers.get("location")!)
    expect(to.origin + to.pathname).toBe(REDIRECT)
    expect(to.searchParams.get("error")).toBe("access_denied")
    expect(to.searchParams.get("iss")).toBe(issuerOf(devA))
    expect((await requestRow(ix)).status).toBe("denied")
  })
})

describe("resource server settings", () => {
  test("login.sso needs an active SSO connection", async () => {
    const bare = await app.signup({ plan: "enterprise" })
    const res = await app.request("POST", "/v1/resource-servers", {
      apiKey: bare.apiKey, body: { identifier: "http://127.0.0.1:9/bare", name: "Bare", scopes: [{ name: "a" }], login: { sso: true } }
    })
    expect(res.status).toBe(422)
    expect(res.body.code).toBe("SSO_NOT_CONFIGURED")
    const passkeyOnly = await registerServer(app, bare.apiKey, { identifier: "http://127.0.0.1:9/bare", login: { passkey: true } })
    expect(passkeyOnly.login).toEqual({ sso: false, passkey: true })
    const patched = await app.request("PATCH", `/v1/resource-servers/${passkeyOnly.resourceServerId}`, { apiKey: bare.apiKey, body: { login: { sso: true } } })
    expect(patched.status).toBe(422)
    expect(patched.body.code).toBe("SSO_NOT_CONFIGURED")
  })
})

describe("passkey", () => {
  const authenticator = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  let userHandle: string

  beforeAll(async () => {
    const options = await app.request("POST", "/v1/webauthn/register/options", { apiKey: devA.apiKey, body: { principalId: "pat" } })
    userHandle = options.body.publicKey.user.id
    const res = await app.request("POST", "/v1/webauthn/register/verify", {
      apiKey: devA.apiKey, body: { challengeId: options.body.challengeId, response: authenticator.register(options.body.publicKey) }
    })
    expect(res.status).toBe(201)
  })

  const withHandle = (assertion: any, handle: string | undefined) => ({ ...assertion, response: { ...assertion.response, userHandle: handle } })

  test("usernameless: empty allowCredentials, user verification required; the user handle names the principal", async () => {
    const browser = new Browser()
    const { ix, verifier } = await start(browser, devA, clientA)
    const page = await browser.get(`${issuerOf(devA)}/login/passkey?ix=${ix}`)
    expect(page.status).toBe(200)
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'")
    expect(page.text).toContain(`src="/oauth/${devA.developerId}/login/passkey.js"`)
    expect((await browser.get(`/oauth/${devA.developerId}/login/passkey.js`)).status).toBe(200)
    const asked = await browser.post(`${issuerOf(devA)}/login/passkey/options`, { ix })
    expect(asked.status).toBe(200)
    expect(asked.body.publicKey.allowCredentials).toEqual([])
    expect(asked.body.publicKey.userVerification).toBe("required")
    // no user handle: refused (nothing names the person)
    const bare = await browser.post(`${issuerOf(devA)}/login/passkey/verify`, { ix, challengeId: asked.body.challengeId, response: authenticator.assert(asked.body.publicKey) })
    expect(bare.status).toBe(403)
    expect(bare.body.error).toBe("verification_failed")
    const again = await browser.post(`${issuerOf(devA)}/login/passkey/options`, { ix })
    const verified = await browser.post(`${issuerOf(devA)}/login/passkey/verify`, {
      ix, challengeId: again.body.challengeId, response: withHandle(authenticator.assert(again.body.publicKey), userHandle)
    })
    expect(verified.status).toBe(200)
    expect(verified.body.location).toBe(`${app.config.publicBaseUrl}/consent?req=${ix}`)
    const row = await requestRow(ix)
    expect(row).toMatchObject({ status: "pending", principalId: "pat", authMethod: "passkey" })
    const redirect = await approve(browser, ix)
    const token = await postForm(app, `/oauth/${devA.developerId}/token`, {
      grant_type: "authorization_code", code: redirect.searchParams.get("code")!, code_verifier: verifier, client_id: clientA.client_id, redirect_uri: REDIRECT
    })
    const claims = jose.decodeJwt(token.body.access_token)
    expect(claims.sub).toBe("pat")
    expect(claims.auth_time).toBe(Math.floor(new Date(row.authTime).getTime() / 1000))
    const [grant] = await app.query("SELECT auth_method FROM grants WHERE id = $1", [claims.grnt])
    expect(grant.authMethod).toBe("passkey")
  })

  test("a wrong user handle and a counter that did not grow are refused", async () => {
    const browser = new Browser()
    const { ix } = await start(browser, devA, clientA)
    const a = await browser.post(`${issuerOf(devA)}/login/passkey/options`, { ix })
    const wrong = await browser.post(`${issuerOf(devA)}/login/passkey/verify`, {
      ix, challengeId: a.body.challengeId, response: withHandle(authenticator.assert(a.body.publicKey), Buffer.alloc(32, 7).toString("base64url"))
    })
    expect(wrong.status).toBe(403)
    expect(wrong.body.error).toBe("credential_not_allowed")
    const b = await browser.post(`${issuerOf(devA)}/login/passkey/options`, { ix })
    const replayed = await browser.post(`${issuerOf(devA)}/login/passkey/verify`, {
      ix, challengeId: b.body.challengeId, response: withHandle(authenticator.assert(b.body.publicKey, { counter: 1 }), userHandle)
    })
    expect(replayed.status).toBe(403)
    expect(replayed.body.error).toBe("verification_failed")
    expect(replayed.body.error_description).toContain("counter went backwards")
    const trace = await app.query("SELECT metadata FROM audit_log WHERE developer_id = $1 AND action = 'service.passkey.counter_regression'", [devA.developerId])
    expect(trace.map((t: any) => t.metadata.authRequestId)).toContain(ix)
    expect((await requestRow(ix)).status).toBe("authenticating")
  })

  test("fidoRequired: a passkey sign-in is the passkey (no second step), and a policy allow then approves without the consent page", async () => {
    await app.request("PATCH", "/v1/me", { apiKey: devA.apiKey, body: { fidoRequired: true } })
    const policy = await app.request("POST", "/v1/policies", { apiKey: devA.apiKey, body: { name: "reads are fine", effect: "allow", scopes: ["notes:read"] } })
    expect(policy.status).toBe(201)
    try {
      const browser = new Browser()
      const { ix } = await start(browser, devA, clientA)
      const asked = await browser.post(`${issuerOf(devA)}/login/passkey/options`, { ix })
      const verified = await browser.post(`${issuerOf(devA)}/login/passkey/verify`, {
        ix, challengeId: asked.body.challengeId, response: withHandle(authenticator.assert(asked.body.publicKey), userHandle)
      })
      expect(verified.status).toBe(200)
      const back = new URL(verified.body.location)
      expect(back.origin + back.pathname).toBe(REDIRECT)
      expect(back.searchParams.get("code")).toBeTruthy()
      const [grant] = await app.query("SELECT approval_method, auth_method, principal_id FROM grants WHERE id = (SELECT grant_id FROM auth_requests WHERE id = $1)", [ix])
      expect(grant).toEqual({ approvalMethod: "policy", authMethod: "passkey", principalId: "pat" })
    } finally {
      await app.request("DELETE", `/v1/policies/${policy.body.policyId ?? policy.body.id}`, { apiKey: devA.apiKey })
      await app.request("PATCH", "/v1/me", { apiKey: devA.apiKey, body: { fidoRequired: false } })
    }
  })
})
