/**
 * The whole browser path in real Chromium (decisions §12): consent page → identity provider
 * (oidc-provider's own login form) → our callback (303 with the __Host- session cookie) → the
 * consent page again → Approve → the agent's redirect with a code whose grant is the principal's,
 * approved through SSO. Signed in as someone else, the page answers 403 PRINCIPAL_MISMATCH.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type Browser, chromium } from "playwright-core"
import type { TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { type Idp, startIdp } from "../support/oidc-idp.ts"
import { createConnection, oidcConnection, preLoginCookie, startSsoApp } from "./helpers.ts"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"]

let app: TestApp
let base: string
let idp: Idp
let browser: Browser
let dev: { apiKey: string; developerId: string }
let agentId: string
let agentApp: ReturnType<typeof Bun.serve>
let callback: string

beforeAll(async () => {
  // localhost: a secure context for Chromium, so the Secure __Host- cookie is kept over http
  const started = await startSsoApp({ host: "localhost", env: { RATE_LIMIT_SCALE: "100" } })
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
  await createConnection(app, dev.apiKey, oidcConnection(idp, { enforce: true, domains: ["example.com"], groupsClaim: "groups", groupMappings: { engineering: ["email:read"] } }))
  agentId = await createAgent(app, dev.developerId, ["email:read", "files:write"], "Inbox Butler")
  agentApp = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("<!doctype html><title>back in the app</title><p>done</p>", { headers: { "content-type": "text/html" } }) })
  callback = `http://127.0.0.1:${agentApp.port}/callback`
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
}, 120_000)
afterAll(async () => {
  await browser?.close()
  agentApp?.stop(true)
  await idp?.stop()
  await app?.stop()
})

const authorize = async () =>
  (await app.request("POST", "/v1/authorize", {
    apiKey: dev.apiKey,
    body: { agentId, principalId: "alice@example.com", scopes: ["email:read", "files:write"], redirectUri: callback, state: "st-7" }
  })).body as { authRequestId: string; consentUrl: string }

/** at the provider's login form, as `sub` */
const signIn = async (page: import("playwright-core").Page, sub: string) => {
  await page.waitForURL(new RegExp(`^${idp.url}/interaction/`))
  await page.fill("input[name=login]", sub)
  await page.fill("input[name=password]", "any")
  await Promise.all([page.waitForURL(new RegExp(`^${base}/consent\\?req=`)), page.click("button[type=submit]")])
}

describe("SSO at consent in Chromium", () => {
  test("consent page → provider → callback → consent approved as the right principal", async () => {
    const auth = await authorize()
    const context = await browser.newContext()
    const page = await context.newPage()
    const ours: Array<string> = []
    page.on("console", (m) => m.type() === "error" && page.url().startsWith(base) && ours.push(m.text()))
    await page.goto(auth.consentUrl)
    await signIn(page, "00u-alice")
    const cookies = await context.cookies(base)
    // the session, and the pre-login cookie of the sign-in (login CSRF binding; it lapses after 10 minutes)
    expect(cookies.map((c) => ({ name: c.name.replace(/^(__Host-aas_login_).+$/, "$1…"), httpOnly: c.httpOnly, secure: c.secure, sameSite: c.sameSite })).sort((a, b) => a.name.localeCompare(b.name))).toEqual([
      { name: "__Host-aas_login_…", httpOnly: true, secure: true, sameSite: "Lax" },
      { name: "__Host-aas_sso", httpOnly: true, secure: true, sameSite: "Lax" }
    ])
    expect(await page.locator("#sso-notice").textContent()).toContain("Signed in as alice@example.com")
    expect(await page.locator("#scopes li code").allTextContents()).toEqual(["email:read"])
    await Promise.all([page.waitForURL(/\/callback\?/), page.click("#approve")])
    const landed = new URL(page.url())
    expect(landed.searchParams.get("state")).toBe("st-7")
    const token = await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code: landed.searchParams.get("code"), agentId } })
    expect(token.status).toBe(201)
    expect(token.body.scopes).toEqual(["email:read"])
    const [grant] = await app.query("SELECT principal_id, approval_method FROM grants WHERE id = $1", [token.body.grantId])
    expect(grant).toEqual({ principalId: "alice@example.com", approvalMethod: "sso" })
    expect(ours).toEqual([])
    await context.close()
  }, 120_000)

  test("signed in as another principal: 403 PRINCIPAL_MISMATCH, nothing granted", async () => {
    const auth = await authorize()
    const context = await browser.newContext()
    const page = await context.newPage()
    await page.goto(auth.consentUrl)
    await page.waitForURL(new RegExp(`^${idp.url}/interaction/`))
    await page.fill("input[name=login]", "00u-bob")
    await page.fill("input[name=password]", "any")
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().startsWith(`${base}/consent?req=`)),
      page.click("button[type=submit]")
    ])
    expect(response.status()).toBe(403)
    expect(await page.locator("#message").textContent()).toContain("PRINCIPAL_MISMATCH")
    expect(await page.locator("#approve").count()).toBe(0)
    const [request] = await app.query("SELECT status FROM auth_requests WHERE id = $1", [auth.authRequestId])
    expect(request.status).toBe("pending")
    await context.close()
  }, 120_000)

  test("login CSRF: an attacker's finished sign-in opened in the victim's browser plants no session", async () => {
    // the attacker signs in as themselves up to the provider's answer, and keeps the callback URL
    const begun = await app.request("GET", `/sso/login?org=${dev.developerId}`)
    expect(begun.status).toBe(200)
    const back = await idp.login(begun.body.authorizeUrl, "00u-bob")
    const before = await app.query("SELECT count(*)::int AS n FROM sso_sessions")
    // the victim's browser is made to open it (a link, an image, a redirect)
    const context = await browser.newContext()
    const page = await context.newPage()
    const response = await page.goto(back.href)
    expect(response!.status()).toBe(401)
    expect(await page.locator("#message").textContent()).toBe("Your organisation's sign-in was refused.")
    expect(await context.cookies(base)).toEqual([])
    expect(await app.query("SELECT count(*)::int AS n FROM sso_sessions")).toEqual(before)
    // the state was used up: the attacker cannot replay it either
    const again = await app.request("GET", back.pathname + back.search, { headers: { cookie: preLoginCookie(begun.headers)! } })
    expect(again.status).toBe(400)
    await context.close()
  }, 120_000)
})
