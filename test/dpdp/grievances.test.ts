/** DPDP grievances (decisions §21): 202 with a GRV- reference and a 7-day target, states and transitions, lists, 404s. */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { developer, recordBody } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
})
afterAll(() => app.stop())

const file = (apiKey: string, over: Record<string, unknown> = {}) =>
  app.request("POST", "/v1/dpdp/grievances", { apiKey, body: { dataPrincipalId: "user_1", type: "consent-violation", description: "Used after I withdrew", ...over } })

test("202 with the published shape: GRV-<year>-<ULID>, 7-day target, 90-day limit; stored with its history, event and audit entry", async () => {
  const dev = await developer(app)
  const res = await file(dev.apiKey, { evidence: { screenshot: "s1" } })
  expect(res.status).toBe(202)
  expect(res.body.grievanceId).toMatch(/^grv_[0-9A-Z]{26}$/)
  expect(res.body.referenceNumber).toMatch(/^GRV-2026-[0-9A-Z]{26}$/)
  expect(res.body).toMatchObject({
    type: "consent-violation", status: "submitted", expectedResolutionBy: "2026-11-29T10:00:00.000Z",
    statutoryDueAt: "2027-02-20T10:00:00.000Z", createdAt: "2026-11-22T10:00:00.000Z"
  })
  const read = await app.request("GET", `/v1/dpdp/grievances/${res.body.grievanceId}`, { apiKey: dev.apiKey })
  expect(read.body).toMatchObject({
    grievanceId: res.body.grievanceId, dataPrincipalId: "user_1", recordId: null, description: "Used after I withdrew",
    evidence: { screenshot: "s1" }, resolvedAt: null, resolution: null, outcome: null,
    history: [{ status: "submitted", at: "2026-11-22T10:00:00.000Z" }]
  })
  const events = await app.query<{ data: any }>("SELECT data FROM events WHERE developer_id = $1 AND type = 'dpdp.grievance.filed'", [dev.developerId])
  expect(events.map((e) => e.data)).toEqual([{ grievanceId: res.body.grievanceId, referenceNumber: res.body.referenceNumber, type: "consent-violation", dataPrincipalId: "user_1" }])
  const audit = await app.query<any>("SELECT principal_id, metadata FROM audit_log WHERE developer_id = $1 AND action = 'service.dpdp.grievance_filed'", [dev.developerId])
  expect(audit[0].principalId).toBe("user_1")
  expect(JSON.stringify(audit)).not.toContain("withdrew")
})

test("400s, INVALID_RECORD without an oracle, 404 for another developer's grievance", async () => {
  const dev = await developer(app)
  const other = await developer(app)
  expect((await file(dev.apiKey, { description: "" })).body).toMatchObject({ code: "BAD_REQUEST", details: [{ path: "description" }] })
  expect((await file(dev.apiKey, { type: "Data Breach" })).status).toBe(400)
  expect((await file(dev.apiKey, { evidence: { blob: "x".repeat(17_000) } })).status).toBe(400)
  const grant = await dev.grant("user_1")
  const recordId = (await app.request("POST", "/v1/dpdp/consent-records", { apiKey: dev.apiKey, body: recordBody(grant.id) })).body.recordId
  for (const [apiKey, over] of [[other.apiKey, {}], [dev.apiKey, { dataPrincipalId: "someone-else" }], [dev.apiKey, { recordId: "crec_unknown" }]] as const) {
    const res = await file(apiKey, { recordId, ...over })
    expect([res.status, res.body.code]).toEqual([400, "INVALID_RECORD"])
  }
  const linked = await file(dev.apiKey, { recordId })
  expect(linked.status).toBe(202)
  const foreign = await app.request("GET", `/v1/dpdp/grievances/${linked.body.grievanceId}`, { apiKey: other.apiKey })
  expect([foreign.status, foreign.body.code]).toEqual([404, "NOT_FOUND"])
  const patchForeign = await app.request("PATCH", `/v1/dpdp/grievances/${linked.body.grievanceId}`, { apiKey: other.apiKey, body: { status: "under_review" } })
  expect(patchForeign.status).toBe(404)
  expect(await app.query("SELECT id FROM dpdp_grievances WHERE developer_id = $1", [other.developerId])).toEqual([])
})

