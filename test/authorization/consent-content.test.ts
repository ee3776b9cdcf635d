/**
 * The consent page says who asks, for whom, what and until when (issue 33, item 5), escaped; it and
 * the permissions page cannot be framed, and their form posts from another site answer 403
 * (decisions §19, revised): by header over HTTP, and as real Chromium sends them from a page on
 * another site. Screenshots at 390 px and desktop width go to /tmp.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type Browser, chromium } from "playwright-core"
import { startTestApp, type TestApp } from "../support/app.ts"
import { issueGrant } from "../support/fixtures.ts"
import { freePort } from "../support/net.ts"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"]
const START = Date.parse("2026-11-22T10:00:00.000Z")
const HOSTILE_DEVELOPER = `Acme <img src=x onerror="alert(1)"> & Co`
const HOSTILE_AGENT = `Inbox "Butler" <script>alert(1)</script>`
const DESCRIPTION = "Sorts your mail into folders, drafts answers for you to check, and files receipts into your accounting mailbox every evening."

let app: TestApp
let origin: string
let browser: Browser
let dev: { apiKey: string; developerId: string }
let agentId: string
let otherSite: ReturnType<typeof Bun.serve>
/** the page another site serves: a form that posts to `action` with `fields` */
let attack: { action: string; fields: Record<string, string> } = { action: "", fields: {} }

beforeAll(async () => {
  const port = await freePort()
  origin = `http://localhost:${port}`
  app = await startTestApp({ testClock: true, startTime: START, env: { PORT: String(port), PUBLIC_BASE_URL: origin, RATE_LIMIT_SCALE: "100" } })
  dev = await app.signup({ name: HOSTILE_DEVELOPER, plan: "enterprise" })
  agentId = (await app.request("POST", "/v1/agents", {
    apiKey: dev.apiKey, body: { name: HOSTILE_AGENT, description: DESCRIPTION, scopes: ["email:read", "calendar:events:list", "vault:github:read"] }
  })).body.agentId
  // another site (127.0.0.1 is not localhost's site) whose page posts a form to ours
  otherSite = Bun.serve({
    port: 0, hostname: "127.0.0.1",
    fetch: () => new Response(`<!doctype html><form id="f" method="post" action="${attack.action}">${
      Object.entries(attack.fields).map(([k, v]) => `<input type="hidden" name="${k}" value="${v}">`).join("")
    }<button id="go">win a prize</button></form>`, { headers: { "content-type": "text/html" } })
  })
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
}, 120_000)
afterAll(async () => {
  await browser?.close()
  otherSite?.stop(true)
  await app?.stop()
})

const authorize = async (scopes = ["email:read", "calendar:events:list", "vault:github:read"]) => {
  const res = await app.request("POST", "/v1/authorize", {
    apiKey: dev.apiKey, body: { agentId, principalId: "Person <One> & Co", scopes, expiresIn: "30d" }
  })
  expect(res.status, res.text).toBe(201)
  return res.body as { authRequestId: string; consentUrl: string }
}

const form = (path: string, fields: Record<string, string>, headers: Record<string, string> = {}) =>
  app.request("POST", path, { rawBody: new URLSearchParams(fields).toString(), headers: { "content-type": "application/x-www-form-urlencoded", ...headers } })

describe("what the consent page says", () => {
  test("who asks, for whom, what (meaning or the scope itself) and until when, all escaped; not framable", async () => {
    const auth = await authorize()
    const res = await app.request("GET", `/consent?req=${auth.authRequestId}`)
    expect(res.status).toBe(200)
    expect(res.headers.get("x-frame-options")).toBe("DENY")
    expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
    expect(res.text).toContain(`<h1>Allow <span id="agent-name">Inbox &quot;Butler&quot; &lt;script&gt;alert(1)&lt;/script&gt;</span> to act for you?</h1>`)
    expect(res.text).toContain(`<p class="desc" id="agent-description">${DESCRIPTION}</p>`)
    expect(res.text).toContain(`<dd id="developer-name">Acme &lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; Co</dd>`)
    expect(res.text).toContain(`<dd id="for-whom">Person &lt;One&gt; &amp; Co</dd>`)
    expect(res.text).toContain(`<dd id="grant-until">22 Dec 2026, 10:00 UTC <span class="muted">(30 days after you approve)</span></dd>`)
    expect(res.text).toContain(`<li><strong>Read your Email data</strong><code>email:read</code></li>`)
    expect(res.text).toContain(`<li><strong class="raw">calendar:events:list</strong></li>`)
    expect(res.text).toContain(`<li><strong>Use the Github credentials you have stored</strong><code>vault:github:read</code></li>`)
    expect(res.text).toContain(`<p class="expiry" id="request-expiry">Answer before 22 Nov 2026, 10:10 UTC; after that the request expires.</p>`)
    expect(res.text).not.toContain("<script>alert")
    expect(res.text).not.toContain("<img src=x")
  })
})

