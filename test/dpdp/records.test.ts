/** DPDP consent records by the developer's POST (decisions §21): published shape, signed proof, reads. */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { developer, NOTICE, recordBody, verifyWithDidDocument } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
})
afterAll(() => app.stop())

test("201 with the published shape and a proof that verifies with the key in did.json; stored, announced, audited", async () => {
  const dev = await developer(app)
  const grant = await dev.grant()
  const res = await app.request("POST", "/v1/dpdp/consent-records", { apiKey: dev.apiKey, body: recordBody(grant.id) })
  expect(res.status).toBe(201)
  const r = res.body
  expect(r.recordId).toMatch(/^crec_[0-9A-Z]{26}$/)
  expect(r).toMatchObject({
    grantId: grant.id, grantIds: [grant.id], grantStatus: "active", dataPrincipalId: "user_1", status: "active",
    consentNoticeId: "privacy", consentNoticeVersion: "1", language: "en", consentNoticeHash: dev.notice.contentHash,
    noticeDigest: dev.notice.noticeDigest, consentMethod: "developer-attested", principalType: "adult", authRequestId: null,
    processingExpiresAt: "2027-11-22T10:00:00.000Z", retentionUntil: "2034-11-20T10:00:00.000Z",
    consentGivenAt: "2026-11-22T10:00:00.000Z", createdAt: "2026-11-22T10:00:00.000Z", scopes: ["calendar:read"]
  })
  expect(r.grantPrincipalId).toBeUndefined()
  expect(r.consentProof.type).toBe("Ed25519Signature2020")
  expect(r.consentProof.signedAt).toBe("2026-11-22T10:00:00.000Z")
  const proof = await verifyWithDidDocument(app, r.consentProof.proofJwt)
  expect(proof.ok).toBe(true)
  expect(proof.header.alg).toBe("EdDSA")
  expect(proof.payload).toEqual({
    iss: proof.did, jti: r.recordId, grantIds: [grant.id], sub: "user_1", noticeDigest: dev.notice.noticeDigest,
    consentNoticeHash: dev.notice.contentHash, purposes: ["calendar-sync"], scopes: ["calendar:read"],
    consentMethod: "developer-attested", consentGivenAt: "2026-11-22T10:00:00.000Z", iat: Date.parse("2026-11-22T10:00:00Z") / 1000
  })
  // a changed byte fails the same check
  const [h, p, sig] = r.consentProof.proofJwt.split(".")
  const tampered = `${h}.${p}.${sig.slice(0, 10)}${sig[10] === "A" ? "B" : "A"}${sig.slice(11)}`
  expect((await verifyWithDidDocument(app, tampered)).ok).toBe(false)

  const [row] = await app.query("SELECT status, grant_principal_id, proof_jwt FROM dpdp_consent_records WHERE id = $1", [r.recordId])
  expect(row).toEqual({ status: "active", grantPrincipalId: "user_1", proofJwt: r.consentProof.proofJwt })
  expect(await app.query("SELECT grant_id FROM dpdp_consent_record_grants WHERE record_id = $1", [r.recordId])).toEqual([{ grantId: grant.id }])
  const events = await app.query<{ data: any }>("SELECT data FROM events WHERE type = 'dpdp.consent.created' AND developer_id = $1", [dev.developerId])
  expect(events.map((e) => e.data)).toEqual([
    { recordId: r.recordId, grantId: grant.id, grantIds: [grant.id], dataPrincipalId: "user_1", consentMethod: "developer-attested", automatic: false }
  ])
  const audit = await app.query<any>("SELECT principal_id, grant_id, metadata FROM audit_log WHERE action = 'service.dpdp.consent_recorded' AND developer_id = $1", [dev.developerId])
  expect(audit).toHaveLength(1)
  expect(audit[0]).toMatchObject({ principalId: "user_1", grantId: grant.id, metadata: { recordId: r.recordId, noticeVersion: "1" } })
  expect(JSON.stringify(audit[0].metadata)).not.toContain("user_1")
})

