/**
 * Erasure (decisions §21): every stored trace of the principal id goes or takes the pseudonym, the
 * audit chain and the export verifier still verify (hash version 2; a version-1 entry tombstoned and
 * checked by its links), idempotent by pseudonym, 404 only when nothing is held.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { verifyExport } from "../../scripts/verify-export.ts"
import { entryHash } from "../../src/platform/AuditHash.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { jwksOf, streamedExport } from "../compliance/support.ts"
import { developer } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
})
afterAll(() => app.stop())

const PID = "erin-7f3a@mail.example"

/** a version-1 entry (as written before migration 0045) naming the principal, chained on the head */
const legacyEntry = async (developerId: string) => {
  const [head] = await app.query<{ seq: string; hash: string | null }>("SELECT seq, hash FROM audit_heads WHERE developer_id = $1", [developerId])
  const entry = {
    id: "alog_legacy01", agentId: null, agentDid: null, grantId: null, principalId: PID, developerId, action: "email.read",
    metadata: { who: PID }, timestamp: "2026-11-22T10:00:00.000Z", prevHash: head!.hash, status: "success"
  }
  const hash = entryHash(entry)
  const seq = Number(head!.seq) + 1
  await app.query(`INSERT INTO audit_log (id, developer_id, seq, principal_id, action, metadata, status, timestamp, prev_hash, hash, created_at)
                   VALUES ($1, $2, $3, $4, 'email.read', $5::jsonb, 'success', $6::text, $7, $8, ($6::text)::timestamptz)`,
    [entry.id, developerId, seq, PID, JSON.stringify(entry.metadata), entry.timestamp, entry.prevHash, hash])
  await app.query("UPDATE audit_heads SET seq = $2, hash = $3 WHERE developer_id = $1", [developerId, seq, hash])
}

/** every text-like column of every table in which the raw id still stands */
const rawIdsLeft = async (pid: string) => {
  const columns = await app.query<{ tableName: string; columnName: string }>(
    `SELECT table_name, column_name FROM information_schema.columns
     WHERE table_schema = current_schema() AND data_type IN ('text', 'character varying', 'jsonb', 'json', 'ARRAY')
       AND table_name IN (SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE')`)
  const found: Array<string> = []
  for (const c of columns) {
    const [row] = await app.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${c.tableName}" WHERE strpos("${c.columnName}"::text, $1) > 0`, [pid])
    if (row!.n > 0) found.push(`${c.tableName}.${c.columnName} (${row!.n})`)
  }
  return found
}

