/**
 * Passkeys in a real browser, for the Chromium tests: a tab with the DevTools protocol's virtual
 * authenticator (ctap2, platform, resident keys, user verification, presence simulated), and the
 * registration ceremony a developer's page runs (options from the service, `navigator.credentials.create`
 * in the tab, the response verified by the service).
 */
import type { BrowserContext, Page } from "playwright-core"
import type { TestApp } from "./app.ts"

/** adds a virtual platform authenticator that verifies the user to `page` */
export const addVirtualAuthenticator = async (context: BrowserContext, page: Page) => {
  const cdp = await context.newCDPSession(page)
  await cdp.send("WebAuthn.enable")
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: { protocol: "ctap2", transport: "internal", hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true }
  })
  return { cdp, authenticatorId }
}

/**
 * Registers a passkey for `principalId` from `page` (already on the service's origin): the options
 * answer and the verify answer, for the caller's assertions.
 */
export const registerPasskey = async (app: TestApp, page: Page, apiKey: string, principalId: string, deviceName?: string) => {
  const options = await app.request("POST", "/v1/webauthn/register/options", { apiKey, body: { principalId } })
  const response = await page.evaluate(async (json) => {
    const created = await navigator.credentials.create({ publicKey: (PublicKeyCredential as any).parseCreationOptionsFromJSON(json) }) as any
    return created.toJSON()
  }, options.body.publicKey)
  const verified = await app.request("POST", "/v1/webauthn/register/verify", {
    apiKey, body: { challengeId: options.body.challengeId, response, ...(deviceName !== undefined ? { deviceName } : {}) }
  })
  return { options, verified }
}