test("unknown or another developer's grant 400 INVALID_GRANT; notice, purpose, time and guardian checks; nothing stored", async () => {
  const dev = await developer(app)
  const other = await developer(app)
  const grant = await dev.grant()
  const post = (body: unknown, apiKey = dev.apiKey) => app.request("POST", "/v1/dpdp/consent-records", { apiKey, body })
  const unknown = await post(recordBody("grnt_01JDQ8ZK2M3N4P5Q6R7S8T9V0W"))
  expect([unknown.status, unknown.body.code]).toEqual([400, "INVALID_GRANT"])
  expect((await post(recordBody(grant.id), other.apiKey)).body.code).toBe("INVALID_GRANT")
  expect((await post(recordBody(grant.id, { consentNoticeId: "nope" }))).body.code).toBe("INVALID_NOTICE")
  expect((await post(recordBody(grant.id, { consentNoticeVersion: "7" }))).body.code).toBe("INVALID_NOTICE")
  const { grantId: _, ...noGrant } = recordBody(grant.id)
  expect((await post(noGrant)).body).toMatchObject({ code: "BAD_REQUEST", details: [{ path: "grantId" }] })
  const badPurpose = await post(recordBody(grant.id, { purposes: [{ code: "marketing", description: "x" }] }))
  expect([badPurpose.status, badPurpose.body.code]).toEqual([400, "BAD_REQUEST"])
  expect((await post(recordBody(grant.id, { processingExpiresAt: "2026-11-22T09:00:00Z" }))).status).toBe(400)
  expect((await post(recordBody(grant.id, { processingExpiresAt: "2037-01-01T00:00:00Z" }))).status).toBe(400)
  expect((await post(recordBody(grant.id, { processingExpiresAt: "2027-02-30T00:00:00Z" }))).status).toBe(400)
  expect((await post(recordBody(grant.id, { consentGivenAt: "2026-11-20T10:00:00Z" }))).status).toBe(400)
  const hash = await post(recordBody(grant.id, { consentNoticeHash: "0".repeat(64) }))
  expect([hash.status, hash.body.code]).toEqual([422, "NOTICE_HASH_MISMATCH"])
  const child = await post(recordBody(grant.id, { principalType: "child" }))
  expect([child.status, child.body.code]).toEqual([422, "VERIFIABLE_CONSENT_REQUIRED"])
  expect(await app.query("SELECT id FROM dpdp_consent_records WHERE developer_id = $1", [dev.developerId])).toEqual([])

  // a retired version refuses new records; a revoked grant too
  await app.request("POST", "/v1/dpdp/consent-notices/privacy/versions/1/retire", { apiKey: dev.apiKey })
  const retired = await post(recordBody(grant.id))
  expect([retired.status, retired.body.code]).toEqual([409, "NOTICE_RETIRED"])
  await app.request("POST", "/v1/dpdp/consent-notices", { apiKey: dev.apiKey, body: { ...NOTICE, version: "2" } })
  expect((await post(recordBody(grant.id))).body.consentNoticeVersion).toBe("2")
  await app.request("DELETE", `/v1/grants/${grant.id}`, { apiKey: dev.apiKey })
  const revoked = await post(recordBody(grant.id))
  expect([revoked.status, revoked.body.code]).toEqual([409, "GRANT_NOT_ACTIVE"])
})

test("@grantex/dpdp's body: hash-bound notice, its extra fields accepted, guardian verification, a different principal id", async () => {
  const dev = await developer(app)
  const grant = await dev.grant("user_1")
  const res = await app.request("POST", "/v1/dpdp/consent-records", {
    apiKey: dev.apiKey,
    body: {
      ...recordBody(grant.id, { dataPrincipalId: "guardian-of-7" }),
      purposes: [{ purposeId: "reminders", name: "Reminders", description: "Remind you", legalBasis: "consent" }],
      consentNoticeHash: dev.notice.contentHash, consentMethod: "written", consentGivenAt: "2026-11-22T09:00:00+05:30",
      scopes: ["ignored"], retentionUntil: "2099-01-01T00:00:00Z", consentProof: { type: "none" }, dataFiduciaryName: "ignored",
      principalType: "child", guardianVerification: { method: "digital_locker", reference: "tok-1", verifiedAt: "2026-11-22T09:59:00Z" }
    }
  })
  expect(res.status).toBe(201)
  expect(res.body).toMatchObject({
    dataPrincipalId: "guardian-of-7", grantPrincipalId: "user_1", consentMethod: "written", scopes: ["calendar:read"],
    consentGivenAt: "2026-11-22T03:30:00.000Z", principalType: "child", retentionUntil: "2034-11-20T10:00:00.000Z",
    guardianVerification: { method: "digital_locker", reference: "tok-1", verifiedAt: "2026-11-22T09:59:00.000Z" }
  })
  expect(res.body.consentProof.type).toBe("Ed25519Signature2020")
})

