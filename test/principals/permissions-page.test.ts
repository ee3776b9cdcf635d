/**
 * The permissions page in real Chromium (decisions §12): a person opens the dashboard link, sees every
 * agent acting for them (name, DID, scopes in words, since when and how, until when, delegated
 * children, their passkeys), revokes one through the confirmation step, and the grant then fails
 * POST /v1/tokens/verify. Also without JavaScript, on a phone-sized window, and the Signal API call.
 * Screenshots for a person to look at go to .scratch/screenshots/ (gitignored).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdirSync } from "node:fs"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"
import { startTestApp, type TestApp } from "../support/app.ts"
import { freePort } from "../support/net.ts"
import { addVirtualAuthenticator, registerPasskey } from "../support/passkeys.ts"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"]
const SHOTS = ".scratch/screenshots"

let app: TestApp
let origin: string
let browser: Browser
let dev: { apiKey: string; developerId: string }
let butler: string
let summariser: string
let planner: string

const agent = async (name: string, scopes: Array<string>) =>
  (await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name, scopes } })).body.agentId as string

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true })
  const port = await freePort()
  origin = `http://localhost:${port}`
  app = await startTestApp({ env: { PORT: String(port), PUBLIC_BASE_URL: origin, WEBAUTHN_ORIGIN: origin, WEBAUTHN_RP_ID: "localhost", RATE_LIMIT_SCALE: "100" } })
  dev = await app.signup({ plan: "enterprise" })
  butler = await agent("Inbox Butler", ["email:read", "email:write", "calendar:read"])
  summariser = await agent("Summariser", ["email:read"])
  planner = await agent("Trip Planner", ["calendar:write", "vault:airline:read"])
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
}, 120_000)
afterAll(async () => {
  await browser?.close()
  await app?.stop()
})

/** authorize, approve on the consent JSON, exchange: a grant approved on the consent page */
const consentGrant = async (principalId: string, agentId: string, scopes: Array<string>) => {
  const authz = await app.request("POST", "/v1/authorize", { apiKey: dev.apiKey, body: { agentId, principalId, scopes, expiresIn: "30d" } })
  const approve = await app.request("POST", `/v1/consent/${authz.body.authRequestId}/approve`)
  const token = await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code: approve.body.code, agentId } })
  expect(token.status).toBe(201)
  return token.body as { grantId: string; grantToken: string }
}

const delegate = async (parentGrantToken: string, subAgentId: string, scopes: Array<string>) => {
  const res = await app.request("POST", "/v1/grants/delegate", { apiKey: dev.apiKey, body: { parentGrantToken, subAgentId, scopes } })
  expect(res.status).toBe(201)
  return res.body as { grantId: string; grantToken: string }
}

const verify = async (token: string) => (await app.request("POST", "/v1/tokens/verify", { apiKey: dev.apiKey, body: { token } })).body.valid

/** a tab with a virtual platform authenticator (DevTools WebAuthn domain) and a spy on the Signal API */
const openTab = async (options: { javaScript?: boolean; width?: number } = {}) => {
  const context = await browser.newContext({
    javaScriptEnabled: options.javaScript ?? true,
    viewport: { width: options.width ?? 1100, height: 900 },
    ...(options.width !== undefined && options.width < 500 ? { isMobile: true, hasTouch: true, deviceScaleFactor: 2 } : {})
  })
  const page = await context.newPage()
  const { cdp, authenticatorId } = await addVirtualAuthenticator(context, page)
  await page.addInitScript(() => {
    const w = window as any
    w.__signals = []
    const PKC = w.PublicKeyCredential
    if (!PKC) return
    for (const name of ["signalAllAcceptedCredentials", "signalCurrentUserDetails", "signalUnknownCredential"]) {
      const original = PKC[name]
      PKC[name] = (arg: unknown) => {
        w.__signals.push({ name, arg })
        return original ? original.call(PKC, arg) : Promise.resolve()
      }
    }
  })
  const requests: Array<string> = []
  const consoleErrors: Array<string> = []
  page.on("request", (r) => requests.push(r.url()))
  page.on("console", (m) => m.type() === "error" && consoleErrors.push(m.text()))
  return { context, page, cdp, authenticatorId, requests, consoleErrors }
}

