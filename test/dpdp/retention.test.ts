/**
 * Retention (decisions §21) on TestClock: the DPDP fiber deletes records past retentionUntil and
 * grievances resolved longer ago than consentRecordRetentionDays; their audit entries remain.
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

test("retention: a record past retentionUntil and a grievance resolved longer ago than the retention days are deleted by the fiber; their audit entries stay and verify", async () => {
  const dev = await developer(app)
  expect((await app.request("PATCH", "/v1/dpdp/settings", { apiKey: dev.apiKey, body: { consentRecordRetentionDays: 30 } })).status).toBe(200)
  const start = await app.now()
  const grant = await dev.grant("nia")
  const rec = await app.request("POST", "/v1/dpdp/consent-records", {
    apiKey: dev.apiKey, body: recordBody(grant.id, { dataPrincipalId: "nia", processingExpiresAt: new Date(start + 24 * HOUR).toISOString() })
  })
  expect(rec.body.retentionUntil).toBe(new Date(start + 31 * 24 * HOUR).toISOString())
  const g = await app.request("POST", "/v1/dpdp/grievances", { apiKey: dev.apiKey, body: { dataPrincipalId: "nia", type: "violation", description: "x", recordId: rec.body.recordId } })
  expect(g.status).toBe(202)
  expect((await app.request("PATCH", `/v1/dpdp/grievances/${g.body.grievanceId}`, { apiKey: dev.apiKey, body: { status: "under_review" } })).status).toBe(200)
  expect((await app.request("PATCH", `/v1/dpdp/grievances/${g.body.grievanceId}`, {
    apiKey: dev.apiKey, body: { status: "resolved", resolution: "fixed", outcome: "upheld" }
  })).status).toBe(200)
  await app.adjust("29 days")
  expect(await app.run(dpdpFiberPass)).toMatchObject({ recordsDeleted: 0, grievancesDeleted: 0 })
  await app.adjust("2 days") // past both: resolved + 30 days, processingExpiresAt + 30 days
  expect(await app.run(dpdpFiberPass)).toMatchObject({ recordsDeleted: 1, grievancesDeleted: 1 })
  expect((await app.request("GET", `/v1/dpdp/consent-records/${rec.body.recordId}`, { apiKey: dev.apiKey })).status).toBe(404)
  expect((await app.request("GET", `/v1/dpdp/grievances/${g.body.grievanceId}`, { apiKey: dev.apiKey })).status).toBe(404)
  expect(await app.query("SELECT 1 FROM audit_log WHERE developer_id = $1 AND action = 'service.dpdp.consent_recorded'", [dev.developerId])).toHaveLength(1)
  expect((await app.request("GET", "/v1/audit/verify", { apiKey: dev.apiKey })).body.valid).toBe(true)
})
