/**
 * Scheduled erasure (decisions §21, DPDP Rule 8(2)) on TestClock: told 48 hours before, run at its
 * time by the DPDP fiber, cancellable until then; the one-year log hold purged at heldUntil.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { dpdpFiberPass } from "../../src/dpdp/ErasureWorker.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { developer, recordBody } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
})
afterAll(() => app.stop())

const HOUR = 3_600_000
const events = (developerId: string, type: string) =>
  app.query<{ data: any }>("SELECT data FROM events WHERE developer_id = $1 AND type = $2 ORDER BY created_at, id", [developerId, type])
    .then((rows) => rows.map((r) => r.data))

test("scheduled 72 h ahead: scheduled event at once, due event 48 h before (once), the erasure at its time; the hold purged after a year", async () => {
  const dev = await developer(app)
  const grant = await dev.grant("hank")
  // an audit entry naming them (the record's), which the one-year hold keeps
  const rec = await app.request("POST", "/v1/dpdp/consent-records", { apiKey: dev.apiKey, body: recordBody(grant.id, { dataPrincipalId: "hank" }) })
  expect(rec.status).toBe(201)
  const start = await app.now()
  const early = await app.request("POST", "/v1/dpdp/data-principals/hank/erasure", {
    apiKey: dev.apiKey, body: { scheduledFor: new Date(start + 47 * HOUR).toISOString() }
  })
  expect([early.status, early.body.code]).toEqual([400, "BAD_REQUEST"])
  const at = new Date(start + 72 * HOUR).toISOString()
  const res = await app.request("POST", "/v1/dpdp/data-principals/hank/erasure", { apiKey: dev.apiKey, body: { scheduledFor: at, reason: "retention" } })
  expect(res.status).toBe(201)
  expect(res.body).toMatchObject({ status: "scheduled", scheduledFor: at, dataPrincipalId: "hank", recordsErased: 0, grantsRevoked: 0 })
  const requestId = res.body.requestId
  expect(await events(dev.developerId, "dpdp.erasure.scheduled")).toEqual([{ requestId, pseudonym: res.body.pseudonym, scheduledFor: at }])
  // a repeat while scheduled: the same request
  const again = await app.request("POST", "/v1/dpdp/data-principals/hank/erasure", { apiKey: dev.apiKey })
  expect([again.status, again.body.requestId, again.body.status]).toEqual([200, requestId, "scheduled"])
  // the access summary shows it
  const access = await app.request("GET", "/v1/dpdp/data-principals/hank/records", { apiKey: dev.apiKey })
  expect(access.body.summary.erasures).toEqual([{ requestId, status: "scheduled", submittedAt: new Date(start).toISOString() }])

  expect(await app.run(dpdpFiberPass)).toMatchObject({ notified: 0, ran: 0 })
  await app.adjust("23 hours")
  expect(await app.run(dpdpFiberPass)).toMatchObject({ notified: 0, ran: 0 })
  await app.adjust("2 hours") // 47 h before
  expect(await app.run(dpdpFiberPass)).toMatchObject({ notified: 1, ran: 0 })
  expect(await app.run(dpdpFiberPass)).toMatchObject({ notified: 0, ran: 0 })
  expect(await events(dev.developerId, "dpdp.erasure.due")).toEqual([{ requestId, pseudonym: res.body.pseudonym, scheduledFor: at }])
  expect((await app.query("SELECT status, principal_id FROM grants WHERE id = $1", [grant.id]))[0]).toEqual({ status: "active", principalId: "hank" })

  await app.adjust("47 hours")
  expect(await app.run(dpdpFiberPass)).toMatchObject({ notified: 0, ran: 1 })
  expect((await app.query("SELECT status, principal_id FROM grants WHERE id = $1", [grant.id]))[0]).toEqual({ status: "revoked", principalId: res.body.pseudonym })
  const [row] = await app.query<any>("SELECT status, pending_principal_id, held_until FROM dpdp_erasures WHERE id = $1", [requestId])
  expect(row).toMatchObject({ status: "completed", pendingPrincipalId: null })
  // newest held entry (the record's, at start) + 365 days
  expect(row.heldUntil.toISOString()).toBe(new Date(start + 365 * 24 * HOUR).toISOString())
  expect((await app.request("GET", "/v1/audit/verify", { apiKey: dev.apiKey })).body).toMatchObject({ valid: true, linkOnlyEntries: 0 })

  // Rule 8(3): the hold stays a year (from the newest held entry), then goes with its event
  await app.adjust("360 days") // start + 363 days
  expect(await app.run(dpdpFiberPass)).toMatchObject({ purged: 0 })
  await app.adjust("3 days")
  expect(await app.run(dpdpFiberPass)).toMatchObject({ purged: 1 })
  expect(await app.query("SELECT erasure_id FROM dpdp_erasure_holds WHERE erasure_id = $1", [requestId])).toEqual([])
  expect(await events(dev.developerId, "dpdp.erasure.hold_purged")).toEqual([{ requestId }])
})

test("a scheduled erasure cancelled (the person came back) never runs; cancelling again or another developer's is 404", async () => {
  const dev = await developer(app)
  const other = await developer(app)
  const grant = await dev.grant("ivy")
  const at = new Date((await app.now()) + 49 * HOUR).toISOString()
  const res = await app.request("POST", "/v1/dpdp/data-principals/ivy/erasure", { apiKey: dev.apiKey, body: { scheduledFor: at } })
  expect(res.status).toBe(201)
  expect((await app.request("DELETE", `/v1/dpdp/erasures/${res.body.requestId}`, { apiKey: other.apiKey })).status).toBe(404)
  expect((await app.request("DELETE", `/v1/dpdp/erasures/${res.body.requestId}`, { apiKey: dev.apiKey })).status).toBe(204)
  expect((await app.request("DELETE", `/v1/dpdp/erasures/${res.body.requestId}`, { apiKey: dev.apiKey })).status).toBe(404)
  await app.adjust("50 hours")
  expect(await app.run(dpdpFiberPass)).toMatchObject({ ran: 0 })
  expect((await app.query("SELECT status, principal_id FROM grants WHERE id = $1", [grant.id]))[0]).toEqual({ status: "active", principalId: "ivy" })
  expect((await app.query<any>("SELECT pending_principal_id FROM dpdp_erasures WHERE id = $1", [res.body.requestId]))[0]).toEqual({ pendingPrincipalId: null })
  // a new erasure may be asked after a cancellation
  const now = await app.request("POST", "/v1/dpdp/data-principals/ivy/erasure", { apiKey: dev.apiKey })
  expect([now.status, now.body.status]).toEqual([201, "completed"])
  expect(now.body.requestId).not.toBe(res.body.requestId)
})