/** registers a passkey in the page and approves a pending request with it: a grant approved with a passkey */
const passkeyGrant = async (page: Page, principalId: string, agentId: string, scopes: Array<string>) => {
  await page.goto(`${origin}/health`)
  const registered = (await registerPasskey(app, page, dev.apiKey, principalId, "Work laptop")).verified
  expect(registered.status).toBe(201)
  const authz = await app.request("POST", "/v1/authorize", { apiKey: dev.apiKey, body: { agentId, principalId, scopes, expiresIn: "7d" } })
  const assertOptions = await app.request("POST", "/v1/webauthn/assert/options", { apiKey: dev.apiKey, body: { authRequestId: authz.body.authRequestId } })
  const assertion = await page.evaluate(async (json) => {
    const credential = await navigator.credentials.get({ publicKey: (PublicKeyCredential as any).parseRequestOptionsFromJSON(json) }) as any
    return credential.toJSON()
  }, assertOptions.body.publicKey)
  const approved = await app.request("POST", "/v1/webauthn/assert/verify", { apiKey: dev.apiKey, body: { challengeId: assertOptions.body.challengeId, response: assertion } })
  expect(approved.status).toBe(200)
  const token = await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code: approved.body.code, agentId } })
  return { credential: registered.body, grant: token.body as { grantId: string; grantToken: string } }
}

const dashboard = async (principalId: string) =>
  (await app.request("POST", "/v1/principal-sessions", { apiKey: dev.apiKey, body: { principalId } })).body as { sessionToken: string; dashboardUrl: string }

const grantCard = (page: Page, grantId: string) => page.locator(`[data-grant="${grantId}"]`).first()

