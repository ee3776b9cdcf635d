/**
 * The passkey ceremony in real Chromium, with its virtual authenticator (DevTools protocol
 * WebAuthn.addVirtualAuthenticator: ctap2, internal, user verification): register a passkey, then
 * approve a pending authorization request with it. WebAuthn needs a secure context: http://localhost
 * is one, so the service runs on http://localhost:<port> with RP ID `localhost`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { createServer } from "node:net"
import { type Browser, type BrowserContext, type CDPSession, chromium, type Page } from "playwright-core"
import { newId } from "../../src/platform/Ids.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"]

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const srv = createServer()
    srv.once("error", reject)
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address()
      const port = typeof address === "object" && address ? address.port : 0
      srv.close(() => resolve(port))
    })
  })

let app: TestApp
let origin: string
let browser: Browser
let dev: { apiKey: string; developerId: string }
let agentId: string

beforeAll(async () => {
  const port = await freePort()
  origin = `http://localhost:${port}`
  app = await startTestApp({ env: { PORT: String(port), PUBLIC_BASE_URL: origin, WEBAUTHN_ORIGIN: origin, WEBAUTHN_RP_ID: "localhost" } })
  dev = await app.signup({ plan: "enterprise" })
  agentId = await createAgent(app, dev.developerId, ["email:read"], "Mail helper")
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
}, 120_000)
afterAll(async () => {
  await browser?.close()
  await app?.stop()
})

/** a browser tab with a virtual platform authenticator that verifies the user */
const openTab = async (): Promise<{ context: BrowserContext; page: Page; cdp: CDPSession; authenticatorId: string }> => {
  const context = await browser.newContext()
  const page = await context.newPage()
  const cdp = await context.newCDPSession(page)
  await cdp.send("WebAuthn.enable")
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2",
      transport: "internal",
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true
    }
  })
  return { context, page, cdp, authenticatorId }
}

const post = (path: string, body: unknown) => app.request("POST", path, { apiKey: dev.apiKey, body })

/** navigator.credentials.create() in the page, answered as RegistrationResponseJSON */
const browserRegister = (page: Page, publicKey: unknown) =>
  page.evaluate(async (json) => {
    const options = (PublicKeyCredential as any).parseCreationOptionsFromJSON(json)
    const credential = await navigator.credentials.create({ publicKey: options }) as any
    return credential.toJSON()
  }, publicKey)

/** navigator.credentials.get() in the page, answered as AuthenticationResponseJSON */
const browserAssert = (page: Page, publicKey: unknown) =>
  page.evaluate(async (json) => {
    const options = (PublicKeyCredential as any).parseRequestOptionsFromJSON(json)
    const credential = await navigator.credentials.get({ publicKey: options }) as any
    return credential.toJSON()
  }, publicKey)

const pendingRequest = async (principalId: string) => {
  const id = newId("areq")
  await app.query(
    `INSERT INTO auth_requests (id, developer_id, agent_id, principal_id, scopes, grant_ttl_seconds, status, expires_at, created_at)
     VALUES ($1, $2, $3, $4, $5, 86400, 'pending', now() + interval '10 minutes', now())`,
    [id, dev.developerId, agentId, principalId, ["email:read"]]
  )
  return id
}

const registerIn = async (page: Page, principalId: string) => {
  const options = await post("/v1/webauthn/register/options", { principalId })
  expect(options.status).toBe(200)
  const response = await browserRegister(page, options.body.publicKey)
  const res = await post("/v1/webauthn/register/verify", { challengeId: options.body.challengeId, response, deviceName: "Chromium" })
  expect(res.status).toBe(201)
  return res.body
}

