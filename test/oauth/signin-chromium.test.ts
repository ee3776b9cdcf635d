/**
 * The OAuth passkey sign-in page in real Chromium (decisions §22.5): a discoverable passkey made by
 * the virtual authenticator, then /authorize → the passkey page (the only method: straight there) →
 * the page's own script (usernameless get, verify) → the consent page → Approve → the client's
 * redirect with a code. http://localhost is a secure context, so the service runs there.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { type Browser, chromium } from "playwright-core"
import { startTestApp, type TestApp } from "../support/app.ts"
import { freePort } from "../support/net.ts"
import { addVirtualAuthenticator, registerPasskey } from "../support/passkeys.ts"
import { pkce, registerClient, registerServer } from "./support.ts"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"]
const REDIRECT = "http://127.0.0.1:7777/callback"

let app: TestApp
let origin: string
let browser: Browser

beforeAll(async () => {
  const port = await freePort()
  origin = `http://localhost:${port}`
  app = await startTestApp({ env: { PORT: String(port), PUBLIC_BASE_URL: origin, WEBAUTHN_ORIGIN: origin, WEBAUTHN_RP_ID: "localhost", RATE_LIMIT_SCALE: "100" } })
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
}, 120_000)
afterAll(async () => {
  await browser?.close()
  await app?.stop()
})

test("a usernameless passkey signs the person in; consent; the client gets its code", async () => {
  const dev = await app.signup({ plan: "enterprise" })
  await registerServer(app, dev.apiKey, { login: { passkey: true } })
  const client = await registerClient(app, dev.developerId)
  const context = await browser.newContext()
  try {
    const page = await context.newPage()
    await addVirtualAuthenticator(context, page)
    // the passkey, registered for "robin" as a developer's page would
    await page.goto(`${origin}/health`)
    expect((await registerPasskey(app, page, dev.apiKey, "robin")).verified.status).toBe(201)

    // the client's redirect is answered here (nothing listens on it)
    let landed: URL | undefined
    await context.route("http://127.0.0.1:7777/**", (route) => {
      landed = new URL(route.request().url())
      return route.fulfill({ status: 200, contentType: "text/plain", body: "ok" })
    })
    const { challenge } = pkce()
    const query = new URLSearchParams({ response_type: "code", client_id: client.client_id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: "S256", state: "st" })
    await page.goto(`${origin}/oauth/${dev.developerId}/authorize?${query}`)
    expect(new URL(page.url()).pathname).toBe(`/oauth/${dev.developerId}/login`)
    await page.click("#passkey-signin")
    await page.waitForURL((u) => u.pathname === "/consent", { timeout: 15_000 })
    expect(await page.textContent("#for-whom")).toContain("robin")
    await page.click("#approve")
    await page.waitForURL((u) => u.origin === "http://127.0.0.1:7777", { timeout: 15_000 })
    expect(landed?.searchParams.get("code")).toBeTruthy()
    expect(landed?.searchParams.get("iss")).toBe(`${origin}/oauth/${dev.developerId}`)
    const [grant] = await app.query("SELECT principal_id, auth_method FROM grants WHERE developer_id = $1", [dev.developerId])
    expect(grant).toEqual({ principalId: "robin", authMethod: "passkey" })
  } finally {
    await context.close()
  }
}, 120_000)
