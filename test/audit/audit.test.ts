/** The main audit chain over HTTP: append, read, verify; concurrent appends never fork it. */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
beforeAll(async () => {
  app = await startTestApp()
  dev = await app.signup({ plan: "enterprise" })
})
afterAll(() => app.stop())

const entry = (action = "email.read") => ({
  agentId: "ag_1", agentDid: "did:service:ag_1", grantId: "grnt_1", principalId: "user_1", action, metadata: { b: 1, a: [1, 2] }
})

test("append, get, list, verify; service.* actions are reserved", async () => {
  const first = await app.request("POST", "/v1/audit/log", { apiKey: dev.apiKey, body: entry() })
  expect(first.status).toBe(201)
  expect(first.body).toMatchObject({ action: "email.read", status: "success", prevHash: null, developerId: dev.developerId })
  expect(first.body.hash).toMatch(/^[0-9a-f]{64}$/)
  const second = await app.request("POST", "/v1/audit/log", { apiKey: dev.apiKey, body: { ...entry("email.send"), status: "blocked" } })
  expect(second.body.prevHash).toBe(first.body.hash)
  expect((await app.request("GET", `/v1/audit/${first.body.entryId}`, { apiKey: dev.apiKey })).body).toEqual(first.body)
  const list = await app.request("GET", "/v1/audit/entries?action=email.send", { apiKey: dev.apiKey })
  expect(list.body.entries.map((e: any) => e.entryId)).toEqual([second.body.entryId])
  expect((await app.request("GET", "/v1/audit/verify", { apiKey: dev.apiKey })).body).toEqual({ valid: true, checkedEntries: 2, firstBrokenAt: null, erasedEntries: 0, linkOnlyEntries: 0 })
  const reserved = await app.request("POST", "/v1/audit/log", { apiKey: dev.apiKey, body: entry("service.dpdp.breach_recorded") })
  expect(reserved.status).toBe(400)
  expect(reserved.body.code).toBe("BAD_REQUEST")
  // §3: no control characters (C0, DEL, C1); nothing is appended for a refused one
  for (const action of ["send\u0007mail", "send\nmail", "tab\there", "del\u007f", "c1\u0085"]) {
    const refused = await app.request("POST", "/v1/audit/log", { apiKey: dev.apiKey, body: entry(action) })
    expect([JSON.stringify(action), refused.status, refused.body.code]).toEqual([JSON.stringify(action), 400, "BAD_REQUEST"])
  }
  // what §3 allows beyond the dotted form
  for (const action of ["gmail/send", "Send Email", "envoyé ✉"]) {
    expect((await app.request("POST", "/v1/audit/log", { apiKey: dev.apiKey, body: entry(action) })).status).toBe(201)
  }
  expect((await app.request("GET", "/v1/audit/verify", { apiKey: dev.apiKey })).body).toEqual({ valid: true, checkedEntries: 5, firstBrokenAt: null, erasedEntries: 0, linkOnlyEntries: 0 })
  const other = await app.signup()
  expect((await app.request("GET", `/v1/audit/${first.body.entryId}`, { apiKey: other.apiKey })).status).toBe(404)
  expect((await app.request("GET", "/v1/audit/entries", { apiKey: other.apiKey })).body.entries).toEqual([])
})

test("50 concurrent appends on one developer leave a valid chain of 50", async () => {
  const d = await app.signup({ plan: "enterprise" })
  const results = await Promise.all(Array.from({ length: 50 }, (_, i) =>
    app.request("POST", "/v1/audit/log", { apiKey: d.apiKey, body: entry(`act.n${i}`) })))
  expect(results.filter((r) => r.status !== 201).map((r) => `${r.status} ${r.text}`)).toEqual([])
  expect((await app.request("GET", "/v1/audit/verify", { apiKey: d.apiKey })).body).toEqual({ valid: true, checkedEntries: 50, firstBrokenAt: null, erasedEntries: 0, linkOnlyEntries: 0 })
  const hashes = new Set(results.map((r) => r.body.prevHash))
  expect(hashes.size).toBe(50) // no two entries share a predecessor: the chain did not fork
})

test("a tampered entry is reported as the first broken one", async () => {
  const d = await app.signup({ plan: "enterprise" })
  const ids: Array<string> = []
  for (let i = 0; i < 4; i++) ids.push((await app.request("POST", "/v1/audit/log", { apiKey: d.apiKey, body: entry() })).body.entryId)
  await app.query(`UPDATE audit_log SET metadata = '{"b":2}'::jsonb WHERE id = $1`, [ids[2]])
  expect((await app.request("GET", "/v1/audit/verify", { apiKey: d.apiKey })).body).toEqual({ valid: false, checkedEntries: 2, firstBrokenAt: ids[2], erasedEntries: 0, linkOnlyEntries: 0 })
})

test("entries deleted from the end of the chain are found: the walk must end on the stored head", async () => {
  const d = await app.signup({ plan: "enterprise" })
  const ids: Array<string> = []
  for (let i = 0; i < 4; i++) ids.push((await app.request("POST", "/v1/audit/log", { apiKey: d.apiKey, body: entry() })).body.entryId)
  expect((await app.request("GET", "/v1/audit/verify", { apiKey: d.apiKey })).body).toEqual({ valid: true, checkedEntries: 4, firstBrokenAt: null, erasedEntries: 0, linkOnlyEntries: 0 })
  // every remaining link is intact; only the head knows two entries are missing
  await app.query("DELETE FROM audit_log WHERE id = ANY($1)", [ids.slice(2)])
  expect((await app.request("GET", "/v1/audit/verify", { apiKey: d.apiKey })).body).toEqual({ valid: false, checkedEntries: 2, firstBrokenAt: null, erasedEntries: 0, linkOnlyEntries: 0 })
})
