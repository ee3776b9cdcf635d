/** The README's two policy examples ("Policies"), run as written against the service. */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { authorize, b64, makeDirectory } from "./support.ts"

let app: TestApp
const directory = makeDirectory()
beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" }, policyDirectory: directory.layer, testClock: true })
})
afterAll(async () => {
  await app?.stop()
})

const readme = readFileSync(join(import.meta.dir, "../../README.md"), "utf8")
const block = (tag: string) => new RegExp("```" + tag + "\\n([\\s\\S]*?)```").exec(readme)![1]!

test("README example 1: the working-hours rule approves on a weekday at 10:00 in Paris, not at 19:00 nor on Saturday", async () => {
  const dev = await app.signup()
  const agentId = await createAgent(app, dev.developerId, ["email:read"])
  const created = await app.request("POST", "/v1/policies", { apiKey: dev.apiKey, body: JSON.parse(block("json policy-rule")) })
  expect(created.status).toBe(201)
  const outcome = async (iso: string) => {
    await app.setTime(Date.parse(iso))
    return (await authorize(app, dev.apiKey, agentId, "user_1", ["email:read"])).body.policyEnforced === true
  }
  expect(await outcome("2026-11-24T09:00:00.000Z")).toBe(true) // Tuesday 10:00 in Paris
  expect(await outcome("2026-11-24T18:00:00.000Z")).toBe(false) // 19:00
  expect(await outcome("2026-11-28T09:00:00.000Z")).toBe(false) // Saturday
})

test("README example 2: the Cedar forbid on a group denies contractors, and the log says which policy", async () => {
  const dev = await app.signup()
  const agentId = await createAgent(app, dev.developerId, ["email:send"])
  directory.groups.set("contractor_7", ["contractors"])
  const synced = await app.request("POST", "/v1/policies/sync", { apiKey: dev.apiKey, body: { format: "cedar", version: "1", content: b64(block("cedar policy-set")) } })
  expect(synced.status).toBe(201)
  const denied = await authorize(app, dev.apiKey, agentId, "contractor_7", ["email:send"])
  expect([denied.status, denied.body.code]).toEqual([403, "POLICY_DENIED"])
  expect((await authorize(app, dev.apiKey, agentId, "employee_1", ["email:send"])).status).toBe(201)
  const log = await app.request("GET", "/v1/policies/decisions", { apiKey: dev.apiKey })
  expect(log.body.decisions[0]).toMatchObject({ effect: "deny", policyId: "no-mail-for-contractors", principalId: "contractor_7" })
})
