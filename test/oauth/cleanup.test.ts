/**
 * Dynamically registered clients that never complete an authorization go after 24 hours (decisions
 * §22.3); one that did stays. The pass runs on the service's TestClock.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { dcrCleanupPass } from "../../src/oauth/Cleanup.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { authorizeThroughConsent, postForm, registerClient, registerServer } from "./support.ts"

let app: TestApp

beforeAll(async () => {
  app = await startTestApp({ testClock: true, env: { RATE_LIMIT_SCALE: "100" } })
}, 120_000)
afterAll(async () => {
  await app?.stop()
})

describe("DCR cleanup (TestClock)", () => {
  test("an unused registration is deleted after 24 h, a used one is kept", async () => {
    const dev = await app.signup({ plan: "enterprise" })
    await registerServer(app, dev.apiKey)
    const unused = await registerClient(app, dev.developerId)
    const used = await registerClient(app, dev.developerId)
    const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: used.client_id })
    const token = await postForm(app, `/oauth/${dev.developerId}/token`, {
      grant_type: "authorization_code", code: flow.back!.searchParams.get("code")!, code_verifier: flow.verifier, client_id: used.client_id, redirect_uri: "http://127.0.0.1:7777/callback"
    })
    expect(token.status).toBe(200)
    await app.adjust("23 hours")
    expect(await app.run(dcrCleanupPass)).toEqual([])
    await app.adjust("2 hours")
    expect(await app.run(dcrCleanupPass)).toEqual([unused.client_id])
    const page = await app.request("GET", `/oauth/${dev.developerId}/authorize?client_id=${unused.client_id}&response_type=code`)
    expect(page.status).toBe(400)
    expect(page.text).toContain("not registered")
    const refresh = await postForm(app, `/oauth/${dev.developerId}/token`, { grant_type: "refresh_token", refresh_token: token.body.refresh_token, client_id: used.client_id })
    expect(refresh.status).toBe(200)
  })
})
