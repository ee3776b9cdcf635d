/**
 * The passkey ceremony in real Chromium, with its virtual authenticator (DevTools protocol
 * WebAuthn.addVirtualAuthenticator: ctap2, internal, user verification): register a passkey, then
 * approve a pending authorization request with it. WebAuthn needs a secure context: http://localhost
 * is one, so the service runs on http://localhost:<port> with RP ID `localhost`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type Browser, type BrowserContext, type CDPSession, chromium, type Page } from "playwright-core"
import { newId } from "../../src/platform/Ids.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
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
  return { context, page, ...(await addVirtualAuthenticator(context, page)) }
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
  const { options, verified } = await registerPasskey(app, page, dev.apiKey, principalId, "Chromium")
  expect(options.status).toBe(200)
  expect(verified.status).toBe(201)
  return verified.body
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
  test("management (decisions §17): discoverable credential, provider name from the AAGUID, user handle; rename and delete change what is offered", async () => {
    const { context, page, cdp, authenticatorId } = await openTab()
    try {
      await page.goto(`${origin}/health`)
      const first = await registerIn(page, "principal-manage")
      expect(first).toMatchObject({ providerName: "Chromium virtual authenticator", aaguid: "01020304-0506-0708-0102-030405060708" })
      const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId })
      expect(credentials[0]!.isResidentCredential).toBe(true)
      const signal = await app.request("GET", "/v1/webauthn/signal?principalId=principal-manage", { apiKey: dev.apiKey })
      expect(Buffer.from(credentials[0]!.userHandle!, "base64").toString("base64url")).toBe(signal.body.userId)
      // a second authenticator for the same principal
      const second = await openTab()
      await second.page.goto(`${origin}/health`)
      const other = await registerIn(second.page, "principal-manage")
      await second.context.close()
      const renamed = await app.request("PATCH", `/v1/webauthn/credentials/${other.id}`, { apiKey: dev.apiKey, body: { deviceName: "Old phone" } })
      expect(renamed.body.deviceName).toBe("Old phone")
      const areq = await pendingRequest("principal-manage")
      const before = await post("/v1/webauthn/assert/options", { authRequestId: areq })
      expect(before.body.publicKey.allowCredentials.map((c: any) => c.id).sort()).toEqual([first.credentialId, other.credentialId].sort())
      expect((await app.request("DELETE", `/v1/webauthn/credentials/${other.id}`, { apiKey: dev.apiKey })).status).toBe(204)
      const after = await post("/v1/webauthn/assert/options", { authRequestId: areq })
      expect(after.body.publicKey.allowCredentials.map((c: any) => c.id)).toEqual([first.credentialId])
      const registerAgain = await post("/v1/webauthn/register/options", { principalId: "principal-manage" })
      expect(registerAgain.body.publicKey.excludeCredentials.map((c: any) => c.id)).toEqual([first.credentialId])
    } finally {
      await context.close()
    }
  }, 120_000)

  test("a counter set back on the authenticator (a clone) is refused: 403 VERIFICATION_FAILED, the request stays pending", async () => {
    const { context, page, cdp, authenticatorId } = await openTab()
    try {
      await page.goto(`${origin}/health`)
      await registerIn(page, "principal-clone")
      const approveOnce = async () => {
        const areq = await pendingRequest("principal-clone")
        const options = await post("/v1/webauthn/assert/options", { authRequestId: areq })
        const assertion = await browserAssert(page, options.body.publicKey)
        return { areq, res: await post("/v1/webauthn/assert/verify", { challengeId: options.body.challengeId, response: assertion }) }
      }
      expect((await approveOnce()).res.status).toBe(200)
      expect((await approveOnce()).res.status).toBe(200)
      // the authenticator's copy of the key is put back with an older counter, as a cloned key would have
      const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId })
      const credential = credentials[0]!
      expect(credential.signCount).toBeGreaterThanOrEqual(2)
      await cdp.send("WebAuthn.removeCredential", { authenticatorId, credentialId: credential.credentialId })
      await cdp.send("WebAuthn.addCredential", { authenticatorId, credential: { ...credential, signCount: 0 } })
      const { areq, res } = await approveOnce()
      expect(res.status).toBe(403)
      expect(res.body.code).toBe("VERIFICATION_FAILED")
      expect((await app.query(`SELECT status FROM auth_requests WHERE id = $1`, [areq]))[0].status).toBe("pending")
      const alerts = await app.query(`SELECT principal_id FROM audit_log WHERE action = 'service.passkey.counter_regression'`)
      expect(alerts.map((a: any) => a.principalId)).toContain("principal-clone")
    } finally {
      await context.close()
    }
  }, 120_000)

  test("a passkey deleted meanwhile: the consent page answers 403 UNKNOWN_CREDENTIAL and calls signalUnknownCredential", async () => {
    const fido = await app.signup({ plan: "enterprise" })
    await app.request("PATCH", "/v1/me", { apiKey: fido.apiKey, body: { fidoRequired: true } })
    const agent = (await app.request("POST", "/v1/agents", { apiKey: fido.apiKey, body: { name: "Careful agent", scopes: ["email:read"] } })).body.agentId
    const { context, page, cdp, authenticatorId } = await openTab()
    try {
      await page.addInitScript(() => {
        const w = window as any
        w.__unknown = []
        const original = w.PublicKeyCredential?.signalUnknownCredential
        if (w.PublicKeyCredential) {
          w.PublicKeyCredential.signalUnknownCredential = (arg: unknown) => {
            w.__unknown.push(arg)
            return original ? original.call(w.PublicKeyCredential, arg) : Promise.resolve()
          }
        }
      })
      await page.goto(`${origin}/health`)
      const options = await app.request("POST", "/v1/webauthn/register/options", { apiKey: fido.apiKey, body: { principalId: "person-deleted" } })
      const registration = await browserRegister(page, options.body.publicKey)
      const registered = await app.request("POST", "/v1/webauthn/register/verify", { apiKey: fido.apiKey, body: { challengeId: options.body.challengeId, response: registration } })
      expect(registered.status).toBe(201)
      const auth = (await app.request("POST", "/v1/authorize", { apiKey: fido.apiKey, body: { agentId: agent, principalId: "person-deleted", scopes: ["email:read"] } })).body
      // the passkey is deleted (another tab, the developer's app) between the options and the verification
      await page.route("**/passkey/verify", async (route) => {
        expect((await app.request("DELETE", `/v1/webauthn/credentials/${registered.body.id}`, { apiKey: fido.apiKey })).status).toBe(204)
        await route.continue()
      })
      await page.goto(auth.consentUrl)
      const verified = page.waitForResponse("**/passkey/verify")
      await page.click("#passkey-approve")
      const answer = await verified
      expect(answer.status()).toBe(403)
      expect((await answer.json()).code).toBe("UNKNOWN_CREDENTIAL")
      await page.waitForFunction(() => (window as any).__unknown.length > 0)
      expect(await page.evaluate(() => (window as any).__unknown)).toEqual([{ rpId: "localhost", credentialId: registered.body.credentialId }])
      expect(await page.locator("#passkey-status").textContent()).toContain("failed")
      expect((await app.query(`SELECT status FROM auth_requests WHERE id = $1`, [auth.authRequestId]))[0].status).toBe("pending")
      // Chromium acts on the signal: the virtual authenticator forgets the passkey
      let left = 1
      for (let i = 0; i < 20 && left > 0; i++) {
        left = (await cdp.send("WebAuthn.getCredentials", { authenticatorId })).credentials.length
        if (left > 0) await page.waitForTimeout(50)
      }
      expect(left).toBe(0)
    } finally {
      await context.close()
    }
  }, 120_000)
})