describe("the permissions page in Chromium", () => {
  test("a person sees every agent acting for them, on a desktop and on a 390 px phone; the Signal API is told their passkeys", async () => {
    const tab = await openTab()
    try {
      const mail = await consentGrant("person-1", butler, ["email:read", "calendar:read"])
      const child = await delegate(mail.grantToken, summariser, ["email:read"])
      const { credential, grant: trip } = await passkeyGrant(tab.page, "person-1", planner, ["calendar:write", "vault:airline:read"])
      await consentGrant("person-2", butler, ["email:write"]) // someone else's: never shown
      const { dashboardUrl, sessionToken } = await dashboard("person-1")
      tab.requests.length = 0

      const response = await tab.page.goto(dashboardUrl)
      const csp = response!.headers()["content-security-policy"]!
      expect(csp).toContain("default-src 'none'")
      expect(csp).toMatch(/style-src 'nonce-[A-Za-z0-9+/=]+'/)
      expect(csp).toContain("script-src 'self'")
      expect(csp).toContain("form-action 'self'")
      expect(csp).toContain("frame-ancestors 'none'")
      await tab.page.waitForURL(`${origin}/permissions/view`)
      await tab.page.waitForSelector(".grant")
      // the token left the address bar (and never reached the server in a URL)
      expect(tab.page.url()).not.toContain(sessionToken)
      expect(tab.requests.every((u) => u.startsWith(origin))).toBe(true)
      expect(tab.requests.some((u) => u.includes(sessionToken))).toBe(false)

      const names = await tab.page.locator(".agent-name").allTextContents()
      expect(names.sort()).toEqual(["Inbox Butler", "Summariser", "Trip Planner"])
      const mailCard = grantCard(tab.page, mail.grantId)
      expect(await mailCard.locator(".did").first().textContent()).toBe(`did:service:${butler}`)
      expect(await mailCard.locator(".scopes").first().locator("li").allTextContents()).toEqual([
        "Read your Email dataemail:read",
        "Read your Calendar datacalendar:read"
      ])
      expect(await mailCard.locator(".granted").first().textContent()).toContain("approved by you on the consent page")
      expect(await mailCard.locator(".expires").first().textContent()).toMatch(/^Until \d{1,2} \w{3} \d{4}, \d\d:\d\d UTC$/)
      // the delegated child sits inside its parent's card
      const childCard = mailCard.locator(`[data-grant="${child.grantId}"]`)
      expect(await childCard.locator(".agent-name").textContent()).toBe("Summariser")
      expect(await childCard.locator(".granted").textContent()).toContain("delegated by Inbox Butler")
      const tripCard = grantCard(tab.page, trip.grantId)
      expect(await tripCard.locator(".granted").first().textContent()).toContain("approved by you with a passkey")
      expect(await tripCard.locator(".scopes li").allTextContents()).toContain("Use the Airline credentials you have storedvault:airline:read")
      // the passkey, by name, with the provider from its AAGUID
      expect(await tab.page.locator(".passkey strong").allTextContents()).toEqual(["Work laptop"])
      expect(await tab.page.locator(".passkey .meta").textContent()).toContain(credential.providerName ?? "Unknown provider")

      // the Signal API: every accepted credential of this user handle, and the user's details
      const signals = await tab.page.evaluate(() => (window as any).__signals)
      const signal = await app.request("GET", "/v1/webauthn/signal?principalId=person-1", { apiKey: dev.apiKey })
      expect(signals).toEqual([
        { name: "signalAllAcceptedCredentials", arg: { rpId: "localhost", userId: signal.body.userId, allAcceptedCredentialIds: [credential.credentialId] } },
        { name: "signalCurrentUserDetails", arg: { rpId: "localhost", userId: signal.body.userId, name: "person-1", displayName: "person-1" } }
      ])
      expect(tab.consoleErrors).toEqual([])
      await tab.page.screenshot({ path: `${SHOTS}/permissions-desktop.png`, fullPage: true })

      // the same page on a phone: nothing wider than the screen
      const phone = await openTab({ width: 390 })
      try {
        await phone.page.goto(dashboardUrl)
        await phone.page.waitForSelector(".grant")
        const widths = await phone.page.evaluate(() => ({ doc: document.documentElement.scrollWidth, view: window.innerWidth }))
        expect(widths.view).toBe(390)
        expect(widths.doc).toBeLessThanOrEqual(390)
        const button = await phone.page.locator(`[data-grant="${mail.grantId}"] button`).first().boundingBox()
        expect(button!.height).toBeGreaterThanOrEqual(44) // a finger-sized target
        expect(button!.x + button!.width).toBeLessThanOrEqual(390)
        await phone.page.screenshot({ path: `${SHOTS}/permissions-390px.png`, fullPage: true })
      } finally {
        await phone.context.close()
      }
    } finally {
      await tab.context.close()
    }
  }, 120_000)

  test("revoke clicked through (confirmation, cascade named), then the grant fails POST /v1/tokens/verify; Cancel keeps it", async () => {
    const tab = await openTab()
    try {
      const mail = await consentGrant("person-3", butler, ["email:read"])
      const child = await delegate(mail.grantToken, summariser, ["email:read"])
      const trip = await consentGrant("person-3", planner, ["calendar:write"])
      const { dashboardUrl, sessionToken } = await dashboard("person-3")
      await tab.page.goto(dashboardUrl)
      await tab.page.waitForSelector(".grant")

      // Cancel: nothing happens
      await Promise.all([tab.page.waitForURL(`${origin}/permissions/revoke`), grantCard(tab.page, trip.grantId).locator("button").first().click()])
      await Promise.all([tab.page.waitForURL(`${origin}/permissions/view`), tab.page.click("#cancel")])
      expect(await verify(trip.grantToken)).toBe(true)

      await Promise.all([tab.page.waitForURL(`${origin}/permissions/revoke`), grantCard(tab.page, mail.grantId).locator("button").first().click()])
      expect(await tab.page.locator("h1").textContent()).toBe("Revoke access for Inbox Butler?")
      expect(await tab.page.locator("#cascade").textContent()).toContain("Summariser")
      await tab.page.screenshot({ path: `${SHOTS}/permissions-confirm.png`, fullPage: true })
      // before the confirmation nothing is revoked
      expect(await verify(mail.grantToken)).toBe(true)
      await Promise.all([tab.page.waitForURL(`${origin}/permissions/revoke/confirm`), tab.page.click("#confirm")])
      expect(await tab.page.locator("#notice").textContent()).toBe("Access for Inbox Butler was revoked.")
      expect(await tab.page.locator(".agent-name").allTextContents()).toEqual(["Trip Planner"])
      await tab.page.screenshot({ path: `${SHOTS}/permissions-revoked.png`, fullPage: true })

      expect(await verify(mail.grantToken)).toBe(false)
      expect(await verify(child.grantToken)).toBe(false)
      expect(await verify(trip.grantToken)).toBe(true)
      const events = await app.query(`SELECT type FROM events WHERE developer_id = $1 AND data->>'grantId' = $2 ORDER BY type`, [dev.developerId, mail.grantId])
      expect(events.map((e: any) => e.type)).toEqual(["grant.created", "grant.revoked", "principal.grant_revoked", "token.issued"])
      // a stale confirmation form posted again (another tab) changes nothing and says so
      const again = await fetch(`${origin}/permissions/revoke/confirm`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ session: sessionToken, grantId: mail.grantId })
      })
      expect(again.status).toBe(200)
      expect(await again.text()).toContain("That access was already revoked or has ended.")
      expect((await app.query(`SELECT count(*)::int AS n FROM events WHERE type = 'principal.grant_revoked' AND data->>'grantId' = $1`, [mail.grantId]))[0].n).toBe(1)
      expect(tab.consoleErrors).toEqual([])
    } finally {
      await tab.context.close()
    }
  }, 120_000)

  test("without JavaScript: paste the access code, see the grants, revoke through the forms", async () => {
    const tab = await openTab({ javaScript: false })
    try {
      const mail = await consentGrant("person-4", butler, ["email:read"])
      const { dashboardUrl, sessionToken } = await dashboard("person-4")
      await tab.page.goto(dashboardUrl)
      await tab.page.fill('input[name="session"]:visible', sessionToken)
      await Promise.all([tab.page.waitForURL(`${origin}/permissions/view`), tab.page.click('button[type="submit"]:visible')])
      expect(await tab.page.locator(".agent-name").allTextContents()).toEqual(["Inbox Butler"])
      await Promise.all([tab.page.waitForURL(`${origin}/permissions/revoke`), grantCard(tab.page, mail.grantId).locator("button").click()])
      await Promise.all([tab.page.waitForURL(`${origin}/permissions/revoke/confirm`), tab.page.click("#confirm")])
      expect(await tab.page.locator("#empty").textContent()).toBe("No agent can act for you right now.")
      expect(await verify(mail.grantToken)).toBe(false)
    } finally {
      await tab.context.close()
    }
  }, 120_000)

  test("an expired or unknown link shows a page saying so (401), and revokes nothing", async () => {
    const tab = await openTab()
    try {
      const mail = await consentGrant("person-5", butler, ["email:read"])
      await tab.page.goto(`${origin}/permissions#session=pst_${"C".repeat(43)}`)
      await tab.page.waitForURL(`${origin}/permissions/view`)
      expect(await tab.page.locator("h1").textContent()).toBe("Link expired")
      const forged = await fetch(`${origin}/permissions/revoke/confirm`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ session: dev.apiKey, grantId: mail.grantId })
      })
      expect(forged.status).toBe(401)
      expect(forged.headers.get("content-type")).toContain("text/html")
      expect(await verify(mail.grantToken)).toBe(true)
      await tab.page.goto(`${origin}/permissions`)
      expect(await tab.page.locator("#boot-status").textContent()).toContain("incomplete")
    } finally {
      await tab.context.close()
    }
  }, 120_000)
  test("the person renames and removes a passkey; the page tells the password manager (signalAllAcceptedCredentials) and Chromium drops it", async () => {
    const laptop = await openTab()
    const phone = await openTab()
    try {
      const a = await passkeyGrant(laptop.page, "person-6", butler, ["email:read"])
      const b = await passkeyGrant(phone.page, "person-6", planner, ["calendar:write"])
      const { dashboardUrl } = await dashboard("person-6")
      await laptop.page.goto(dashboardUrl)
      await laptop.page.waitForSelector(".passkey")
      expect(await laptop.page.locator(".passkey strong").allTextContents()).toEqual(["Work laptop", "Work laptop"])

      const card = (id: string) => laptop.page.locator(`[data-passkey="${id}"]`)
      await card(b.credential.id).locator('input[name="deviceName"]').fill("Pixel phone")
      await Promise.all([laptop.page.waitForURL(`${origin}/permissions/passkeys/rename`), card(b.credential.id).locator('button:text("Rename")').click()])
      expect(await laptop.page.locator("#notice").textContent()).toBe("Passkey renamed to Pixel phone.")
      expect((await app.request("GET", `/v1/webauthn/credentials/${b.credential.id}`, { apiKey: dev.apiKey })).body.deviceName).toBe("Pixel phone")

      await Promise.all([laptop.page.waitForURL(`${origin}/permissions/passkeys/remove`), card(a.credential.id).locator('button:text("Remove")').click()])
      expect(await laptop.page.locator("#passkey-name").textContent()).toBe("Work laptop")
      await Promise.all([laptop.page.waitForURL(`${origin}/permissions/passkeys/remove/confirm`), laptop.page.click("#confirm")])
      expect(await laptop.page.locator("#notice").textContent()).toBe("Passkey Work laptop removed.")
      expect(await laptop.page.locator(".passkey strong").allTextContents()).toEqual(["Pixel phone"])
      expect((await app.request("GET", `/v1/webauthn/credentials/${a.credential.id}`, { apiKey: dev.apiKey })).status).toBe(404)
      const signals = await laptop.page.evaluate(() => (window as any).__signals)
      expect(signals.find((x: any) => x.name === "signalAllAcceptedCredentials").arg.allAcceptedCredentialIds).toEqual([b.credential.credentialId])
      // the laptop's authenticator forgets the removed passkey
      let left = 1
      for (let i = 0; i < 20 && left > 0; i++) {
        left = (await laptop.cdp.send("WebAuthn.getCredentials", { authenticatorId: laptop.authenticatorId })).credentials.length
        if (left > 0) await laptop.page.waitForTimeout(50)
      }
      expect(left).toBe(0)
      // another principal's passkey cannot be touched from this page
      const stranger = await passkeyGrant(phone.page, "person-7", planner, ["calendar:write"])
      const { sessionToken } = await dashboard("person-6")
      const forged = await fetch(`${origin}/permissions/passkeys/remove/confirm`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ session: sessionToken, passkeyId: stranger.credential.id })
      })
      expect(await forged.text()).toContain("That passkey was already removed.")
      expect((await app.request("GET", `/v1/webauthn/credentials/${stranger.credential.id}`, { apiKey: dev.apiKey })).status).toBe(200)
      await laptop.page.screenshot({ path: `${SHOTS}/permissions-passkeys.png`, fullPage: true })
      expect(laptop.consoleErrors).toEqual([])
    } finally {
      await laptop.context.close()
      await phone.context.close()
    }
  }, 120_000)
})
