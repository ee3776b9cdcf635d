/**
 * The SAML browser path in real Chromium (decisions §12): with an enforce SAML connection, the
 * consent page sends the browser to the samlify IdP, whose auto-submitting form posts the Response
 * to our ACS (a cross-site form post), which sets the session cookie and sends the browser back to
 * the consent page; Approve lands on the app with a code, and the grant records approvalMethod sso.
 * Signed in as another person, the consent page refuses (403 PRINCIPAL_MISMATCH).
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { type Browser, chromium } from "playwright-core"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { freePort } from "../support/net.ts"
import { type SamlIdp, startSamlIdp } from "../support/saml-idp.ts"
import { type SamlConnection, samlConnection } from "./saml-support.ts"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"]

let app: TestApp
let idp: SamlIdp
let browser: Browser
let appServer: ReturnType<typeof Bun.serve>
let callback: string
let c: SamlConnection
let agentId: string

beforeAll(async () => {
  const port = await freePort()
  // localhost: a secure context for Chromium, so the Secure __Host- cookie is kept over http
  const origin = `http://localhost:${port}`
  app = await startTestApp({ env: { PORT: String(port), PUBLIC_BASE_URL: origin, SSO_ALLOW_PRIVATE_HOSTS: "true", RATE_LIMIT_SCALE: "10" } })
  idp = await startSamlIdp()
  appServer = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("<!doctype html><title>back in the app</title>", { headers: { "content-type": "text/html" } }) })
  callback = `http://127.0.0.1:${appServer.port}/callback`
  c = await samlConnection(app, idp, { extra: { enforce: true } })
  agentId = await createAgent(app, c.developerId, ["email:read", "calendar:read"])
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
}, 120_000)
afterAll(async () => {
  await browser?.close()
  appServer?.stop(true)
  await idp?.stop()
  await app?.stop()
})

const authorize = async () => {
  const res = await app.request("POST", "/v1/authorize", {
    apiKey: c.apiKey, body: { agentId, principalId: "ann@example.com", scopes: ["email:read"], redirectUri: callback, state: "st-7" }
  })
  expect(res.status, res.text).toBe(201)
  return res.body as { authRequestId: string; consentUrl: string }
}

test("consent page → IdP → form post to the ACS → consent page signed in → Approve → the app, approved through SSO", async () => {
  idp.login = { user: { nameId: "00u-ann", email: "ann@example.com", groups: ["engineering"] } }
  const auth = await authorize()
  const context = await browser.newContext()
  const page = await context.newPage()
  const posted: Array<string> = []
  page.on("request", (r) => r.method() === "POST" && posted.push(`${r.method()} ${new URL(r.url()).pathname} ${r.headers()["content-type"]}`))
  await page.goto(auth.consentUrl)
  // back from the IdP's auto-submitted form on the consent page, signed in
  await page.waitForURL((url) => url.pathname === "/consent" && url.searchParams.get("req") === auth.authRequestId)
  expect(posted).toEqual([`POST /sso/saml/acs/${c.id} application/x-www-form-urlencoded`])
  expect(await page.content()).toContain("Signed in as ann@example.com through your organisation.")
  const cookies = await context.cookies()
  // the session (Lax), and the sign-in's pre-login cookie: SameSite=None, as the IdP's cross-site form post must carry it to the ACS
  expect(cookies.map((k) => [k.name.replace(/^(__Host-aas_login_).+$/, "$1…"), k.httpOnly, k.secure, k.sameSite]).sort()).toEqual([
    ["__Host-aas_login_…", true, true, "None"],
    ["__Host-aas_sso", true, true, "Lax"]
  ])
  await Promise.all([page.waitForURL(/\/callback\?/), page.click("#approve")])
  const landed = new URL(page.url())
  expect(landed.searchParams.get("state")).toBe("st-7")
  expect(landed.searchParams.get("code")!.length).toBeGreaterThan(20)
  const [grant] = await app.query("SELECT g.approval_method FROM auth_requests r JOIN grants g ON g.id = r.grant_id WHERE r.id = $1", [auth.authRequestId])
  expect(grant.approvalMethod).toBe("sso")
  await context.close()
})

test("signed in at the IdP as someone else: the consent page refuses, 403 PRINCIPAL_MISMATCH", async () => {
  idp.login = { user: { nameId: "00u-bob", email: "bob@example.com", groups: ["engineering"] } }
  const auth = await authorize()
  const context = await browser.newContext()
  const page = await context.newPage()
  const statuses: Array<number> = []
  page.on("response", (r) => new URL(r.url()).pathname === "/consent" && statuses.push(r.status()))
  await page.goto(auth.consentUrl)
  await page.waitForURL((url) => url.pathname === "/consent" && statuses.at(-1) === 403)
  expect(await page.content()).toContain("PRINCIPAL_MISMATCH")
  expect((await app.query("SELECT status FROM auth_requests WHERE id = $1", [auth.authRequestId]))[0].status).toBe("pending")
  await context.close()
})
