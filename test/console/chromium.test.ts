/**
 * The developer console in real Chromium (decisions §23), at desktop and phone (390 px) widths: sign in
 * with an API key, create an agent, start a consent request and approve it (in a second page, on the
 * consent page, at desktop; in the console at phone width), see the grant and its webhook delivery,
 * revoke it, verify the audit chain, run a policy dry run and see a Cedar set's errors. Every page is
 * checked with axe-core (no serious or critical violation), reached by keyboard, and photographed to
 * CONSOLE_SHOTS (default a temp dir).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdirSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"
import { startTestApp, type TestApp } from "../support/app.ts"
import { freePort } from "../support/net.ts"
import { startReceiver } from "../webhooks/support.ts"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"]
const SHOTS = process.env.CONSOLE_SHOTS ?? join(tmpdir(), "console-shots")
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8")
const PAGES = ["overview", "agents", "consent", "audit", "webhooks", "policies", "anomalies", "keys", "directory", "sso", "vault", "breaches", "compliance", "billing", "dpdp"]

let app: TestApp
let origin: string
let browser: Browser
const receiver = startReceiver()

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true })
  const port = await freePort()
  origin = `http://localhost:${port}`
  app = await startTestApp({ workers: true, env: { PORT: String(port), PUBLIC_BASE_URL: origin, RATE_LIMIT_SCALE: "100", WEBHOOK_POLL_INTERVAL_SECONDS: "1" } })
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
}, 120_000)
afterAll(async () => {
  await browser?.close()
  await app?.stop()
  receiver.stop()
})

/** axe-core in the page (evaluated through the debugging protocol, so the page's CSP stays as served) */
const axe = async (page: Page) => {
  const result = await page.evaluate(`${AXE}\n;axe.run(document, { resultTypes: ["violations"] }).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(" ")).slice(0, 3) })))`) as Array<{ id: string; impact: string; nodes: Array<string> }>
  return result.filter((v) => v.impact === "serious" || v.impact === "critical")
}

/** polls an expression in the page (page.evaluate: waitForFunction's string eval is refused by the page's CSP) */
const pageUntil = async (page: Page, expression: string, ms = 10_000) => {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await page.evaluate(expression).catch(() => false)) return true
    await Bun.sleep(50)
  }
  return false
}

const submit = (page: Page, selector: string) => Promise.all([page.waitForLoadState("load"), page.waitForNavigation(), page.locator(selector).click()])

const WIDTHS = [
  { name: "desktop", viewport: { width: 1280, height: 900 } },
  { name: "phone", viewport: { width: 390, height: 844 } }
] as const

