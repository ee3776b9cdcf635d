/**
 * POST /v1/tokens/verify takes our OAuth access tokens too (decisions §22.7): an `at+jwt` of the
 * caller's own issuer answers as a grant token does, adding its `audience` and `clientId`; another
 * developer's is `valid: false`; a revoked one is `valid: false` at once. `audience` narrows either
 * kind: a token whose `aud` does not contain it is `valid: false`.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { authorizeThroughConsent, postForm, registerClient, registerServer } from "./support.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
let other: { apiKey: string; developerId: string }
let client: any
const NOTES = "https://notes.example/api"

const accessToken = async () => {
  const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id, resource: NOTES })
  const answer = await postForm(app, `/oauth/${dev.developerId}/token`, {
    grant_type: "authorization_code", code: flow.back!.searchParams.get("code")!, code_verifier: flow.verifier, client_id: client.client_id,
    redirect_uri: "http://127.0.0.1:7777/callback", resource: NOTES
  })
  expect(answer.status).toBe(200)
  return answer.body.access_token as string
}
const verify = (apiKey: string, body: Record<string, unknown>) => app.request("POST", "/v1/tokens/verify", { apiKey, body })

beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" } })
  dev = await app.signup({ plan: "enterprise" })
  other = await app.signup({ plan: "enterprise" })
  await registerServer(app, dev.apiKey, { identifier: NOTES })
  client = await registerClient(app, dev.developerId)
}, 120_000)
afterAll(() => app?.stop())

test("an access token of the caller's issuer: valid, with its audience and client; another developer's key: not valid", async () => {
  const token = await accessToken()
  const answer = await verify(dev.apiKey, { token })
  expect(answer.status).toBe(200)
  expect(answer.body).toMatchObject({ valid: true, scopes: ["notes:read"], principal: "person-1", audience: NOTES, clientId: client.client_id })
  expect(answer.body.grantId).toMatch(/^grnt_/)
  expect(answer.body.agent).toMatch(/^did:/)
  expect((await verify(other.apiKey, { token })).body).toEqual({ valid: false })
})

test("audience: the token's own passes, another resource's is not valid, for access tokens and grant tokens alike", async () => {
  const token = await accessToken()
  expect((await verify(dev.apiKey, { token, audience: NOTES })).body.valid).toBe(true)
  expect((await verify(dev.apiKey, { token, audience: "https://calendar.example/api" })).body).toEqual({ valid: false })
  // a section-3 grant token without an audience is not valid for one, and stays valid without
  const sandbox = await app.signup({ mode: "sandbox" })
  const sAgent = await app.request("POST", "/v1/agents", { apiKey: sandbox.apiKey, body: { name: "plain", scopes: ["email:read"] } })
  const code = (await app.request("POST", "/v1/authorize", { apiKey: sandbox.apiKey, body: { agentId: sAgent.body.agentId, principalId: "p", scopes: ["email:read"] } })).body.code
  const grantToken = (await app.request("POST", "/v1/token", { apiKey: sandbox.apiKey, body: { code, agentId: sAgent.body.agentId } })).body.grantToken
  expect((await verify(sandbox.apiKey, { token: grantToken })).body.valid).toBe(true)
  expect((await verify(sandbox.apiKey, { token: grantToken })).body.audience).toBeUndefined()
  expect((await verify(sandbox.apiKey, { token: grantToken, audience: NOTES })).body).toEqual({ valid: false })
  expect((await verify(dev.apiKey, { token, audience: "" })).status).toBe(400)
})

test("revoked at the OAuth revocation endpoint: not valid at once", async () => {
  const token = await accessToken()
  expect((await verify(dev.apiKey, { token })).body.valid).toBe(true)
  const revoked = await postForm(app, `/oauth/${dev.developerId}/revoke`, { token, client_id: client.client_id })
  expect(revoked.status).toBe(200)
  expect((await verify(dev.apiKey, { token })).body).toEqual({ valid: false })
})
