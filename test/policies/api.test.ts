/** decisions §13: rules and Cedar sets as a developer manages them, and every bad input answered 400/422 with details. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { b64, createRule } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" } })
})
afterAll(async () => {
  await app?.stop()
})

describe("built-in rules", () => {
  test("create, get, list, patch and delete keep the published shape plus ours", async () => {
    const { apiKey } = await app.signup()
    const created = await app.request("POST", "/v1/policies", {
      apiKey,
      body: {
        name: "working hours", effect: "allow", priority: 5, scopes: ["email:read"], timeOfDayStart: "09:00", timeOfDayEnd: "17:30",
        daysOfWeek: [5, 1, 1], timeZone: "Europe/Paris", principalGroups: ["staff"], description: "weekdays only"
      }
    })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({
      name: "working hours", effect: "allow", priority: 5, agentId: null, principalId: null, scopes: ["email:read"],
      timeOfDayStart: "09:00", timeOfDayEnd: "17:30", daysOfWeek: [1, 5], timeZone: "Europe/Paris", actions: ["authorize"],
      principalGroups: ["staff"], description: "weekdays only"
    })
    expect(created.body.id).toMatch(/^pol_[0-9A-Z]{26}$/)
    const id = created.body.id
    expect((await app.request("GET", `/v1/policies/${id}`, { apiKey })).body).toEqual(created.body)
    const patched = await app.request("PATCH", `/v1/policies/${id}`, { apiKey, body: { scopes: null, timeOfDayStart: null, timeOfDayEnd: null, effect: "deny" } })
    expect(patched.status).toBe(200)
    expect(patched.body).toMatchObject({ scopes: null, timeOfDayStart: null, timeOfDayEnd: null, effect: "deny", daysOfWeek: [1, 5] })
    const list = await app.request("GET", "/v1/policies", { apiKey })
    expect(list.body).toMatchObject({ total: 1, nextCursor: null })
    expect(list.body.policies.map((p: any) => p.id)).toEqual([id])
    expect((await app.request("DELETE", `/v1/policies/${id}`, { apiKey })).status).toBe(204)
    expect((await app.request("GET", `/v1/policies/${id}`, { apiKey })).body.code).toBe("NOT_FOUND")
    // another developer never sees it
    const other = await app.signup()
    const mine = await createRule(app, apiKey, { name: "x", effect: "deny" })
    expect((await app.request("GET", `/v1/policies/${mine.id}`, { apiKey: other.apiKey })).status).toBe(404)
    expect((await app.request("DELETE", `/v1/policies/${mine.id}`, { apiKey: other.apiKey })).status).toBe(404)
  })

  test.each([
    ["an unknown field", { name: "a", effect: "allow", colour: "red" }, "colour"],
    ["a malformed time", { name: "a", effect: "allow", timeOfDayStart: "9:00", timeOfDayEnd: "17:00" }, "timeOfDayStart"],
    ["an hour past 23", { name: "a", effect: "allow", timeOfDayStart: "24:00", timeOfDayEnd: "17:00" }, "timeOfDayStart"],
    ["one time bound", { name: "a", effect: "allow", timeOfDayStart: "09:00" }, "timeOfDayEnd"],
    ["an unknown time zone", { name: "a", effect: "allow", timeZone: "Mars/Olympus" }, "timeZone"],
    ["a day 8", { name: "a", effect: "allow", daysOfWeek: [8] }, "daysOfWeek"],
    ["an unknown action", { name: "a", effect: "allow", actions: ["launch"] }, "actions"],
    ["a bad effect", { name: "a", effect: "maybe" }, "effect"],
    ["a fractional priority", { name: "a", effect: "deny", priority: 1.5 }, "priority"],
    ["no name", { effect: "deny" }, "name"]
  ])("%s is 400 BAD_REQUEST with details", async (_label, body, path) => {
    const { apiKey } = await app.signup()
    const res = await app.request("POST", "/v1/policies", { apiKey, body })
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("BAD_REQUEST")
    expect(res.body.details.some((d: any) => d.path.startsWith(path))).toBe(true)
    expect((await app.request("GET", "/v1/policies", { apiKey })).body.total).toBe(0)
  })

  test("PATCH refuses unknown fields and a lone time bound", async () => {
    const { apiKey } = await app.signup()
    const { id } = await createRule(app, apiKey, { name: "a", effect: "deny", timeOfDayStart: "22:00", timeOfDayEnd: "06:00" })
    expect((await app.request("PATCH", `/v1/policies/${id}`, { apiKey, body: { nope: 1 } })).status).toBe(400)
    const lone = await app.request("PATCH", `/v1/policies/${id}`, { apiKey, body: { timeOfDayEnd: null } })
    expect(lone.status).toBe(400)
    expect(lone.body.details[0].path).toBe("timeOfDayEnd")
  })

  test("the free plan keeps at most 50 rules (402 PLAN_LIMIT_EXCEEDED); pro more", async () => {
    const { apiKey, developerId } = await app.signup()
    for (let i = 0; i < 50; i++) await createRule(app, apiKey, { name: `r${i}`, effect: "deny", agentId: `ag_${i}` })
    const over = await app.request("POST", "/v1/policies", { apiKey, body: { name: "one more", effect: "deny" } })
    expect(over.status).toBe(402)
    expect(over.body.code).toBe("PLAN_LIMIT_EXCEEDED")
    await app.query("UPDATE developers SET plan = 'pro' WHERE id = $1", [developerId])
    await new Promise((r) => setTimeout(r, 50))
    const page = await app.request("GET", "/v1/policies?limit=20", { apiKey })
    expect(page.body.total).toBe(50)
    expect(page.body.policies).toHaveLength(20)
    const next = await app.request("GET", `/v1/policies?limit=40&cursor=${page.body.nextCursor}`, { apiKey })
    expect(next.body.policies).toHaveLength(30)
    expect(new Set([...page.body.policies, ...next.body.policies].map((p: any) => p.id)).size).toBe(50)
    expect((await app.request("GET", "/v1/policies?cursor=zzz", { apiKey })).status).toBe(400)
  })
})

describe("Cedar policy sets", () => {
  const valid = `@id("no-night") forbid(principal, action == Action::"authorize", resource) when { context.time.minuteOfDay < 360 };
permit(principal, action, resource in Group::"staff") when { ["email:read"].containsAll(context.scopes) };`

  test("a valid set is stored, listed, active; another one activates in its place", async () => {
    const { apiKey } = await app.signup()
    const first = await app.request("POST", "/v1/policies/sync", { apiKey, body: { format: "cedar", version: "v1", content: b64(valid) } })
    expect(first.status).toBe(201)
    expect(first.body).toMatchObject({ format: "cedar", version: "v1", policyCount: 2, active: true, activated: true, fileCount: 1 })
    expect(first.body.bundleId).toMatch(/^pbnd_/)
    const second = await app.request("POST", "/v1/policies/sync", { apiKey, body: { format: "cedar", version: "v2", content: b64(valid), activate: false } })
    expect(second.body.active).toBe(false)
    expect((await app.request("GET", "/v1/policies/bundles/active", { apiKey })).body.bundleId).toBe(first.body.bundleId)
    const activated = await app.request("POST", `/v1/policies/bundles/${second.body.bundleId}/activate`, { apiKey })
    expect(activated.body.active).toBe(true)
    const list = await app.request("GET", "/v1/policies/bundles", { apiKey })
    expect(list.body.bundles.map((b: any) => [b.version, b.active])).toEqual([["v2", true], ["v1", false]])
    expect((await app.request("POST", `/v1/policies/bundles/pbnd_nope/activate`, { apiKey })).status).toBe(404)
  })

  test.each([
    ["does not parse", "permit(principal, action, resource) when { 1 + };", "content"],
    ["reads an attribute the schema lacks", `permit(principal, action, resource) when { context.nope == 1 };`, "content/policy0"],
    ["compares a string with a number", `@id("bad") forbid(principal, action, resource) when { context.agentId > 3 };`, "content/bad"],
    ["names an unknown action", `permit(principal, action == Action::"launch", resource);`, "content/policy0"],
    ["is a template", `permit(principal == ?principal, action, resource);`, "content"]
  ])("a set that %s is 422 POLICY_INVALID with details, and nothing is stored", async (_label, text, path) => {
    const { apiKey } = await app.signup()
    const res = await app.request("POST", "/v1/policies/sync", { apiKey, body: { format: "cedar", version: "1", content: b64(text) } })
    expect(res.status).toBe(422)
    expect(res.body.code).toBe("POLICY_INVALID")
    expect(res.body.details[0].path).toBe(path)
    expect((await app.request("GET", "/v1/policies/bundles", { apiKey })).body.bundles).toEqual([])
  })

  test("oversize sets: over 500 policies or 256 KiB are 422; content not base64 is 400; rego needs OPA", async () => {
    const { apiKey } = await app.signup()
    const many = Array.from({ length: 501 }, (_, i) => `forbid(principal == Agent::"a${i}", action, resource);`).join("\n")
    const tooMany = await app.request("POST", "/v1/policies/sync", { apiKey, body: { format: "cedar", version: "1", content: b64(many) } })
    expect([tooMany.status, tooMany.body.code]).toEqual([422, "POLICY_INVALID"])
    const big = `forbid(principal, action, resource) when { context.agentId == "${"x".repeat(270_000)}" };`
    const tooBig = await app.request("POST", "/v1/policies/sync", { apiKey, body: { format: "cedar", version: "1", content: b64(big) } })
    expect([tooBig.status, tooBig.body.code]).toEqual([422, "POLICY_INVALID"])
    const notB64 = await app.request("POST", "/v1/policies/sync", { apiKey, body: { format: "cedar", version: "1", content: "%%%" } })
    expect([notB64.status, notB64.body.code, notB64.body.details[0].path]).toEqual([400, "BAD_REQUEST", "content"])
    const binary = await app.request("POST", "/v1/policies/sync", { apiKey, body: { format: "cedar", version: "1", content: Buffer.from([0xff, 0xfe, 0x00, 0x41]).toString("base64") } })
    expect([binary.status, binary.body.code, binary.body.details[0].path]).toEqual([422, "POLICY_INVALID", "content"])
    const rego = await app.request("POST", "/v1/policies/sync", { apiKey, body: { format: "rego", version: "1", content: b64("package x") } })
    expect([rego.status, rego.body.code]).toEqual([422, "POLICY_INVALID"])
    const unknown = await app.request("POST", "/v1/policies/sync", { apiKey, body: { format: "cedar", version: "1", content: b64("forbid(principal, action, resource);"), extra: 1 } })
    expect(unknown.status).toBe(400)
  })
})

describe("evaluate and the decision log", () => {
  test("evaluate explains without side effects; bad input is 400 with details", async () => {
    const { apiKey } = await app.signup()
    const deny = await createRule(app, apiKey, { name: "no email", effect: "deny", scopes: ["email:send"] })
    const allow = await createRule(app, apiKey, { name: "reads", effect: "allow", priority: 100, scopes: ["email:read", "email:send"] })
    const res = await app.request("POST", "/v1/policies/evaluate", { apiKey, body: { agentId: "ag_1", principalId: "u1", scopes: ["email:send"] } })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ effect: "deny", policyId: deny.id, determiningPolicies: [deny.id], errors: [] })
    const allowed = await app.request("POST", "/v1/policies/evaluate", { apiKey, body: { agentId: "ag_1", principalId: "u1", scopes: ["email:read"] } })
    expect(allowed.body).toMatchObject({ effect: "allow", policyId: allow.id })
    const none = await app.request("POST", "/v1/policies/evaluate", { apiKey, body: { agentId: "ag_1", principalId: "u1", scopes: ["x"], action: "delegate" } })
    expect(none.body).toMatchObject({ effect: null, policyId: null, determiningPolicies: [] })
    expect((await app.request("GET", "/v1/policies/decisions", { apiKey })).body.decisions).toEqual([])
    const bad = await app.request("POST", "/v1/policies/evaluate", { apiKey, body: { agentId: "ag_1", principalId: "u1", scopes: ["x"], at: "yesterday" } })
    expect([bad.status, bad.body.details[0].path]).toEqual([400, "at"])
    expect((await app.request("GET", "/v1/policies/decisions?since=never", { apiKey })).status).toBe(400)
    expect((await app.request("GET", "/v1/policies/decisions?effect=maybe", { apiKey })).status).toBe(400)
  })
})
