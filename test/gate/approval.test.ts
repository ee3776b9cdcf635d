/**
 * Every grant records how it was approved (decisions §12, §13, §20): `approvalMethod` and `policyId`
 * (null when none), on GET /v1/grants/:id, the grant list and `grant.created`.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { createRule } from "../policies/support.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "1000", RATE_LIMIT_AUTHORIZE_PER_DEVELOPER: "100000" } })
})
afterAll(() => app?.stop())

const recorded = async (apiKey: string, developerId: string, grantId: string) => {
  const one = (await app.request("GET", `/v1/grants/${grantId}`, { apiKey })).body
  const listed = (await app.request("GET", "/v1/grants", { apiKey })).body.grants.find((g: any) => g.grantId === grantId)
  const [event] = await app.query<{ data: any }>(
    "SELECT data FROM events WHERE developer_id = $1 AND type = 'grant.created' AND data->>'grantId' = $2", [developerId, grantId])
  const shape = (g: any) => ({ approvalMethod: g.approvalMethod, policyId: g.policyId })
  expect(shape(listed)).toEqual(shape(one))
  expect(shape(event!.data)).toEqual(shape(one))
  return shape(one)
}

test("consent, a policy's allow, a sandbox, a bundle without consent and a delegation: each grant says which", async () => {
  const { apiKey, developerId } = await app.signup()
  const agentId = await createAgent(app, developerId, ["email:read", "github:read"])
  const subAgentId = await createAgent(app, developerId, ["email:read"], "Sub")
  const authorize = (scopes: ReadonlyArray<string>) =>
    app.request("POST", "/v1/authorize", { apiKey, body: { agentId, principalId: "ann@example.com", scopes } })

  // the person approves on the consent page
  const pending = (await authorize(["email:read"])).body.authRequestId
  const code = (await app.request("POST", `/v1/consent/${pending}/approve`)).body.code
  const consented = (await app.request("POST", "/v1/token", { apiKey, body: { code, agentId } })).body
  expect(await recorded(apiKey, developerId, consented.grantId)).toEqual({ approvalMethod: "consent", policyId: null })

  // a policy's allow approves at once
  const rule = await createRule(app, apiKey, { name: "github is fine", effect: "allow", scopes: ["github:read"] })
  const byPolicy = (await authorize(["github:read"])).body
  expect(byPolicy).toMatchObject({ policyEnforced: true, effect: "allow", policyId: rule.id })
  const policyGrant = (await app.request("POST", "/v1/token", { apiKey, body: { code: byPolicy.code, agentId } })).body.grantId
  expect(await recorded(apiKey, developerId, policyGrant)).toEqual({ approvalMethod: "policy", policyId: rule.id })

  // a bundle made by the application without a person's approval, and a delegation
  const bundle = (await app.request("POST", "/v1/consent-bundles", { apiKey, body: { agentId, userId: "ann@example.com", scopes: ["email:read"] } })).body
  const bundleGrant = (await app.query("SELECT grant_id FROM consent_bundles WHERE id = $1", [bundle.bundleId]))[0].grantId
  expect(await recorded(apiKey, developerId, bundleGrant)).toEqual({ approvalMethod: "developer", policyId: null })
  const delegated = (await app.request("POST", "/v1/grants/delegate", {
    apiKey, body: { parentGrantToken: consented.grantToken, subAgentId, scopes: ["email:read"] }
  })).body
  expect(await recorded(apiKey, developerId, delegated.grantId)).toEqual({ approvalMethod: "developer", policyId: null })

  // a sandbox developer's request is approved at once
  const sandbox = await app.signup({ mode: "sandbox" })
  const sandboxAgent = await createAgent(app, sandbox.developerId, ["email:read"])
  const auto = (await app.request("POST", "/v1/authorize", {
    apiKey: sandbox.apiKey, body: { agentId: sandboxAgent, principalId: "bo@example.com", scopes: ["email:read"] }
  })).body
  const sandboxGrant = (await app.request("POST", "/v1/token", { apiKey: sandbox.apiKey, body: { code: auto.code, agentId: sandboxAgent } })).body.grantId
  expect(await recorded(sandbox.apiKey, sandbox.developerId, sandboxGrant)).toEqual({ approvalMethod: "sandbox", policyId: null })
})