test("submitted → under_review → resolved (needs resolution and outcome), escalated from resolved; other moves 409", async () => {
  const dev = await developer(app)
  const id = (await file(dev.apiKey)).body.grievanceId
  const patch = (body: unknown) => app.request("PATCH", `/v1/dpdp/grievances/${id}`, { apiKey: dev.apiKey, body })
  const skip = await patch({ status: "resolved", resolution: "r", outcome: "upheld" })
  expect([skip.status, skip.body.code]).toEqual([409, "INVALID_TRANSITION"])
  await app.adjust("1 day")
  expect((await patch({ status: "under_review", note: "looking" })).body).toMatchObject({ status: "under_review", updatedAt: "2026-11-23T10:00:00.000Z" })
  const noOutcome = await patch({ status: "resolved", resolution: "Deleted" })
  expect([noOutcome.status, noOutcome.body.details[0].path]).toEqual([400, "outcome"])
  expect((await patch({ status: "under_review", extra: 1 })).status).toBe(400)
  await app.adjust("1 day")
  const resolved = await patch({ status: "resolved", resolution: "Processing stopped", outcome: "upheld" })
  expect(resolved.body).toMatchObject({ status: "resolved", outcome: "upheld", resolution: "Processing stopped", resolvedAt: "2026-11-24T10:00:00.000Z" })
  expect(resolved.body.history.map((h: any) => h.status)).toEqual(["submitted", "under_review", "resolved"])
  expect((await patch({ status: "under_review" })).body.code).toBe("INVALID_TRANSITION")
  await app.adjust("1 day")
  expect((await patch({ status: "escalated" })).body.status).toBe("escalated")
  expect((await patch({ status: "escalated" })).body.code).toBe("INVALID_TRANSITION")
  const events = await app.query<{ data: any }>("SELECT data FROM events WHERE developer_id = $1 AND type = 'dpdp.grievance.updated' ORDER BY created_at, id", [dev.developerId])
  expect(events.map((e) => e.data)).toEqual([
    { grievanceId: id, status: "under_review", previousStatus: "submitted" },
    { grievanceId: id, status: "resolved", previousStatus: "under_review" },
    { grievanceId: id, status: "escalated", previousStatus: "resolved" }
  ])
  expect(JSON.stringify(events)).not.toContain("Processing stopped")
})

test("lists: status, principal and overdue filters, cursor; at most 100 open per principal", async () => {
  const dev = await developer(app)
  const a = (await file(dev.apiKey, { dataPrincipalId: "p-a" })).body.grievanceId
  await app.adjust("91 days")
  const b = (await file(dev.apiKey, { dataPrincipalId: "p-b" })).body.grievanceId
  const list = async (query: string) =>
    (await app.request("GET", `/v1/dpdp/grievances${query}`, { apiKey: dev.apiKey })).body.grievances.map((g: any) => g.grievanceId)
  expect(await list("")).toEqual([b, a])
  expect(await list("?overdue=true")).toEqual([a])
  expect(await list("?dataPrincipalId=p-b")).toEqual([b])
  expect(await list("?status=resolved")).toEqual([])
  const page = await app.request("GET", "/v1/dpdp/grievances?limit=1", { apiKey: dev.apiKey })
  expect(await list(`?limit=1&cursor=${page.body.nextCursor}`)).toEqual([a])

  await app.query(
    `INSERT INTO dpdp_grievances (id, developer_id, reference_number, data_principal_id, type, description, status, expected_resolution_by, statutory_due_at, created_at)
     SELECT 'grv_cap' || i, $1, 'GRV-cap-' || i, 'p-cap', 'other', 'd', 'submitted', now(), now(), now() FROM generate_series(1, 100) i`,
    [dev.developerId]
  )
  const capped = await file(dev.apiKey, { dataPrincipalId: "p-cap" })
  expect([capped.status, capped.body.code]).toEqual([409, "TOO_MANY_OPEN_GRIEVANCES"])
})