test("access (§21, ours): the summary of what the service holds about the principal, and nothing of another principal's", async () => {
  const dev = await developer(app)
  const g1 = await dev.grant("asha")
  const g2 = await dev.grant("asha")
  await dev.grant("someone_else")
  expect((await app.request("POST", "/v1/dpdp/consent-records", { apiKey: dev.apiKey, body: recordBody(g1.id, { dataPrincipalId: "asha", processingExpiresAt: "2031-01-01T00:00:00Z" }) })).status).toBe(201)
  expect((await app.request("DELETE", `/v1/grants/${g2.id}`, { apiKey: dev.apiKey })).status).toBe(204)
  const filed = await app.request("POST", "/v1/dpdp/grievances", { apiKey: dev.apiKey, body: { dataPrincipalId: "asha", type: "consent-violation", description: "x" } })
  expect(filed.status).toBe(202)
  await app.query(
    `INSERT INTO vault_credentials (id, developer_id, principal_id, service, credential_type, key_id, iv, ciphertext, created_at, updated_at)
     VALUES ('vc_access_1', $1, 'asha', 'gmail', 'oauth2', 'k', 'iv', 'ct', now(), now())`, [dev.developerId])
  const res = await app.request("GET", "/v1/dpdp/data-principals/asha/records", { apiKey: dev.apiKey })
  expect(res.status).toBe(200)
  const { summary } = res.body
  expect(summary).toEqual({
    grants: { active: 1, revoked: 1, expired: 0 },
    agents: [{ agentId: dev.agentId, name: expect.any(String), did: expect.stringMatching(new RegExp(`^did:[a-z]+:${dev.agentId}$`)) }],
    scopes: ["calendar:read"],
    auditEntries: { count: expect.any(Number), first: expect.stringMatching(/Z$/), last: expect.stringMatching(/Z$/) },
    vaultServices: ["gmail"],
    passkeys: 0,
    consentBundles: 0,
    grievances: [{ grievanceId: filed.body.grievanceId, referenceNumber: filed.body.referenceNumber, status: "submitted" }],
    nomination: null,
    erasures: []
  })
  expect(summary.auditEntries.count).toBeGreaterThan(0)
  // a principal the service holds nothing about: zeros, empty lists
  const nobody = (await app.request("GET", "/v1/dpdp/data-principals/nobody/records", { apiKey: dev.apiKey })).body.summary
  expect(nobody).toMatchObject({ grants: { active: 0, revoked: 0, expired: 0 }, agents: [], scopes: [], auditEntries: { count: 0, first: null, last: null }, grievances: [] })
})


test("reads: GET counts accesses, 404 for another developer's; lists with filters and cursor; the principal's records", async () => {
  const dev = await developer(app)
  const other = await developer(app)
  const g1 = await dev.grant("alice")
  const g2 = await dev.grant("bob")
  const ids: Array<string> = []
  for (const [grant, principal] of [[g1, "alice"], [g2, "bob"], [g1, "alice"]] as const) {
    await app.adjust("1 second")
    ids.push((await app.request("POST", "/v1/dpdp/consent-records", { apiKey: dev.apiKey, body: recordBody(grant.id, { dataPrincipalId: principal }) })).body.recordId)
  }
  const read = await app.request("GET", `/v1/dpdp/consent-records/${ids[0]}`, { apiKey: dev.apiKey })
  expect(read.body).toMatchObject({ recordId: ids[0], accessCount: 1, lastAccessedAt: "2026-11-22T10:00:03.000Z", withdrawnAt: null, withdrawnReason: null })
  expect(read.body.dataFiduciaryName).toBeString()
  const foreign = await app.request("GET", `/v1/dpdp/consent-records/${ids[0]}`, { apiKey: other.apiKey })
  expect([foreign.status, foreign.body.code]).toEqual([404, "NOT_FOUND"])
  expect((await app.request("GET", "/v1/dpdp/consent-records/crec_nope", { apiKey: dev.apiKey })).status).toBe(404)

  const all = await app.request("GET", "/v1/dpdp/consent-records", { apiKey: dev.apiKey })
  expect(all.body.records.map((r: any) => r.recordId)).toEqual([ids[2], ids[1], ids[0]])
  expect(all.body.totalRecords).toBe(3)
  expect((await app.request("GET", `/v1/dpdp/consent-records?grantId=${g1.id}`, { apiKey: dev.apiKey })).body.records.map((r: any) => r.recordId)).toEqual([ids[2], ids[0]])
  const page1 = await app.request("GET", "/v1/dpdp/consent-records?limit=2", { apiKey: dev.apiKey })
  expect(page1.body.totalRecords).toBe(2)
  const page2 = await app.request("GET", `/v1/dpdp/consent-records?limit=2&cursor=${page1.body.nextCursor}`, { apiKey: dev.apiKey })
  expect(page2.body).toMatchObject({ totalRecords: 1, nextCursor: null })
  expect((await app.request("GET", "/v1/dpdp/consent-records", { apiKey: other.apiKey })).body.records).toEqual([])

  const alice = await app.request("GET", "/v1/dpdp/data-principals/alice/records", { apiKey: dev.apiKey })
  expect(alice.status).toBe(200)
  expect(alice.body).toMatchObject({ dataPrincipalId: "alice", totalRecords: 2, totalCount: 2, nextCursor: null })
  expect(alice.body.records.map((r: any) => [r.recordId, r.accessCount])).toEqual([[ids[2], 1], [ids[0], 2]])
  expect((await app.request("GET", "/v1/dpdp/data-principals/nobody/records", { apiKey: dev.apiKey })).body).toMatchObject({ records: [], totalRecords: 0 })
  const accessed = await app.query<any>("SELECT principal_id, metadata FROM audit_log WHERE action = 'service.dpdp.records_accessed' AND developer_id = $1", [dev.developerId])
  expect(accessed).toEqual([{ principalId: "alice", metadata: { recordCount: 2 } }])
  // the expired status is derived from processingExpiresAt
  await app.adjust("366 days")
  expect((await app.request("GET", `/v1/dpdp/consent-records?status=expired`, { apiKey: dev.apiKey })).body.records).toHaveLength(3)
})

