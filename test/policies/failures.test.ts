/**
 * decisions §13: a policy can never make the service answer 5xx (a failing engine denies and logs),
 * and the decision log keeps 30 days, newest first, in pages.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { newId } from "../../src/platform/Ids.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { authorize, createRule } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" }, testClock: true })
})
afterAll(async () => {
  await app?.stop()
})

test("an active Cedar set that no longer parses denies every request (403, not 5xx), and the log says the engine failed", async () => {
  const dev = await app.signup()
  const agentId = await createAgent(app, dev.developerId, ["email:read"])
  // as if a newer cedar refused a stored set: written behind the API's back
  await app.query(
    `INSERT INTO policy_bundles (id, developer_id, format, version, sha256, content, policy_count, active, created_at)
     VALUES ($1, $2, 'cedar', '1', 'x', $3, 1, true, now())`,
    [newId("pbnd"), dev.developerId, Buffer.from("permit(principal, action, resource) when { 1 + };")]
  )
  const res = await authorize(app, dev.apiKey, agentId, "user_1", ["email:read"])
  expect([res.status, res.body.code]).toEqual([403, "POLICY_DENIED"])
  const explained = await app.request("POST", "/v1/policies/evaluate", { apiKey: dev.apiKey, body: { agentId, principalId: "u", scopes: ["email:read"] } })
  expect([explained.status, explained.body.effect, explained.body.policyId]).toEqual([200, "deny", "builtin:engine-failed"])
  const log = await app.request("GET", "/v1/policies/decisions", { apiKey: dev.apiKey })
  expect(log.body.decisions[0]).toMatchObject({ effect: "deny", policyId: "builtin:engine-failed" })
})

test("the decision log pages newest first, filters by agent and effect, and keeps 30 days", async () => {
  const dev = await app.signup()
  const agentA = await createAgent(app, dev.developerId, ["email:read"])
  const agentB = await createAgent(app, dev.developerId, ["email:read"])
  await createRule(app, dev.apiKey, { name: "deny all", effect: "deny" })
  for (let i = 0; i < 3; i++) {
    await authorize(app, dev.apiKey, agentA, `u${i}`, ["email:read"])
    await app.adjust("1 second")
  }
  await authorize(app, dev.apiKey, agentB, "u9", ["email:read"])
  const first = await app.request("GET", "/v1/policies/decisions?limit=2", { apiKey: dev.apiKey })
  expect(first.body.decisions.map((d: any) => d.principalId)).toEqual(["u9", "u2"])
  const second = await app.request("GET", `/v1/policies/decisions?limit=2&cursor=${first.body.nextCursor}`, { apiKey: dev.apiKey })
  expect(second.body.decisions.map((d: any) => d.principalId)).toEqual(["u1", "u0"])
  expect(second.body.nextCursor).toBe(null)
  const byAgent = await app.request("GET", `/v1/policies/decisions?agentId=${agentB}`, { apiKey: dev.apiKey })
  expect(byAgent.body.decisions.map((d: any) => d.principalId)).toEqual(["u9"])
  expect((await app.request("GET", "/v1/policies/decisions?effect=allow", { apiKey: dev.apiKey })).body.decisions).toEqual([])
  // another developer sees none of them
  const other = await app.signup()
  expect((await app.request("GET", "/v1/policies/decisions", { apiKey: other.apiKey })).body.decisions).toEqual([])
  await app.adjust("31 days")
  expect((await app.request("GET", "/v1/policies/decisions", { apiKey: dev.apiKey })).body.decisions).toEqual([])
})
