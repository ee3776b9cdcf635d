/**
 * Policies read the real directory (decisions §11, §13): a group provisioned over SCIM is what a Cedar
 * `forbid ... in Group::…` and a rule's `principalGroups` match, by display name or by id, and a
 * principal the directory deactivated is refused (403 PRINCIPAL_INACTIVE, before any policy runs).
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { GROUP, newUser, scimClient } from "../directory/support.ts"
import { authorize, b64 } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" } })
})
afterAll(async () => {
  await app?.stop()
})

test("a SCIM group decides a Cedar forbid by display name and a rule by id; deactivation refuses the principal", async () => {
  const scim = await scimClient(app)
  const agentId = await createAgent(app, scim.developerId, ["email:send", "email:read"])
  const contractor = await scim.send("POST", "/Users", newUser("casey@example.com"))
  expect(contractor.status).toBe(201)
  const employee = await scim.send("POST", "/Users", newUser("erin@example.com"))
  expect(employee.status).toBe(201)
  const group = await scim.send("POST", "/Groups", { schemas: [GROUP], displayName: "contractors", members: [{ value: contractor.body.id }] })
  expect(group.status).toBe(201)

  const cedar = `@id("no-mail-for-contractors")\nforbid (principal, action, resource in Group::"contractors")\nwhen { context.scopes.contains("email:send") };\n`
  const synced = await app.request("POST", "/v1/policies/sync", { apiKey: scim.apiKey, body: { format: "cedar", version: "1", content: b64(cedar) } })
  expect(synced.status).toBe(201)
  const denied = await authorize(app, scim.apiKey, agentId, "casey@example.com", ["email:send"])
  expect([denied.status, denied.body.code]).toEqual([403, "POLICY_DENIED"])
  expect((await authorize(app, scim.apiKey, agentId, "erin@example.com", ["email:send"])).status).toBe(201)

  // a built-in deny naming the group by its id
  const rule = await app.request("POST", "/v1/policies", {
    apiKey: scim.apiKey,
    body: { name: "no reading for the group", effect: "deny", priority: 10, principalGroups: [group.body.id], scopes: ["email:read"] }
  })
  expect(rule.status).toBe(201)
  const byId = await authorize(app, scim.apiKey, agentId, "casey@example.com", ["email:read"])
  expect([byId.status, byId.body.code]).toEqual([403, "POLICY_DENIED"])
  expect((await authorize(app, scim.apiKey, agentId, "erin@example.com", ["email:read"])).status).toBe(201)

  // deprovisioned in the directory: refused before any policy is asked
  const off = await scim.send("PATCH", `/Users/${employee.body.id}`, {
    schemas: ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
    Operations: [{ op: "replace", value: { active: false } }]
  })
  expect(off.status).toBe(200)
  const inactive = await authorize(app, scim.apiKey, agentId, "erin@example.com", ["email:read"])
  expect([inactive.status, inactive.body.code]).toEqual([403, "PRINCIPAL_INACTIVE"])
})