test("after erasure no raw principal id is left in any table or stored event; the chain and an export still verify; a repeat is 200", async () => {
  const dev = await developer(app)
  // what a person leaves: an approved request naming a notice (grant + automatic record), a developer's record, a bundle,
  // a session, a grievance, a nomination, a vault credential, a version-1 audit entry
  const auth = await app.request("POST", "/v1/authorize", {
    apiKey: dev.apiKey, body: { agentId: dev.agentId, principalId: PID, scopes: ["calendar:read"], consentNoticeId: "privacy" }
  })
  expect((await app.request("POST", `/v1/consent/${auth.body.authRequestId}/approve`)).status).toBe(200)
  const grant = await dev.grant(PID)
  const rec = await app.request("POST", "/v1/dpdp/consent-records", { apiKey: dev.apiKey, body: {
    grantId: grant.id, dataPrincipalId: PID, purposes: [{ code: "calendar-sync", description: "x" }], consentNoticeId: "privacy",
    processingExpiresAt: "2027-11-22T10:00:00Z"
  } })
  expect(rec.status).toBe(201)
  expect((await app.request("POST", "/v1/consent-bundles", { apiKey: dev.apiKey, body: { agentId: dev.agentId, userId: PID, scopes: ["email:read"] } })).status).toBe(201)
  expect((await app.request("POST", "/v1/principal-sessions", { apiKey: dev.apiKey, body: { principalId: PID } })).status).toBe(201)
  expect((await app.request("POST", "/v1/dpdp/grievances", { apiKey: dev.apiKey, body: { dataPrincipalId: PID, type: "violation", description: `I am ${PID}` } })).status).toBe(202)
  expect((await app.request("PUT", `/v1/dpdp/data-principals/${PID}/nomination`, { apiKey: dev.apiKey, body: { nomineePrincipalId: "nominee-1", effectiveOn: "death_or_incapacity" } })).status).toBe(200)
  expect((await app.request("POST", "/v1/vault/credentials", { apiKey: dev.apiKey, body: { principalId: PID, service: "github", accessToken: "gho_x" } })).status).toBe(201)
  await legacyEntry(dev.developerId)
  expect((await app.request("GET", "/v1/audit/verify", { apiKey: dev.apiKey })).body).toMatchObject({ valid: true, erasedEntries: 0, linkOnlyEntries: 0 })
  expect((await rawIdsLeft(PID)).length).toBeGreaterThan(10)

  const res = await app.request("POST", `/v1/dpdp/data-principals/${encodeURIComponent(PID)}/erasure`, { apiKey: dev.apiKey, body: { dataPrincipalId: PID } })
  expect(res.status).toBe(201)
  const body = res.body
  expect(body.requestId).toMatch(/^ER-2026-[0-9A-Z]{26}$/)
  expect(body.pseudonym).toMatch(/^prn_[0-9A-HJKMNP-TV-Z]{26}$/)
  expect(body).toMatchObject({
    dataPrincipalId: PID, status: "completed", recordsErased: 2, grantsRevoked: 3, submittedAt: "2026-11-22T10:00:00.000Z",
    expectedCompletionBy: "2026-11-29T10:00:00.000Z", heldUntil: "2027-11-22T10:00:00.000Z"
  })
  expect(body.counts.deleted).toMatchObject({ vault_credentials: 1, principal_sessions: 1, dpdp_nominations: 1 })

  expect(await rawIdsLeft(PID)).toEqual([])
  // the one-year hold keeps the raw values sealed (no API reads it): ciphertext, not the id
  expect(await app.query("SELECT erasure_id FROM dpdp_erasure_holds WHERE erasure_id = $1", [body.requestId])).toHaveLength(1)

  const verify = await app.request("GET", "/v1/audit/verify", { apiKey: dev.apiKey })
  expect(verify.body.valid).toBe(true)
  expect(verify.body.linkOnlyEntries).toBe(1)
  // every entry that named them (the version-1 one included) is erased and counted
  expect(verify.body.erasedEntries).toBe(body.counts.auditEntries)
  expect(body.counts.auditEntries).toBeGreaterThanOrEqual(5)
  const [done] = await app.query<any>("SELECT principal_id, metadata FROM audit_log WHERE developer_id = $1 AND action = 'service.dpdp.erasure_completed'", [dev.developerId])
  expect(done.principalId).toBe(body.pseudonym)
  expect(done.metadata).toMatchObject({ requestId: body.requestId, legacyRedactions: 1, legacyRedactionDigest: expect.stringMatching(/^[0-9a-f]{64}$/) })
  // an erased version-2 entry: principal and metadata gone, salt gone, digests kept
  const erased = await app.query<any>("SELECT principal_id, metadata, pii_salt, principal_digest FROM audit_log WHERE developer_id = $1 AND hash_version = 2 AND erased_at IS NOT NULL LIMIT 1", [dev.developerId])
  expect(erased[0]).toMatchObject({ principalId: body.pseudonym, metadata: {}, piiSalt: null, principalDigest: expect.stringMatching(/^[0-9a-f]{64}$/) })

  // the auditor's verifier takes the export of the whole chain, both hash versions
  const exported = await streamedExport(app, dev.apiKey, "/v1/compliance/export/audit?format=ndjson")
  const verdict = await verifyExport(exported.bytes, await jwksOf(app), { proof: exported.proof, headers: exported.headers })
  expect(verdict.errors).toEqual([])
  expect(verdict.ok).toBe(true)

  const events = await app.query<any>("SELECT data FROM events WHERE developer_id = $1 AND type = 'dpdp.erasure.completed'", [dev.developerId])
  expect(events.map((e) => e.data)).toEqual([{
    requestId: body.requestId, dataPrincipalId: body.pseudonym, recordsErased: 2, grantsRevoked: 3, status: "completed", heldUntil: body.heldUntil
  }])
  const records = await app.request("GET", `/v1/dpdp/consent-records/${rec.body.recordId}`, { apiKey: dev.apiKey })
  expect(records.body).toMatchObject({ status: "erased", dataPrincipalId: body.pseudonym, grantStatus: "revoked" })

  // idempotent: the same requestId, nothing done again
  const again = await app.request("POST", `/v1/dpdp/data-principals/${encodeURIComponent(PID)}/erasure`, { apiKey: dev.apiKey })
  expect(again.status).toBe(200)
  expect(again.body.requestId).toBe(body.requestId)
  expect(await app.query("SELECT id FROM dpdp_erasures WHERE developer_id = $1", [dev.developerId])).toHaveLength(1)
  expect(await app.query("SELECT id FROM events WHERE developer_id = $1 AND type = 'dpdp.erasure.completed'", [dev.developerId])).toHaveLength(1)
})

test("404 when nothing is held for the id (also another developer's principal); a body naming another id is 400", async () => {
  const dev = await developer(app)
  const other = await developer(app)
  await other.grant("frank")
  const none = await app.request("POST", "/v1/dpdp/data-principals/frank/erasure", { apiKey: dev.apiKey })
  expect([none.status, none.body.code]).toEqual([404, "NOT_FOUND"])
  const mismatch = await app.request("POST", "/v1/dpdp/data-principals/frank/erasure", { apiKey: other.apiKey, body: { dataPrincipalId: "george" } })
  expect([mismatch.status, mismatch.body.code]).toEqual([400, "BAD_REQUEST"])
  expect((await app.query("SELECT principal_id FROM grants WHERE developer_id = $1", [other.developerId]))[0]).toEqual({ principalId: "frank" })
})
