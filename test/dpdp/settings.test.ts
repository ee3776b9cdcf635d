/**
 * DPDP settings (decisions §21) and what they change, the notice plan cap, and the compliance
 * summary's dpdp block.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { developer, NOTICE, recordBody } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
})
afterAll(() => app.stop())

const DEFAULTS = {
  grievanceResponseDays: 7, erasureLogHoldDays: 365, consentRecordRetentionDays: 2555, defaultConsentNoticeId: null,
  strictWithdrawal: false, requireCompleteNotices: false, withdrawalUrl: null, boardComplaintUrl: null
}

test("defaults; bad patches 400 and change nothing; a patch answers the settings and names only the changed fields on the chain", async () => {
  const dev = await developer(app)
  expect((await app.request("GET", "/v1/dpdp/settings", { apiKey: dev.apiKey })).body).toEqual(DEFAULTS)
  for (const body of [{ colour: "red" }, { grievanceResponseDays: 91 }, { consentRecordRetentionDays: 29 }, { strictWithdrawal: "yes" }, { withdrawalUrl: "http://x.example" }]) {
    const res = await app.request("PATCH", "/v1/dpdp/settings", { apiKey: dev.apiKey, body })
    expect([res.status, res.body.code]).toEqual([400, "BAD_REQUEST"])
  }
  const unknownNotice = await app.request("PATCH", "/v1/dpdp/settings", { apiKey: dev.apiKey, body: { defaultConsentNoticeId: "nope" } })
  expect([unknownNotice.status, unknownNotice.body.code]).toEqual([400, "INVALID_NOTICE"])
  expect((await app.request("GET", "/v1/dpdp/settings", { apiKey: dev.apiKey })).body).toEqual(DEFAULTS)

  const res = await app.request("PATCH", "/v1/dpdp/settings", {
    apiKey: dev.apiKey, body: { grievanceResponseDays: 10, strictWithdrawal: true, withdrawalUrl: "https://acme.example/withdraw", erasureLogHoldDays: 365 }
  })
  expect(res.status).toBe(200)
  expect(res.body).toEqual({ ...DEFAULTS, grievanceResponseDays: 10, strictWithdrawal: true, withdrawalUrl: "https://acme.example/withdraw" })
  const audit = await app.query<any>("SELECT metadata FROM audit_log WHERE developer_id = $1 AND action = 'service.dpdp.settings_changed'", [dev.developerId])
  expect(audit.map((a) => a.metadata)).toEqual([{ changed: ["grievanceResponseDays", "strictWithdrawal", "withdrawalUrl"] }])

  // the grievance target follows the setting; the 90-day outer limit does not move
  const g = await app.request("POST", "/v1/dpdp/grievances", { apiKey: dev.apiKey, body: { dataPrincipalId: "user_1", type: "violation", description: "x" } })
  expect(g.body).toMatchObject({ expectedResolutionBy: "2026-12-02T10:00:00.000Z", statutoryDueAt: "2027-02-20T10:00:00.000Z" })
  // strictWithdrawal: an explicit revokeGrant false still revokes, and the answer says so
  const grant = await dev.grant()
  const rec = await app.request("POST", "/v1/dpdp/consent-records", { apiKey: dev.apiKey, body: recordBody(grant.id) })
  const w = await app.request("POST", `/v1/dpdp/consent-records/${rec.body.recordId}/withdraw`, { apiKey: dev.apiKey, body: { reason: "r", revokeGrant: false } })
  expect(w.body).toMatchObject({ grantRevoked: true, revokedGrantIds: [grant.id], grantsLeftActive: [] })
})

test("requireCompleteNotices: an incomplete notice is 422 NOTICE_INCOMPLETE naming what Rule 3 asks; retention days set retentionUntil", async () => {
  const dev = await developer(app)
  await app.request("PATCH", "/v1/dpdp/settings", { apiKey: dev.apiKey, body: { requireCompleteNotices: true, consentRecordRetentionDays: 30 } })
  const res = await app.request("POST", "/v1/dpdp/consent-notices", { apiKey: dev.apiKey, body: { ...NOTICE, version: "2" } })
  expect([res.status, res.body.code]).toEqual([422, "NOTICE_INCOMPLETE"])
  expect(res.body.details.map((d: any) => d.path)).toEqual(["dataItems", "withdrawal", "rights", "boardComplaint", "contact"])
  const grant = await dev.grant()
  const rec = await app.request("POST", "/v1/dpdp/consent-records", { apiKey: dev.apiKey, body: recordBody(grant.id) })
  expect(rec.body.retentionUntil).toBe("2027-12-22T10:00:00.000Z")
})

test("defaultConsentNoticeId: a request naming no notice binds the default, and the person's approval records it", async () => {
  const dev = await developer(app)
  expect((await app.request("PATCH", "/v1/dpdp/settings", { apiKey: dev.apiKey, body: { defaultConsentNoticeId: "privacy" } })).status).toBe(200)
  const auth = await app.request("POST", "/v1/authorize", { apiKey: dev.apiKey, body: { agentId: dev.agentId, principalId: "kim", scopes: ["calendar:read"] } })
  expect((await app.request("POST", `/v1/consent/${auth.body.authRequestId}/approve`)).status).toBe(200)
  const rows = await app.query<any>("SELECT consent_notice_id, auth_request_id, purposes FROM dpdp_consent_records WHERE developer_id = $1", [dev.developerId])
  expect(rows).toHaveLength(1)
  expect(rows[0]).toMatchObject({ consentNoticeId: "privacy", authRequestId: auth.body.authRequestId })
  expect(rows[0].purposes.map((p: any) => p.code)).toEqual(["calendar-sync", "reminders"])
})

test("notice versions are capped by plan: free 100 (402 PLAN_LIMIT_EXCEEDED, nothing stored), enterprise none", async () => {
  const dev = await developer(app)
  await app.query(
    `INSERT INTO dpdp_consent_notices (id, developer_id, notice_id, version, language, title, content, content_hash, notice_digest, purposes, missing, created_at)
     SELECT 'notice_cap' || n, $1, 'bulk', n::text, 'en', 't', 'c', 'h', 'd', '[]', '{}', now() FROM generate_series(1, 99) AS n`, [dev.developerId])
  const over = await app.request("POST", "/v1/dpdp/consent-notices", { apiKey: dev.apiKey, body: { ...NOTICE, version: "100" } })
  expect([over.status, over.body.code]).toEqual([402, "PLAN_LIMIT_EXCEEDED"])
  expect((await app.query("SELECT count(*)::int AS n FROM dpdp_consent_notices WHERE developer_id = $1", [dev.developerId]))[0]).toEqual({ n: 100 })
  await app.query("UPDATE developers SET plan = 'enterprise' WHERE id = $1", [dev.developerId])
  expect((await app.request("POST", "/v1/dpdp/consent-notices", { apiKey: dev.apiKey, body: { ...NOTICE, version: "100" } })).status).toBe(201)
})

test("the compliance summary's dpdp block counts records by status, open and overdue grievances, erasures", async () => {
  const dev = await developer(app)
  const g1 = await dev.grant("lee")
  const g2 = await dev.grant("lee")
  const g3 = await dev.grant("max")
  const r1 = await app.request("POST", "/v1/dpdp/consent-records", { apiKey: dev.apiKey, body: recordBody(g1.id, { dataPrincipalId: "lee" }) })
  await app.request("POST", "/v1/dpdp/consent-records", { apiKey: dev.apiKey, body: recordBody(g2.id, { dataPrincipalId: "lee", processingExpiresAt: "2026-11-23T10:00:00Z" }) })
  await app.request("POST", "/v1/dpdp/consent-records", { apiKey: dev.apiKey, body: recordBody(g3.id, { dataPrincipalId: "max" }) })
  await app.request("POST", `/v1/dpdp/consent-records/${r1.body.recordId}/withdraw`, { apiKey: dev.apiKey, body: { reason: "r" } })
  await app.request("POST", "/v1/dpdp/grievances", { apiKey: dev.apiKey, body: { dataPrincipalId: "lee", type: "violation", description: "x" } })
  expect((await app.request("POST", "/v1/dpdp/data-principals/max/erasure", { apiKey: dev.apiKey })).status).toBe(201)
  await app.adjust("2 days")
  const res = await app.request("GET", "/v1/compliance/summary", { apiKey: dev.apiKey })
  expect(res.body.dpdp).toEqual({
    consentRecords: { active: 0, withdrawn: 1, expired: 1, erased: 1 },
    grievances: { open: 1, overdue: 0 },
    erasures: { processing: 0, completed: 1 }
  })
  // the DPDP export lists the records and grievances themselves (no grievance text)
  const exp = await app.request("POST", "/v1/dpdp/exports", { apiKey: dev.apiKey, body: { type: "dpdp-audit", dateFrom: "2026-11-01", dateTo: "2026-11-30" } })
  expect(exp.status).toBe(201)
  expect(exp.body.data.consentRecords.map((r: any) => r.status).sort()).toEqual(["erased", "expired", "withdrawn"])
  expect(exp.body.data.grievances).toEqual([{
    id: expect.stringMatching(/^grv_/), reference_number: expect.stringMatching(/^GRV-2026-/), type: "violation", status: "submitted",
    created_at: "2026-11-22T10:00:00.000Z", resolved_at: null
  }])
})