test("nomination (§21, ours): set, replaced, shown in access, removed; refusals; announced and audited", async () => {
  const dev = await developer(app)
  const path = "/v1/dpdp/data-principals/ravi/nomination"
  const set = await app.request("PUT", path, { apiKey: dev.apiKey, body: { nomineePrincipalId: "meera", effectiveOn: "death_or_incapacity" } })
  expect(set.status).toBe(200)
  expect(set.body).toEqual({
    nominationId: expect.stringMatching(/^nom_/), dataPrincipalId: "ravi", nomineePrincipalId: "meera", effectiveOn: "death_or_incapacity",
    createdAt: expect.stringMatching(/Z$/), updatedAt: expect.stringMatching(/Z$/)
  })
  const replaced = await app.request("PUT", path, { apiKey: dev.apiKey, body: { nomineePrincipalId: "arjun", effectiveOn: "death_or_incapacity" } })
  expect([replaced.body.nominationId, replaced.body.nomineePrincipalId]).toEqual([set.body.nominationId, "arjun"])
  const summary = (await app.request("GET", "/v1/dpdp/data-principals/ravi/records", { apiKey: dev.apiKey })).body.summary
  expect(summary.nomination).toMatchObject({ nominationId: set.body.nominationId, nomineePrincipalId: "arjun" })
  for (const [body, field] of [
    [{ nomineePrincipalId: "ravi", effectiveOn: "death_or_incapacity" }, "nomineePrincipalId"],
    [{ nomineePrincipalId: "x", effectiveOn: "whenever" }, "effectiveOn"],
    [{ nomineePrincipalId: "x", effectiveOn: "death_or_incapacity", note: "free text" }, "note"]
  ] as const) {
    const bad = await app.request("PUT", path, { apiKey: dev.apiKey, body })
    expect([bad.status, bad.body.code, bad.body.details?.[0]?.path]).toEqual([400, "BAD_REQUEST", field])
  }
  // another developer sees none of it
  const other = await developer(app)
  expect((await app.request("DELETE", path, { apiKey: other.apiKey })).status).toBe(404)
  expect((await app.request("DELETE", path, { apiKey: dev.apiKey })).status).toBe(204)
  expect((await app.request("DELETE", path, { apiKey: dev.apiKey })).status).toBe(404)
  expect((await app.request("GET", "/v1/dpdp/data-principals/ravi/records", { apiKey: dev.apiKey })).body.summary.nomination).toBeNull()
  const events = await app.query<any>("SELECT data FROM events WHERE developer_id = $1 AND type = 'dpdp.nomination.updated' ORDER BY created_at, id", [dev.developerId])
  // (the test's clock stands still: events of one instant have no order, so compare them as a set)
  expect(events.map((e) => e.data.change).sort()).toEqual(["removed", "set", "set"])
  const audited = await app.query<any>("SELECT principal_id FROM audit_log WHERE developer_id = $1 AND action = 'service.dpdp.nomination_changed'", [dev.developerId])
  expect(audited).toEqual([{ principalId: "ravi" }, { principalId: "ravi" }, { principalId: "ravi" }])
})
