/** The DPDP breach register: lifecycle, every bad input at its boundary, transitions, isolation. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"

const T0 = Date.parse("2026-11-22T10:00:00.000Z")
let app: TestApp
let dev: { apiKey: string; developerId: string }
beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: T0 })
  dev = await app.signup({ plan: "enterprise" })
})
afterAll(() => app.stop())

const base = { description: "Laptop stolen", nature: "Loss of device", extent: "Customer records" }
const record = (body: Record<string, unknown>, apiKey = dev.apiKey) => app.request("POST", "/v1/dpdp/breaches", { apiKey, body })
const patch = (id: string, body: unknown, apiKey = dev.apiKey) => app.request("PATCH", `/v1/dpdp/breaches/${id}`, { apiKey, body })
const report = { updatedDetails: "u", factsCircumstancesReasons: "f", mitigation: "m", causeFindings: "c", remedialMeasures: "r" }
const expectBad = async (res: Promise<{ status: number; body: any }>, code = "BAD_REQUEST") => {
  const r = await res
  expect([r.status, r.body.code]).toEqual([code === "BAD_REQUEST" || code === "REPORT_INCOMPLETE" ? 400 : 409, code])
  expect(typeof r.body.message).toBe("string")
}

describe("record", () => {
  test("201 with every field and default; events and audit entry carry no ids or text", async () => {
    const res = await record({ ...base, affectedDataPrincipalIds: ["p1", "p2"], occurredAt: "2026-11-21T08:00:00Z", location: "Pune" })
    expect(res.status).toBe(201)
    expect(res.body).toEqual({
      breachId: expect.stringMatching(/^brch_/),
      status: "open",
      ...base,
      occurredAt: "2026-11-21T08:00:00.000Z",
      awareAt: "2026-11-22T10:00:00.000Z",
      location: "Pune",
      likelyImpact: null,
      affectedCount: 2,
      affectedDataPrincipalIds: ["p1", "p2"],
      mitigation: null,
      detailedReport: { updatedDetails: null, factsCircumstancesReasons: null, mitigation: null, causeFindings: null, remedialMeasures: null },
      boardInitialIntimationRequired: true,
      boardInitialIntimationSentAt: null,
      boardDetailedReportDueAt: "2026-11-25T10:00:00.000Z",
      boardDetailedReportSentAt: null,
      boardDetailedReportOverdue: false,
      boardDetailedReportLate: false,
      extension: null,
      principalIntimationRequired: true,
      principalIntimation: { due: "without_delay", intimatedCount: 0, pendingCount: 2, lastIntimatedAt: null },
      principalIntimations: [],
      createdAt: "2026-11-22T10:00:00.000Z",
      updatedAt: null,
      closedAt: null
    })
    const events = await app.query<{ type: string; data: any }>("SELECT type, data FROM events WHERE data->>'breachId' = $1 ORDER BY type", [res.body.breachId])
    expect(events).toEqual([
      { type: "dpdp.breach.principal_intimation_due", data: { breachId: res.body.breachId, awareAt: "2026-11-22T10:00:00.000Z", affectedCount: 2, due: "without_delay" } },
      { type: "dpdp.breach.recorded", data: { breachId: res.body.breachId, status: "open", awareAt: "2026-11-22T10:00:00.000Z", affectedCount: 2, boardDetailedReportDueAt: "2026-11-25T10:00:00.000Z" } }
    ])
    const audit = await app.query<{ action: string; metadata: any }>("SELECT action, metadata FROM audit_log WHERE metadata->>'breachId' = $1", [res.body.breachId])
    expect(audit.map((a) => a.action)).toEqual(["service.dpdp.breach_recorded"])
    const text = JSON.stringify([events, audit])
    for (const secret of ["p1", "Laptop", "Pune", "Customer records"]) expect(text).not.toContain(secret)
  })

  test("a count alone: pendingCount null", async () => {
    const res = await record({ ...base, affectedCount: 500 })
    expect(res.body.affectedCount).toBe(500)
    expect(res.body.principalIntimation.pendingCount).toBeNull()
    expect(res.body.affectedDataPrincipalIds).toEqual([])
  })

  test("every BAD_REQUEST row at its boundary", async () => {
    const ok = { ...base, affectedCount: 1 }
    await expectBad(record({ ...ok, description: undefined }))
    await expectBad(record({ ...ok, nature: 5 }))
    await expectBad(record({ ...ok, unexpected: true }))
    for (const [field, max] of [["description", 5000], ["extent", 5000], ["likelyImpact", 5000], ["mitigation", 5000], ["nature", 1000], ["location", 1000]] as const) {
      expect((await record({ ...ok, [field]: "x".repeat(max) })).status).toBe(201)
      await expectBad(record({ ...ok, [field]: "x".repeat(max + 1) }))
    }
    // future times: 5 minutes of clock skew allowed
    expect((await record({ ...ok, awareAt: new Date(T0 + 5 * 60_000).toISOString() })).status).toBe(201)
    await expectBad(record({ ...ok, awareAt: new Date(T0 + 5 * 60_000 + 1000).toISOString() }))
    await expectBad(record({ ...ok, occurredAt: new Date(T0 + 10 * 60_000).toISOString() }))
    await expectBad(record({ ...ok, occurredAt: "2026-11-22T09:00:00Z", awareAt: "2026-11-22T08:00:00Z" }))
    await expectBad(record({ ...ok, awareAt: "yesterday" }))
    // dates that do not exist are refused, not rolled over to the next month (the deadline comes from awareAt)
    for (const awareAt of ["2025-02-30T00:00:00Z", "2023-02-29T10:00Z", "2025-04-31T12:00:00+05:30", "2025-01-01T24:00:00Z", "2025-01-01T10:60:00Z"]) {
      await expectBad(record({ ...ok, awareAt }))
    }
    expect((await record({ ...ok, awareAt: "2024-02-29T23:59:59.999Z" })).status).toBe(201)
    // limits count characters: 5,000 emoji are 5,000 characters (10,000 UTF-16 units)
    expect((await record({ ...ok, description: "😀".repeat(5000) })).status).toBe(201)
    await expectBad(record({ ...ok, description: "😀".repeat(5001) }))
    // a count the register cannot hold is a field error, not a database one
    const huge = await record({ ...base, affectedCount: 2 ** 31 })
    expect([huge.status, huge.body.code, huge.body.message]).toEqual([400, "BAD_REQUEST", "affectedCount may be at most 2147483647"])
    await expectBad(record({ ...base }))
    await expectBad(record({ ...base, affectedDataPrincipalIds: ["a", "b"], affectedCount: 1 }))
    await expectBad(record({ ...base, affectedCount: -1 }))
    await expectBad(record({ ...base, affectedCount: 1.5 }))
    const ids = Array.from({ length: 10_000 }, (_, i) => `p${i}`)
    expect((await record({ ...base, affectedDataPrincipalIds: ids })).body.affectedCount).toBe(10_000)
    await expectBad(record({ ...base, affectedDataPrincipalIds: [...ids, "one-too-many"] }))
    await expectBad(app.request("POST", "/v1/dpdp/breaches", { apiKey: dev.apiKey, rawBody: "[1,2]" }))
    expect((await app.request("POST", "/v1/dpdp/breaches", { body: base })).status).toBe(401)
  })
})

describe("update", () => {
  test("the whole lifecycle with side fields; REPORT_INCOMPLETE; INVALID_TRANSITION; BREACH_CLOSED", async () => {
    const id = (await record({ ...base, affectedCount: 3 })).body.breachId
    await expectBad(patch(id, { status: "reported" }), "INVALID_TRANSITION")
    await expectBad(patch(id, { status: "closed" }), "INVALID_TRANSITION")
    await app.adjust("1 hour")
    const intimated = await patch(id, { status: "initial_intimated" })
    expect(intimated.status).toBe(200)
    expect(intimated.body.status).toBe("initial_intimated")
    expect(intimated.body.boardInitialIntimationSentAt).toBe(new Date(T0 + 3600_000).toISOString())
    expect(intimated.body.principalIntimations).toBeUndefined()
    await expectBad(patch(id, { status: "initial_intimated" }), "INVALID_TRANSITION")
    await expectBad(patch(id, { status: "reported", detailedReport: { updatedDetails: "only one" } }), "REPORT_INCOMPLETE")
    // the failed update changed nothing
    expect((await app.request("GET", `/v1/dpdp/breaches/${id}`, { apiKey: dev.apiKey })).body.detailedReport.updatedDetails).toBeNull()
    const partial = await patch(id, { detailedReport: { updatedDetails: "u", causeFindings: "c" } })
    expect(partial.body.detailedReport).toMatchObject({ updatedDetails: "u", causeFindings: "c", mitigation: null })
    const reported = await patch(id, { status: "reported", detailedReport: { factsCircumstancesReasons: "f", mitigation: "m", remedialMeasures: "r" } })
    expect(reported.status).toBe(200)
    expect(reported.body.boardDetailedReportSentAt).toBe(new Date(T0 + 3600_000).toISOString())
    expect(reported.body.boardDetailedReportLate).toBe(false)
    const closed = await patch(id, { status: "closed" })
    expect(closed.body.status).toBe("closed")
    expect(closed.body.closedAt).not.toBeNull()
    await expectBad(patch(id, { detailedReport: { mitigation: "late" } }), "BREACH_CLOSED")
    await expectBad(patch(id, { status: "closed" }), "BREACH_CLOSED")
    // whatever the body: a closed breach answers 409 before the body is judged
    for (const body of [{}, { unknown: 1 }, { boardDetailedReportSentAt: "2020-01-01T00:00:00Z" }, { boardInitialIntimationSentAt: "nope" }]) {
      await expectBad(patch(id, body), "BREACH_CLOSED")
    }
    const actions = await app.query<{ action: string }>("SELECT action FROM audit_log WHERE metadata->>'breachId' = $1 ORDER BY seq", [id])
    expect(actions.map((a) => a.action)).toEqual(["service.dpdp.breach_recorded", ...Array(4).fill("service.dpdp.breach_updated")])
  })

  test("bad updates: nothing, unknown field, malformed or early or future times, extension without newDueAt", async () => {
    const created = (await record({ ...base, affectedCount: 1, awareAt: new Date(T0 - 86_400_000).toISOString() })).body
    const id = created.breachId
    await expectBad(patch(id, {}))
    await expectBad(patch(id, { colour: "red" }))
    await expectBad(patch(id, { detailedReport: { other: "x" } }))
    await expectBad(patch(id, { detailedReport: { mitigation: "x".repeat(5001) } }))
    expect((await patch(id, { detailedReport: { mitigation: "x".repeat(5000) } })).status).toBe(200)
    await expectBad(patch(id, { status: "archived" }))
    await expectBad(patch(id, { boardInitialIntimationSentAt: "not a time" }))
    await expectBad(patch(id, { boardInitialIntimationSentAt: new Date(T0 - 2 * 86_400_000).toISOString() }))
    const now = await app.run(Clockless)
    await expectBad(patch(id, { boardDetailedReportSentAt: new Date(now + 6 * 60_000).toISOString() }))
    await expectBad(patch(id, { extension: { granted: true } }))
    await expectBad(patch(id, { extension: { granted: true, newDueAt: new Date(T0 - 2 * 86_400_000).toISOString() } }))
    await expectBad(patch(id, { extension: { granted: "yes" } }))
    expect((await patch("brch_missing", { status: "closed" })).status).toBe(404)
    const given = await patch(id, { status: "initial_intimated", boardInitialIntimationSentAt: new Date(T0 - 3600_000).toISOString() })
    expect(given.body.boardInitialIntimationSentAt).toBe(new Date(T0 - 3600_000).toISOString())
  })

  test("extension granted moves the deadline; overdue and late follow it", async () => {
    const awareAt = new Date(T0 - 80 * 3600_000).toISOString()
    const created = (await record({ ...base, affectedCount: 1, awareAt })).body
    expect(created.boardDetailedReportOverdue).toBe(true)
    const extended = await patch(created.breachId, { extension: { granted: true, newDueAt: new Date(T0 + 48 * 3600_000).toISOString() } })
    expect(extended.body.boardDetailedReportDueAt).toBe(new Date(T0 + 48 * 3600_000).toISOString())
    expect(extended.body.boardDetailedReportOverdue).toBe(false)
    expect(extended.body.extension).toEqual({ requestedAt: new Date(await app.run(Clockless)).toISOString(), granted: true, newDueAt: new Date(T0 + 48 * 3600_000).toISOString() })
    const refused = await patch(created.breachId, { extension: { granted: false } })
    expect(refused.body.boardDetailedReportDueAt).toBe(new Date(Date.parse(awareAt) + 72 * 3600_000).toISOString())
    await patch(created.breachId, { status: "initial_intimated" })
    const late = await patch(created.breachId, { status: "reported", detailedReport: report })
    expect(late.body.boardDetailedReportLate).toBe(true)
    expect(late.body.boardDetailedReportOverdue).toBe(false)
  })
})

import { Clock } from "effect"
const Clockless = Clock.currentTimeMillis

describe("intimations, lists, isolation", () => {
  test("record intimations: counts, content missing, listed ids only; newest first in the breach", async () => {
    const id = (await record({ ...base, affectedDataPrincipalIds: ["a", "b", "c"] })).body.breachId
    const first = await app.request("POST", `/v1/dpdp/breaches/${id}/principal-intimations`, {
      apiKey: dev.apiKey, body: { dataPrincipalIds: ["a", "b"], channel: "email", contentIncluded: ["description", "contact"] }
    })
    expect(first.status).toBe(201)
    expect(first.body).toMatchObject({
      breachId: id, channel: "email", principalCount: 2, contentIncluded: ["description", "contact"],
      contentMissing: ["likely_consequences", "mitigation", "safety_measures"],
      principalIntimation: { due: "without_delay", intimatedCount: 2, pendingCount: 1 }
    })
    await app.adjust("1 second")
    const second = await app.request("POST", `/v1/dpdp/breaches/${id}/principal-intimations`, {
      apiKey: dev.apiKey, body: { dataPrincipalIds: ["b", "c"], channel: "sms", contentIncluded: [] }
    })
    expect(second.body.principalIntimation).toMatchObject({ intimatedCount: 3, pendingCount: 0 })
    const stranger = await app.request("POST", `/v1/dpdp/breaches/${id}/principal-intimations`, {
      apiKey: dev.apiKey, body: { dataPrincipalIds: ["zzz"], channel: "sms", contentIncluded: [] }
    })
    expect(stranger.status).toBe(400)
    for (const body of [{ dataPrincipalIds: [], channel: "sms", contentIncluded: [] }, { dataPrincipalIds: ["a"], channel: "sms", contentIncluded: ["gossip"] }, { dataPrincipalIds: ["a"], contentIncluded: [] }]) {
      expect((await app.request("POST", `/v1/dpdp/breaches/${id}/principal-intimations`, { apiKey: dev.apiKey, body })).status).toBe(400)
    }
    const got = await app.request("GET", `/v1/dpdp/breaches/${id}`, { apiKey: dev.apiKey })
    expect(got.body.principalIntimations.map((i: any) => i.intimationId)).toEqual([second.body.intimationId, first.body.intimationId])
    const audit = await app.query<{ metadata: any }>("SELECT metadata FROM audit_log WHERE action = 'service.dpdp.breach_principals_intimated' AND metadata->>'breachId' = $1", [id])
    expect(audit).toHaveLength(2)
    expect(JSON.stringify(audit)).not.toContain('"a"')
  })

  test("list: status filter, cursor, no principal ids; another developer sees nothing and gets 404", async () => {
    const d = await app.signup({ plan: "enterprise" })
    const ids: Array<string> = []
    for (let i = 0; i < 3; i++) {
      ids.push((await record({ ...base, affectedDataPrincipalIds: ["x"] }, d.apiKey)).body.breachId)
      await app.adjust("1 second")
    }
    await patch(ids[0]!, { status: "initial_intimated" }, d.apiKey)
    const page = await app.request("GET", "/v1/dpdp/breaches?limit=2", { apiKey: d.apiKey })
    expect(page.body.breaches.map((b: any) => b.breachId)).toEqual([ids[2], ids[1]])
    expect(page.body.breaches[0].affectedDataPrincipalIds).toBeUndefined()
    const rest = await app.request("GET", `/v1/dpdp/breaches?limit=2&cursor=${page.body.nextCursor}`, { apiKey: d.apiKey })
    expect(rest.body).toMatchObject({ nextCursor: null })
    expect(rest.body.breaches.map((b: any) => b.breachId)).toEqual([ids[0]])
    const filtered = await app.request("GET", "/v1/dpdp/breaches?status=initial_intimated", { apiKey: d.apiKey })
    expect(filtered.body.breaches.map((b: any) => b.breachId)).toEqual([ids[0]])
    const other = await app.signup()
    expect((await app.request("GET", "/v1/dpdp/breaches", { apiKey: other.apiKey })).body.breaches).toEqual([])
    expect((await app.request("GET", `/v1/dpdp/breaches/${ids[0]}`, { apiKey: other.apiKey })).status).toBe(404)
    expect((await patch(ids[0]!, { status: "reported" }, other.apiKey)).status).toBe(404)
    expect((await app.request("POST", `/v1/dpdp/breaches/${ids[0]}/principal-intimations`, { apiKey: other.apiKey, body: { dataPrincipalIds: ["x"], channel: "e", contentIncluded: [] } })).status).toBe(404)
  })
})