describe("form posts from another site answer 403", () => {
  test("consent approve and deny: Origin of another site or Sec-Fetch-Site cross-site → 403, nothing answered; the page's own post works", async () => {
    const auth = await authorize()
    const cases: Array<Record<string, string>> = [
      { origin: "https://evil.example" },
      { "sec-fetch-site": "cross-site" },
      { "sec-fetch-site": "same-site", origin: "https://sub.localhost" },
      { origin: "null" }
    ]
    for (const headers of cases) {
      for (const path of ["/consent/approve", "/consent/deny"]) {
        const res = await form(path, { req: auth.authRequestId }, headers)
        expect(res.status).toBe(403)
        expect(res.text).toContain("This answer was sent from another site, so it was refused. Nothing was shared or changed. (FORBIDDEN)")
        expect(res.headers.get("x-frame-options")).toBe("DENY")
      }
    }
    expect((await app.query("SELECT status FROM auth_requests WHERE id = $1", [auth.authRequestId]))[0].status).toBe("pending")
    const own = await form("/consent/approve", { req: auth.authRequestId }, { origin, "sec-fetch-site": "same-origin" })
    expect(own.status).toBe(200)
    expect((await app.query("SELECT status FROM auth_requests WHERE id = $1", [auth.authRequestId]))[0].status).toBe("approved")
  })

  test("permissions page posts: another site → 403, the grant stays; the page itself is not framable", async () => {
    const { grant } = await issueGrant(app, { developerId: dev.developerId, agentId, principalId: "pat", scopes: ["email:read"] })
    const session = (await app.request("POST", "/v1/principal-sessions", { apiKey: dev.apiKey, body: { principalId: "pat" } })).body.sessionToken
    for (const path of ["/permissions/view", "/permissions/revoke", "/permissions/revoke/confirm"]) {
      const res = await form(path, { session, grantId: grant.id }, { origin: "https://evil.example", "sec-fetch-site": "cross-site" })
      expect(res.status).toBe(403)
      expect(res.text).toContain("This form was sent from another site, so it was refused. Nothing was changed. (FORBIDDEN)")
    }
    expect((await app.query("SELECT status FROM grants WHERE id = $1", [grant.id]))[0].status).toBe("active")
    const view = await form("/permissions/view", { session }, { origin, "sec-fetch-site": "same-origin" })
    expect(view.status).toBe(200)
    expect(view.headers.get("x-frame-options")).toBe("DENY")
    expect(view.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
    const page = await app.request("GET", "/permissions")
    expect(page.headers.get("x-frame-options")).toBe("DENY")
    expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
  })
})

describe("in Chromium", () => {
  test("a form on another site that posts the consent link's approval: 403, still pending", async () => {
    const auth = await authorize()
    attack = { action: `${origin}/consent/approve`, fields: { req: auth.authRequestId } }
    const page = await browser.newPage()
    await page.goto(`http://127.0.0.1:${otherSite.port}/`)
    const [response] = await Promise.all([page.waitForResponse(`${origin}/consent/approve`), page.click("#go")])
    expect(response.status()).toBe(403)
    expect(await response.request().headerValue("sec-fetch-site")).toBe("cross-site")
    expect((await app.query("SELECT status FROM auth_requests WHERE id = $1", [auth.authRequestId]))[0].status).toBe("pending")
    await page.close()
  })

  test("a form on another site that posts a permissions revocation: 403, the grant stays", async () => {
    const { grant } = await issueGrant(app, { developerId: dev.developerId, agentId, principalId: "pat", scopes: ["email:read"] })
    const session = (await app.request("POST", "/v1/principal-sessions", { apiKey: dev.apiKey, body: { principalId: "pat" } })).body.sessionToken
    attack = { action: `${origin}/permissions/revoke/confirm`, fields: { session, grantId: grant.id } }
    const page = await browser.newPage()
    await page.goto(`http://127.0.0.1:${otherSite.port}/`)
    const [response] = await Promise.all([page.waitForResponse(`${origin}/permissions/revoke/confirm`), page.click("#go")])
    expect(response.status()).toBe(403)
    expect((await app.query("SELECT status FROM grants WHERE id = $1", [grant.id]))[0].status).toBe("active")
    await page.close()
  })

  for (const [label, width, height] of [["390", 390, 844], ["desktop", 1280, 900]] as const) {
    test(`the page at ${label} px: no horizontal scroll, every fact visible, Approve within reach; screenshot /tmp/consent-${label}.png`, async () => {
      const auth = await authorize()
      const context = await browser.newContext({ viewport: { width, height } })
      const page = await context.newPage()
      await page.goto(auth.consentUrl)
      const layout = await page.evaluate(() => ({
        scrollWidth: document.documentElement.scrollWidth,
        innerWidth: window.innerWidth,
        main: document.querySelector("main")!.getBoundingClientRect().width,
        approve: document.getElementById("approve")!.getBoundingClientRect().height
      }))
      await page.screenshot({ path: `/tmp/consent-${label}.png`, fullPage: true })
      expect(layout.scrollWidth).toBeLessThanOrEqual(layout.innerWidth)
      expect(layout.main).toBeLessThanOrEqual(width)
      expect(layout.approve).toBeGreaterThanOrEqual(44)
      for (const id of ["agent-name", "agent-description", "developer-name", "for-whom", "grant-until", "scopes", "approve", "deny"]) {
        expect(await page.locator(`#${id}`).isVisible()).toBe(true)
      }
      await context.close()
    })
  }
})
