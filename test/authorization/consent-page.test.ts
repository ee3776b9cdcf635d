/**
 * The consent page in real Chromium (Debian's chromium driven by playwright-core): a person reads
 * the scopes and approves or denies; the browser lands on the app's redirect with code and state.
 * Also without JavaScript, for an expired request, and with a passkey when the developer requires one.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type Browser, chromium } from "playwright-core"
import { startTestApp, type TestApp } from "../support/app.ts"
import { freePort } from "../support/net.ts"
import { addVirtualAuthenticator, registerPasskey } from "../support/passkeys.ts"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"]

let app: TestApp
let origin: string
let browser: Browser
let dev: { apiKey: string; developerId: string }
let agentId: string
let appServer: ReturnType<typeof Bun.serve>
let callback: string

beforeAll(async () => {
  const port = await freePort()
  origin = `http://localhost:${port}`
  app = await startTestApp({ env: { PORT: String(port), PUBLIC_BASE_URL: origin, WEBAUTHN_ORIGIN: origin, WEBAUTHN_RP_ID: "localhost", RATE_LIMIT_SCALE: "100" } })
  dev = await app.signup({ plan: "enterprise" })
  agentId = (await app.request("POST", "/v1/agents", {
    apiKey: dev.apiKey,
    body: { name: "Inbox Butler", description: "Sorts and answers your mail", scopes: ["email:read", "calendar:read", "vault:github:read"] }
  })).body.agentId
  // the developer's app: where the person lands afterwards
  appServer = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("<!doctype html><title>back in the app</title><p>done</p>", { headers: { "content-type": "text/html" } }) })
  callback = `http://127.0.0.1:${appServer.port}/callback`
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
}, 120_000)
afterAll(async () => {
  await browser?.close()
  appServer?.stop(true)
  await app?.stop()
})

const authorize = async (apiKey = dev.apiKey, agent = agentId) =>
  (await app.request("POST", "/v1/authorize", {
    apiKey,
    body: { agentId: agent, principalId: "person-1", scopes: ["email:read", "vault:github:read"], redirectUri: callback, state: "st-42" }
  })).body

describe("consent page in Chromium", () => {
  test("read the scopes, click Approve, land on the redirect with code and state; the code works once", async () => {
    const auth = await authorize()
    const page = await browser.newPage()
    const consoleErrors: Array<string> = []
    page.on("console", (m) => m.type() === "error" && consoleErrors.push(m.text()))
    await page.goto(auth.consentUrl)
    expect(await page.locator("#agent-name").textContent()).toBe("Inbox Butler")
    const scopes = await page.locator("#scopes li strong").allTextContents()
    expect(scopes).toEqual(["Read your Email data", "Use the Github credentials you have stored"])
    expect(await page.locator("#agent-did").textContent()).toBe(`did:service:${agentId}`)
    await page.screenshot({ path: ".scratch/consent.png" }).catch(() => {})
    await Promise.all([page.waitForURL(/\/callback\?/), page.click("#approve")])
    const landed = new URL(page.url())
    expect(landed.searchParams.get("state")).toBe("st-42")
    const code = landed.searchParams.get("code")!
    expect(code.length).toBeGreaterThan(20)
    expect(consoleErrors).toEqual([]) // no CSP violations, no failed third-party loads
    const token = await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code, agentId } })
    expect(token.status).toBe(201)
    // coming back to the page shows it was already used
    await page.goto(auth.consentUrl)
    expect(await page.locator("#message").textContent()).toContain("already")
    await page.close()
  })

  test("Deny lands on the redirect with error=access_denied and the state", async () => {
    const auth = await authorize()
    const page = await browser.newPage()
    await page.goto(auth.consentUrl)
    await Promise.all([page.waitForURL(/\/callback\?/), page.click("#deny")])
    const landed = new URL(page.url())
    expect(landed.searchParams.get("error")).toBe("access_denied")
    expect(landed.searchParams.get("state")).toBe("st-42")
    expect(landed.searchParams.get("code")).toBeNull()
    expect((await app.query<{ status: string }>("SELECT status FROM auth_requests WHERE id = $1", [auth.authRequestId]))[0]!.status).toBe("denied")
    await page.close()
  })

  test("Approve works with JavaScript disabled", async () => {
    const auth = await authorize()
    const context = await browser.newContext({ javaScriptEnabled: false })
    const page = await context.newPage()
    await page.goto(auth.consentUrl)
    await Promise.all([page.waitForURL(/\/callback\?/), page.click("#approve")])
    expect(new URL(page.url()).searchParams.get("code")).toBeTruthy()
    await context.close()
  })

  test("an expired request shows a clear page", async () => {
    const auth = await authorize()
    await app.query("UPDATE auth_requests SET expires_at = now() - interval '1 minute' WHERE id = $1", [auth.authRequestId])
    const page = await browser.newPage()
    const response = await page.goto(auth.consentUrl)
    expect(response!.status()).toBe(410)
    expect(await page.locator("h1").textContent()).toBe("Request expired")
    expect(await page.locator("#approve").count()).toBe(0)
    await page.close()
  })

  test("FIDO required: the page approves with a passkey (virtual authenticator) and redirects", async () => {
    const fido = await app.signup({ plan: "enterprise" })
    await app.request("PATCH", "/v1/me", { apiKey: fido.apiKey, body: { fidoRequired: true } })
    const agent = (await app.request("POST", "/v1/agents", { apiKey: fido.apiKey, body: { name: "Careful agent", scopes: ["email:read"] } })).body.agentId
    const context = await browser.newContext()
    const page = await context.newPage()
    await addVirtualAuthenticator(context, page)
    // the person registers a passkey (the developer's app would run this ceremony)
    await page.goto(`${origin}/health`)
    const registered = (await registerPasskey(app, page, fido.apiKey, "person-1")).verified
    expect(registered.status).toBe(201)

    const auth = (await app.request("POST", "/v1/authorize", {
      apiKey: fido.apiKey,
      body: { agentId: agent, principalId: "person-1", scopes: ["email:read"], redirectUri: callback, state: "fido" }
    })).body
    await page.goto(auth.consentUrl)
    expect(await page.locator("#approve").count()).toBe(0) // no plain approval offered
    // plain approval is refused by the API too
    expect((await app.request("POST", `/v1/consent/${auth.authRequestId}/approve`)).body.code).toBe("FIDO_REQUIRED")
    await Promise.all([page.waitForURL(/\/callback\?/, { timeout: 15_000 }), page.click("#passkey-approve")])
    const landed = new URL(page.url())
    expect(landed.searchParams.get("state")).toBe("fido")
    const token = await app.request("POST", "/v1/token", { apiKey: fido.apiKey, body: { code: landed.searchParams.get("code"), agentId: agent } })
    expect(token.status).toBe(201)
    const [request] = await app.query<{ fidoVerifiedAt: Date | null }>("SELECT fido_verified_at FROM auth_requests WHERE id = $1", [auth.authRequestId])
    expect(request!.fidoVerifiedAt).not.toBeNull()
    await context.close()
  })
})
