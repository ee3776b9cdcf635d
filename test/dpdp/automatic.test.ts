/**
 * Automatic consent records (decisions §21): a person's approval of a request naming a notice makes
 * the record in the approval's transaction; the grant and its record commit or roll back together.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { developer, verifyWithDidDocument } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
})
afterAll(() => app.stop())

const authorize = (apiKey: string, agentId: string, over: Record<string, unknown> = {}) =>
  app.request("POST", "/v1/authorize", { apiKey, body: { agentId, principalId: "dana", scopes: ["calendar:read"], expiresIn: "7d", ...over } })

const recordsOf = (developerId: string) =>
  app.query<any>(`SELECT id, grant_id, data_principal_id, consent_method, auth_request_id, purposes, status FROM dpdp_consent_records
                  WHERE developer_id = $1 ORDER BY created_at, id`, [developerId])

test("a person approving a request that names a notice gets a signed record made with the grant; the event says automatic", async () => {
  const dev = await developer(app)
  const auth = await authorize(dev.apiKey, dev.agentId, { consentNoticeId: "privacy", purposes: ["calendar-sync"] })
  expect(auth.status).toBe(201)
  const approve = await app.request("POST", `/v1/consent/${auth.body.authRequestId}/approve`)
  expect(approve.status).toBe(200)
  const grantId = (await app.query<{ grantId: string }>("SELECT grant_id FROM auth_requests WHERE id = $1", [auth.body.authRequestId]))[0]!.grantId
  const rows = await recordsOf(dev.developerId)
  expect(rows).toHaveLength(1)
  expect(rows[0]).toMatchObject({
    grantId, dataPrincipalId: "dana", consentMethod: "explicit-click", authRequestId: auth.body.authRequestId, status: "active"
  })
  expect(rows[0].purposes.map((p: any) => p.code)).toEqual(["calendar-sync"])
  const view = await app.request("GET", `/v1/dpdp/consent-records/${rows[0].id}`, { apiKey: dev.apiKey })
  expect(view.status).toBe(200)
  expect(view.body).toMatchObject({
    grantId, grantIds: [grantId], consentMethod: "explicit-click", consentNoticeVersion: "1", language: "en",
    consentGivenAt: "2026-11-22T10:00:00.000Z", processingExpiresAt: "2026-11-29T10:00:00.000Z", authRequestId: auth.body.authRequestId
  })
  const proof = await verifyWithDidDocument(app, view.body.consentProof.proofJwt)
  expect(proof.ok).toBe(true)
  expect(proof.payload).toMatchObject({ jti: rows[0].id, grantIds: [grantId], sub: "dana", consentMethod: "explicit-click", purposes: ["calendar-sync"] })
  const created = await app.query<{ data: any }>("SELECT data FROM events WHERE developer_id = $1 AND type = 'dpdp.consent.created'", [dev.developerId])
  expect(created.map((e) => e.data)).toEqual([{
    recordId: rows[0].id, grantId, grantIds: [grantId], dataPrincipalId: "dana", consentMethod: "explicit-click", automatic: true
  }])
  const audit = await app.query<any>("SELECT principal_id, metadata FROM audit_log WHERE developer_id = $1 AND action = 'service.dpdp.consent_recorded'", [dev.developerId])
  expect(audit).toHaveLength(1)
  expect(audit[0].metadata).toMatchObject({ recordId: rows[0].id, automatic: true, authRequestId: auth.body.authRequestId })

  // the person revoking on /permissions withdraws the automatic record with the grant
  const session = await app.request("POST", "/v1/principal-sessions", { apiKey: dev.apiKey, body: { principalId: "dana" } })
  expect((await app.request("DELETE", `/v1/principal/grants/${grantId}`, { bearer: session.body.sessionToken })).status).toBe(204)
  expect((await app.request("GET", `/v1/dpdp/consent-records/${rows[0].id}`, { apiKey: dev.apiKey })).body)
    .toMatchObject({ status: "withdrawn", withdrawnBy: "principal", grantStatus: "revoked" })
})

test("unknown notice 400 INVALID_NOTICE, retired 409 NOTICE_RETIRED, foreign purpose 400, child without guardian 422; no request stored", async () => {
  const dev = await developer(app)
  const unknown = await authorize(dev.apiKey, dev.agentId, { consentNoticeId: "nope" })
  expect([unknown.status, unknown.body.code]).toEqual([400, "INVALID_NOTICE"])
  const purpose = await authorize(dev.apiKey, dev.agentId, { consentNoticeId: "privacy", purposes: ["marketing"] })
  expect([purpose.status, purpose.body.code]).toEqual([400, "BAD_REQUEST"])
  const child = await authorize(dev.apiKey, dev.agentId, { consentNoticeId: "privacy", principalType: "child" })
  expect([child.status, child.body.code]).toEqual([422, "VERIFIABLE_CONSENT_REQUIRED"])
  expect((await app.request("POST", "/v1/dpdp/consent-notices/privacy/versions/1/retire", { apiKey: dev.apiKey })).status).toBe(200)
  const retired = await authorize(dev.apiKey, dev.agentId, { consentNoticeId: "privacy" })
  expect([retired.status, retired.body.code]).toEqual([409, "NOTICE_RETIRED"])
  expect(await app.query("SELECT id FROM auth_requests WHERE developer_id = $1", [dev.developerId])).toEqual([])
})

test("without a notice, or approved by a sandbox, nothing is recorded", async () => {
  const dev = await developer(app)
  const auth = await authorize(dev.apiKey, dev.agentId)
  expect((await app.request("POST", `/v1/consent/${auth.body.authRequestId}/approve`)).status).toBe(200)
  expect(await recordsOf(dev.developerId)).toEqual([])

  const sandbox = await app.signup({ mode: "sandbox" })
  expect((await app.request("POST", "/v1/dpdp/consent-notices", { apiKey: sandbox.apiKey, body: { noticeId: "n", version: "1", title: "t", content: "c", purposes: [{ code: "p", description: "d" }] } })).status).toBe(201)
  const { createAgent } = await import("../support/fixtures.ts")
  const agentId = await createAgent(app, sandbox.developerId)
  const approved = await authorize(sandbox.apiKey, agentId, { consentNoticeId: "n" })
  expect(approved.status).toBe(201)
  expect(approved.body.sandbox).toBe(true)
  expect(await recordsOf(sandbox.developerId)).toEqual([])
})

test("a failure after the record insert leaves neither the grant nor the record, and the request stays pending", async () => {
  const dev = await developer(app)
  const auth = await authorize(dev.apiKey, dev.agentId, { consentNoticeId: "privacy" })
  const id = auth.body.authRequestId as string
  // a real database failure in the same transaction, after the record (the request's update comes last)
  await app.query(`CREATE OR REPLACE FUNCTION dpdp_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.id = '${id}' AND NEW.status = 'approved' THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$`)
  await app.query("CREATE TRIGGER dpdp_test_fail BEFORE UPDATE ON auth_requests FOR EACH ROW EXECUTE FUNCTION dpdp_test_fail()")
  try {
    const failed = await app.request("POST", `/v1/consent/${id}/approve`)
    expect(failed.status).toBe(500)
    expect(await recordsOf(dev.developerId)).toEqual([])
    expect(await app.query("SELECT id FROM grants WHERE developer_id = $1", [dev.developerId])).toEqual([])
    expect(await app.query("SELECT id FROM events WHERE developer_id = $1 AND type IN ('dpdp.consent.created', 'grant.created')", [dev.developerId])).toEqual([])
    expect(await app.query("SELECT id FROM audit_log WHERE developer_id = $1 AND action = 'service.dpdp.consent_recorded'", [dev.developerId])).toEqual([])
    expect((await app.query("SELECT status FROM auth_requests WHERE id = $1", [id]))[0]).toEqual({ status: "pending" })
  } finally {
    await app.query("DROP TRIGGER dpdp_test_fail ON auth_requests")
    await app.query("DROP FUNCTION dpdp_test_fail()")
  }
  // once the fault is gone, the same approval makes both
  expect((await app.request("POST", `/v1/consent/${id}/approve`)).status).toBe(200)
  expect(await recordsOf(dev.developerId)).toHaveLength(1)
  expect(await app.query("SELECT id FROM grants WHERE developer_id = $1", [dev.developerId])).toHaveLength(1)
})

test("a bundle that consumes the approved request is covered by its record: withdrawing it revokes the bundle too", async () => {
  const dev = await developer(app)
  const auth = await authorize(dev.apiKey, dev.agentId, { consentNoticeId: "privacy" })
  expect((await app.request("POST", `/v1/consent/${auth.body.authRequestId}/approve`)).status).toBe(200)
  const bundle = await app.request("POST", "/v1/consent-bundles", {
    apiKey: dev.apiKey, body: { agentId: dev.agentId, userId: "dana", scopes: ["calendar:read"], consentRequestId: auth.body.authRequestId }
  })
  expect(bundle.status).toBe(201)
  const bundleGrantId = (await app.query<{ grantId: string }>("SELECT grant_id FROM consent_bundles WHERE id = $1", [bundle.body.bundleId]))[0]!.grantId
  const [record] = await recordsOf(dev.developerId)
  const view = await app.request("GET", `/v1/dpdp/consent-records/${record.id}`, { apiKey: dev.apiKey })
  expect(view.body.grantIds).toHaveLength(2)
  expect(view.body.grantIds).toContain(bundleGrantId)
  const withdrawn = await app.request("POST", `/v1/dpdp/consent-records/${record.id}/withdraw`, { apiKey: dev.apiKey, body: { reason: "no longer" } })
  expect(withdrawn.status).toBe(200)
  expect(withdrawn.body.revokedGrantIds).toContain(bundleGrantId)
  const status = await app.request("GET", `/v1/consent-bundles/${bundle.body.bundleId}`, { apiKey: dev.apiKey })
  expect(status.body.status).toBe("revoked")
})