describe("passkeys in Chromium (virtual authenticator)", () => {
  test("register, then approve a pending request; replaying the assertion is refused", async () => {
    const { context, page, cdp, authenticatorId } = await openTab()
    try {
      await page.goto(`${origin}/health`)
      const credential = await registerIn(page, "principal-chrome")
      expect(credential).toMatchObject({ principalId: "principal-chrome", deviceName: "Chromium", authenticatorType: "platform" })
      const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId })
      expect(credentials).toHaveLength(1)
      expect(Buffer.from(credentials[0]!.credentialId, "base64").toString("base64url")).toBe(credential.credentialId)

      const areq = await pendingRequest("principal-chrome")
      const options = await post("/v1/webauthn/assert/options", { authRequestId: areq })
      expect(options.status).toBe(200)
      const assertion = await browserAssert(page, options.body.publicKey)
      const res = await post("/v1/webauthn/assert/verify", { challengeId: options.body.challengeId, response: assertion })
      expect(res.status).toBe(200)
      expect(res.body).toMatchObject({
        verified: true,
        grantId: expect.stringMatching(/^grnt_/),
        fidoEvidence: { credentialId: credential.credentialId, authenticatorType: "platform", userVerified: true }
      })
      expect((await app.query(`SELECT status FROM auth_requests WHERE id = $1`, [areq]))[0].status).toBe("approved")

      const replay = await post("/v1/webauthn/assert/verify", { challengeId: options.body.challengeId, response: assertion })
      expect(replay.status).toBe(400)
      expect(replay.body.code).toBe("INVALID_CHALLENGE")
    } finally {
      await context.close()
    }
  }, 120_000)

  test("an assertion made on another origin is refused (400 VERIFICATION_FAILED)", async () => {
    const { context, page } = await openTab()
    // another origin on the same RP ID (localhost): the browser signs, the service refuses the origin
    const otherPort = await freePort()
    const other = Bun.serve({ port: otherPort, hostname: "127.0.0.1", fetch: () => new Response("<!doctype html><title>other</title>", { headers: { "content-type": "text/html" } }) })
    try {
      await page.goto(`${origin}/health`)
      await registerIn(page, "principal-origin")
      await page.goto(`http://localhost:${otherPort}/`)
      const areq = await pendingRequest("principal-origin")
      const options = await post("/v1/webauthn/assert/options", { authRequestId: areq })
      const assertion = await browserAssert(page, options.body.publicKey)
      expect(JSON.parse(Buffer.from(assertion.response.clientDataJSON, "base64url").toString()).origin).toBe(`http://localhost:${otherPort}`)
      const res = await post("/v1/webauthn/assert/verify", { challengeId: options.body.challengeId, response: assertion })
      expect(res.status).toBe(400)
      expect(res.body.code).toBe("VERIFICATION_FAILED")
      expect((await app.query(`SELECT status FROM auth_requests WHERE id = $1`, [areq]))[0].status).toBe("pending")
    } finally {
      other.stop(true)
      await context.close()
    }
  }, 120_000)

  test("another principal's passkey is refused (403 CREDENTIAL_NOT_ALLOWED)", async () => {
    const { context, page } = await openTab()
    try {
      await page.goto(`${origin}/health`)
      await registerIn(page, "principal-victim")
      const attacker = await registerIn(page, "principal-attacker")
      const areq = await pendingRequest("principal-victim")
      const options = await post("/v1/webauthn/assert/options", { authRequestId: areq })
      // a tampered client offers the attacker's credential instead of the victim's
      const tampered = { ...options.body.publicKey, allowCredentials: [{ id: attacker.credentialId, type: "public-key", transports: ["internal"] }] }
      const assertion = await browserAssert(page, tampered)
      expect(assertion.id).toBe(attacker.credentialId)
      const res = await post("/v1/webauthn/assert/verify", { challengeId: options.body.challengeId, response: assertion })
      expect(res.status).toBe(403)
      expect(res.body.code).toBe("CREDENTIAL_NOT_ALLOWED")
      expect((await app.query(`SELECT status FROM auth_requests WHERE id = $1`, [areq]))[0].status).toBe("pending")
    } finally {
      await context.close()
    }
  }, 120_000)
})
