import { afterAll, beforeAll, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
let app: TestApp
let apiKey: string
beforeAll(async () => { app = await startTestApp({}); apiKey = (await app.signup()).apiKey })
afterAll(() => app.stop())
test("explore", async () => {
  const show = (r: any) => console.log(r.status, JSON.stringify(r.body))
  show(await app.request("POST", "/v1/agents", { apiKey, body: {} }))
  show(await app.request("POST", "/v1/agents", { apiKey, body: { name: 5, scopes: "x" } }))
  show(await app.request("POST", "/v1/agents", { apiKey, body: { name: "a", scopes: ["a b"] } }))
  show(await app.request("POST", "/v1/agents", { apiKey, body: { name: "", description: 3 } }))
  show(await app.request("POST", "/v1/agents", { apiKey, rawBody: "name=x", headers: { "content-type": "application/x-www-form-urlencoded" } }))
  show(await app.request("POST", "/v1/agents", { apiKey, rawBody: '{"name":"x"}', headers: { "content-type": "text/plain" } }))
  show(await app.request("POST", "/v1/consent-bundles", { apiKey, body: { agentId: "x" } }))
  show(await app.request("PATCH", "/v1/agents/ag_x", { apiKey, body: { status: "paused" } }))
  show(await app.request("GET", "/v1/dpdp/breaches?status=nope", { apiKey }))
  show(await app.request("POST", "/v1/budget/debit", { apiKey, body: { grantId: "g", amount: -1 } }))
  show(await app.request("POST", "/v1/budget/allocate", { apiKey, body: { grantId: "g", initialBudget: "x", currency: "$$" } }))
  show(await app.request("POST", "/v1/webhooks", { apiKey, body: { url: "https://example.com/h", events: ["nope.x"] } }))
  show(await app.request("POST", "/v1/vault/credentials", { apiKey, body: { principalId: "p", service: "s", accessToken: "t", tokenExpiresAt: "x", metadata: [] } }))
  show(await app.request("POST", "/v1/webauthn/register/verify", { apiKey, body: { challengeId: "c", response: null } }))
  show(await app.request("POST", "/v1/authorize", { apiKey, body: { agentId: "a", principalId: "p", scopes: [""] } }))
})
