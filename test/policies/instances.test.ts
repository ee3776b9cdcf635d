/**
 * decisions §13: each instance keeps a developer's parsed rules and Cedar set; a change made through
 * another instance is seen at once (the trigger's notification, like the API-key cache), not after
 * the entry expires. Real PostgreSQL only: the embedded mode is one process.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"
import { b64 } from "./support.ts"

let one: TestApp
let two: TestApp
beforeAll(async () => {
  if (!usingRealPostgres) return
  one = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" } })
  two = await startTestApp({ databaseUrl: one.databaseUrl, env: { RATE_LIMIT_SCALE: "100" } })
})
afterAll(async () => {
  await two?.stop()
  await one?.stop()
})

/** the notification arrives within moments; the cache entry alone would keep the old answer for 60 s */
const eventually = async (check: () => Promise<boolean>) => {
  for (let i = 0; i < 40; i++) {
    if (await check()) return true
    await new Promise((r) => setTimeout(r, 50))
  }
  return false
}

test.skipIf(!usingRealPostgres)("a rule, a Cedar set and a vault policy made on one instance apply on the other at once", async () => {
  const dev = await one.signup()
  const agentId = await createAgent(one, dev.developerId, ["email:read", "github:read"])
  const evaluate = (app: TestApp, scopes: Array<string>) =>
    app.request("POST", "/v1/policies/evaluate", { apiKey: dev.apiKey, body: { agentId, principalId: "u1", scopes } })
  expect((await evaluate(one, ["email:read"])).body.effect).toBe(null) // cached on one: no policies
  const rule = await two.request("POST", "/v1/policies", { apiKey: dev.apiKey, body: { name: "deny", effect: "deny", scopes: ["email:read"] } })
  expect(await eventually(async () => (await evaluate(one, ["email:read"])).body.effect === "deny")).toBe(true)
  await two.request("DELETE", `/v1/policies/${rule.body.id}`, { apiKey: dev.apiKey })
  expect(await eventually(async () => (await evaluate(one, ["email:read"])).body.effect === null)).toBe(true)
  // a Cedar set is re-parsed on the other instance
  await two.request("POST", "/v1/policies/sync", {
    apiKey: dev.apiKey,
    body: { format: "cedar", version: "1", content: b64(`@id("reads") permit(principal, action, resource) when { context.scopes.contains("email:read") };`) }
  })
  expect(await eventually(async () => (await evaluate(one, ["email:read"])).body.policyId === "reads")).toBe(true)
  // the vault flag follows too
  await one.request("POST", "/v1/vault/credentials", { apiKey: dev.apiKey, body: { principalId: "u1", service: "github", accessToken: "gho_x" } })
  const { token } = await issueGrant(one, { developerId: dev.developerId, agentId, principalId: "u1", scopes: ["github:read"] })
  const exchange = () => one.request("POST", "/v1/vault/credentials/exchange", { bearer: token.grantToken, body: { service: "github" } })
  expect((await exchange()).status).toBe(200)
  await two.request("POST", "/v1/policies", { apiKey: dev.apiKey, body: { name: "no vault", effect: "deny", actions: ["vault.exchange"] } })
  expect(await eventually(async () => (await exchange()).status === 403)).toBe(true)
})