describe("console in Chromium", () => {
  for (const { name, viewport } of WIDTHS) {
    test(`${name}: sign in, create an agent, approve consent, see grant and delivery, revoke, verify the chain, dry-run a policy; axe clean`, async () => {
      const dev = await app.signup({ plan: "pro" })
      await app.request("POST", "/v1/webhooks", { apiKey: dev.apiKey, body: { url: receiver.url, events: ["grant.created", "grant.revoked"] } })
      const context = await browser.newContext({ viewport, isMobile: name === "phone", hasTouch: name === "phone" })
      const page = await context.newPage()
      const errors: Array<string> = []
      page.on("console", (m) => m.type() === "error" && errors.push(m.text()))
      page.on("pageerror", (e) => errors.push(String(e)))
      const violations: Record<string, unknown> = {}
      const check = async (label: string) => {
        const found = await axe(page)
        if (found.length > 0) violations[label] = found
        // nothing overflows the window's width but the scrollable tables
        const overflow = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        if ((overflow as number) > 1) violations[`${label} (wider than the window by ${overflow} px)`] = true
        await page.screenshot({ path: join(SHOTS, `${name}-${label}.png`), fullPage: true })
      }

      // sign in, by keyboard: the key field has focus order before the button
      await page.goto(`${origin}/console`)
      await check("sign-in")
      await page.locator("#apiKey").fill(dev.apiKey)
      await Promise.all([page.waitForURL(`${origin}/console/overview`), page.keyboard.press("Enter")])
      expect(await page.locator("h1").textContent()).toBe("Overview")
      const cookies = await context.cookies()
      const session = cookies.find((c) => c.name === "__Host-console")!
      expect([session.httpOnly, session.secure, session.sameSite]).toEqual([true, true, "Strict"])
      await check("overview")

      // create an agent
      await page.goto(`${origin}/console/agents`)
      await page.getByLabel("Name").fill("Inbox helper")
      await page.getByLabel("Scopes").fill("email:read, calendar:read")
      await page.getByLabel("Redirect URIs", { exact: false }).first().fill("https://app.example/callback")
      await submit(page, "button:has-text('Create agent')")
      expect(await page.locator("[role=status]").textContent()).toContain("Agent Inbox helper created")
      const agentId = (await app.request("GET", "/v1/agents", { apiKey: dev.apiKey })).body.agents[0].agentId as string
      expect(await page.locator("table").textContent()).toContain(agentId)
      await check("agents")

      // a consent request for a person
      await page.goto(`${origin}/console/consent`)
      await page.getByLabel("Agent", { exact: true }).selectOption(agentId)
      await page.getByLabel("Principal (your id for the person)").fill("person-7")
      await page.getByLabel("Scopes").fill("email:read")
      await submit(page, "button:has-text('Start consent request')")
      expect(await page.locator("[role=status]").textContent()).toContain("Consent request")
      if (name === "desktop") {
        // the person approves on the consent page, in a second page; the console's grants appear live (no reload)
        const consentUrl = await page.locator("[role=status] a").first().getAttribute("href")
        const loadedAt = await page.evaluate("performance.timeOrigin")
        expect(await pageUntil(page, `document.getElementById("live-status").textContent.startsWith("Live")`)).toBe(true)
        const second = await context.newPage()
        await second.goto(consentUrl!)
        await Promise.all([second.waitForLoadState("load"), second.waitForNavigation(), second.click("#approve")])
        await second.close()
        expect(await pageUntil(page, `document.querySelector('[data-live-id="grants"]').textContent.includes("person-7")`)).toBe(true)
        expect(await page.evaluate("performance.timeOrigin")).toBe(loadedAt)
      } else {
        await submit(page, "[role=status] button:has-text('Approve')")
        expect(await page.locator("[role=status]").textContent()).toContain("approved")
      }
      const grantsTable = page.locator("table").last()
      expect(await grantsTable.textContent()).toContain("person-7")
      expect(await grantsTable.textContent()).toContain("active")
      await check("consent")

      // its webhook delivery (the worker sends it; the page shows it with its body)
      const webhook = (await app.request("GET", "/v1/webhooks", { apiKey: dev.apiKey })).body.webhooks[0].id as string
      let delivered = false
      for (let i = 0; i < 100 && !delivered; i++) {
        const d = await app.request("GET", `/v1/webhooks/${webhook}/deliveries?status=delivered`, { apiKey: dev.apiKey })
        delivered = d.body.deliveries.length > 0
        if (!delivered) await Bun.sleep(100)
      }
      expect(delivered).toBe(true)
      await page.goto(`${origin}/console/webhooks?webhook=${webhook}`)
      expect(await page.locator("table").last().textContent()).toContain("delivered")
      await Promise.all([page.waitForNavigation(), page.locator("a:has-text('grant.created')").first().click()])
      expect(await page.locator("pre").first().textContent()).toContain('"principalId": "person-7"')
      await check("webhooks")
      if (name === "desktop") {
        // a revocation made elsewhere: its delivery appears on this page live
        const grantId = (await app.request("GET", "/v1/grants", { apiKey: dev.apiKey })).body.grants[0].grantId
        expect(await pageUntil(page, `document.getElementById("live-status").textContent.startsWith("Live")`)).toBe(true)
        expect((await app.request("DELETE", `/v1/grants/${grantId}`, { apiKey: dev.apiKey })).status).toBe(204)
        expect(await pageUntil(page, `document.querySelector('[data-live-id="deliveries"]').textContent.includes("grant.revoked")`)).toBe(true)
        await page.screenshot({ path: join(SHOTS, `${name}-webhooks-live.png`), fullPage: true })
      }

      // revoke it (at desktop width it was revoked by the API above, live)
      if (name === "phone") {
        await page.goto(`${origin}/console/consent`)
        await submit(page, "button:has-text('Revoke')")
        expect(await page.locator("[role=status]").textContent()).toContain("revoked")
      }
      expect((await app.request("GET", "/v1/grants?status=active", { apiKey: dev.apiKey })).body.grants).toEqual([])

      // verify the audit chain in one click
      await page.goto(`${origin}/console/audit`)
      await submit(page, "button:has-text('Verify the chain')")
      expect(await page.locator("[role=status]").first().textContent()).toContain("Chain intact")
      await check("audit")

      // a policy dry run, then a Cedar set the engine refuses, its error shown
      await page.goto(`${origin}/console/policies`)
      await page.getByLabel("Agent id").first().fill(agentId)
      await page.getByLabel("Principal").first().fill("person-7")
      await page.getByLabel("Scopes").first().fill("email:read")
      await submit(page, "button:has-text('Evaluate')")
      expect(await page.locator("[role=status]").first().textContent()).toContain("Decision: no opinion")
      expect(await page.getByLabel("Agent id").first().inputValue()).toBe(agentId) // the form keeps what was asked
      await page.getByLabel("Version label").fill("v1")
      await page.getByLabel("Cedar policies").fill("forbid(principal, action, resource) when { context.scopes.contains(")
      await submit(page, "button:has-text('Upload and activate')")
      expect(await page.locator("[role=status]").first().textContent()).toContain("POLICY_INVALID")
      await check("policies")

      // every other page: axe, screenshot, and the skip link is the first stop of the keyboard
      for (const p of PAGES.filter((p) => !["overview", "agents", "consent", "webhooks", "audit", "policies"].includes(p))) {
        await page.goto(`${origin}/console/${p}`)
        expect(await page.locator("h1").count()).toBe(1)
        await check(p)
      }
      await page.keyboard.press("Tab")
      expect(await page.evaluate("document.activeElement.textContent")).toBe("Skip to content")
      // nothing overflows the phone's width but the scrollable tables
      expect(await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")).toBe(true)
      expect(violations).toEqual({})
      expect(errors).toEqual([])
      await context.close()
    }, 120_000)
  }
})
