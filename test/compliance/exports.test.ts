/**
 * Streamed and paged exports (decisions §15, revised): bodies a strict reader takes unchanged (RFC
 * 4180 CSV through csv-parse with no comment or relaxed option; NDJSON line by line), their detached
 * proof and headers, what the verifier accepts and refuses, the anchor of a ranged export, filters,
 * bad input. Formula guards, the envelope form and the audit entries are in proofs.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { parse } from "csv-parse/sync"
import { verifyExport } from "../../scripts/verify-export.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"
import { jwksOf, seedAudit, streamedExport } from "./support.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
let jwks: any
const SEEDED = 2_345 // more than two keyset pages of 1,000

beforeAll(async () => {
  app = await startTestApp()
  dev = await app.signup()
  await seedAudit(app, dev.developerId, SEEDED)
  const agentId = await createAgent(app, dev.developerId)
  for (let i = 0; i < 3; i++) await issueGrant(app, { developerId: dev.developerId, agentId, principalId: `user_${i}`, scopes: ["email:read"] })
  jwks = await jwksOf(app)
})
afterAll(() => app.stop())

const text = (b: Uint8Array) => new TextDecoder().decode(b)
/** NDJSON read as a reader does: every line one JSON value, the body ending with a newline */
const ndjsonRows = (b: Uint8Array) => {
  const t = text(b)
  if (t === "") return []
  expect(t.endsWith("\n")).toBe(true)
  return t.slice(0, -1).split("\n").map((l) => JSON.parse(l))
}
/** RFC 4180 through csv-parse with nothing relaxed and no comment lines: the header row, then the records */
const strictCsv = (b: Uint8Array) =>
  parse(text(b), { columns: true, relax_quotes: false, relax_column_count: false, cast: (v, c) => (!c.quoting && v === "" ? null : v) }) as Array<Record<string, string | null>>
/** the audit rows of the chain as stored, in chain order */
const storedEntries = (developerId: string) =>
  app.query<any>("SELECT id, seq, hash FROM audit_log WHERE developer_id = $1 ORDER BY seq", [developerId])
const get = (path: string) => streamedExport(app, dev.apiKey, path)

describe("NDJSON", () => {
  test("the body is the rows, one JSON object a line; the proof comes from Export-Id once the stream has ended", async () => {
    const before = await storedEntries(dev.developerId)
    const r = await get("/v1/compliance/export/audit?format=ndjson")
    expect(r.status).toBe(200)
    expect(r.headers.get("content-type")).toBe("application/x-ndjson")
    expect(r.headers.get("content-disposition")).toBe('attachment; filename="audit-export.ndjson"')
    expect(r.headers.get("export-anchor")).toBe("")
    const rows = ndjsonRows(r.bytes)
    // exactly the entries stored before it began: no header or trailer line
    expect(rows.map((e: any) => e.entryId)).toEqual(before.map((e) => e.id))
    expect(text(r.bytes).split("\n").length - 1).toBe(before.length)
    expect(rows[0]).toEqual(expect.objectContaining({ seq: 1, prevHash: null, metadata: { i: 0, note: "comma, \"quote\"\nnewline #hash", nested: { z: 1, a: [0, null] } } }))
    expect(r.proof).toEqual({
      id: r.headers.get("export-id"), exportId: r.headers.get("export-id"), kind: "audit", format: "ndjson", status: "complete",
      issuer: expect.any(String), developerId: dev.developerId, generatedAt: expect.any(String), since: null, until: null, filters: {},
      anchor: null, rows: before.length, rowCounts: { entries: before.length }, sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      lastHash: before[before.length - 1]!.hash, kid: jwks.keys[0].kid, signature: expect.stringMatching(/^[\w-]+\.\.[\w-]+$/),
      bytes: null, createdAt: expect.any(String), completedAt: expect.any(String), expiresAt: null, error: null
    })
    expect(await verifyExport(r.bytes, jwks, { proof: r.proof, headers: r.headers })).toEqual({ ok: true, kind: "audit ndjson", rows: before.length, errors: [] })
  })

  test("a ranged export carries the hash of the entry before its first as its anchor (header and proof), and verifies on its own", async () => {
    const d = await app.signup()
    await seedAudit(app, d.developerId, 30)
    const stored = await storedEntries(d.developerId)
    // move the first 10 entries an hour back, so the window starts at seq 11
    await app.query("UPDATE audit_log SET created_at = created_at - interval '1 hour' WHERE developer_id = $1 AND seq <= 10", [d.developerId])
    const since = new Date(Date.now() - 30 * 60_000).toISOString()
    const r = await streamedExport(app, d.apiKey, `/v1/compliance/export/audit?format=ndjson&since=${encodeURIComponent(since)}`)
    const rows = ndjsonRows(r.bytes)
    expect([r.headers.get("export-anchor"), r.proof.anchor]).toEqual([stored[9]!.hash, stored[9]!.hash])
    expect(rows[0].seq).toBe(11)
    expect(rows.length).toBe(20)
    expect((await verifyExport(r.bytes, jwks, { proof: r.proof })).ok).toBe(true)
  })

  test("filters give only matching entries (not contiguous: each hash is still checked)", async () => {
    const r = await get("/v1/compliance/export/audit?format=ndjson&status=failure&agentId=ag_3")
    const rows = ndjsonRows(r.bytes)
    expect(r.proof).toMatchObject({ filters: { status: "failure", agentId: "ag_3" }, rows: rows.length })
    const expected = await app.query<any>(
      "SELECT count(*)::int AS n FROM audit_log WHERE developer_id = $1 AND status = 'failure' AND agent_id = 'ag_3' AND seq <= $2",
      [dev.developerId, SEEDED])
    expect(rows.length).toBe(expected[0].n)
    expect(rows.length).toBeGreaterThan(0)
    expect(rows.every((e: any) => e.status === "failure" && e.agentId === "ag_3")).toBe(true)
    expect((await verifyExport(r.bytes, jwks, { proof: r.proof })).ok).toBe(true)
  })
})

describe("CSV", () => {
  test("a strict RFC 4180 reader takes exactly the header row and the NDJSON rows (quotes, commas, newlines and # in values; null as an empty cell)", async () => {
    const nd = ndjsonRows((await get("/v1/compliance/export/audit?format=ndjson&until=2100-01-01")).bytes)
    const r = await get("/v1/compliance/export/audit?format=csv&until=2100-01-01")
    expect(r.headers.get("content-type")).toBe("text/csv; charset=utf-8")
    expect(r.headers.get("export-id")).toMatch(/^cexp_/)
    // RFC 4180: the column names first, every record ended by CRLF
    expect(text(r.bytes).startsWith("seq,entryId,agentId,agentDid,grantId,principalId,developerId,action,metadata,status,timestamp,prevHash,hash,hashVersion,piiSalt,principalDigest,metadataDigest,erased\r\n")).toBe(true)
    expect(text(r.bytes).split("\r\n").length - 1).toBe(r.proof.rows + 1)
    const records = strictCsv(r.bytes)
    // the ndjson export's own start and completion entries came after it
    expect(records.length).toBe(nd.length + 2)
    expect(r.proof.rows).toBe(records.length)
    for (let i = 0; i < nd.length; i++) {
      const row = records[i]!
      expect({ ...row, seq: Number(row.seq), metadata: JSON.parse(row.metadata!), hashVersion: Number(row.hashVersion), erased: row.erased === "true" }).toEqual(nd[i])
    }
    expect(records.some((r) => r.metadata!.includes("comma, \\\"quote\\\"\\nnewline #hash"))).toBe(true)
    expect((await verifyExport(r.bytes, jwks, { proof: r.proof, headers: r.headers })).ok).toBe(true)
  })

  test("grants as CSV and NDJSON, the status filter applied; no anchor for grants", async () => {
    await app.query("UPDATE grants SET status = 'revoked', revoked_at = now() WHERE developer_id = $1 AND principal_id = 'user_0'", [dev.developerId])
    const csv = await get("/v1/compliance/export/grants?format=csv")
    expect(csv.headers.get("export-anchor")).toBeNull()
    const records = strictCsv(csv.bytes)
    expect(records.map((g) => g.status).sort()).toEqual(["active", "active", "revoked"])
    expect(JSON.parse(records[0]!.scopes!)).toEqual(["email:read"])
    expect(csv.proof).toMatchObject({ kind: "grants", rows: 3, anchor: null, lastHash: null, rowCounts: { grants: 3 } })
    expect((await verifyExport(csv.bytes, jwks, { proof: csv.proof })).ok).toBe(true)
    const nd = await get("/v1/compliance/export/grants?format=ndjson&status=revoked")
    expect(ndjsonRows(nd.bytes)).toEqual([expect.objectContaining({ principalId: "user_0", status: "revoked", delegationDepth: 0 })])
    expect((await verifyExport(nd.bytes, jwks, { proof: nd.proof })).ok).toBe(true)
  })
})

describe("the proof", () => {
  test("another developer's export, or an id never issued, is 404", async () => {
    const r = await get("/v1/compliance/export/grants?format=ndjson")
    const other = await app.signup()
    for (const [key, id] of [[other.apiKey, r.proof.exportId], [dev.apiKey, "cexp_01JDQ9NY2ZABCDEFGHJKMNPQRS"]]) {
      const res = await app.request("GET", `/v1/compliance/exports/${id}`, { apiKey: key })
      expect([res.status, res.body.code]).toEqual([404, "NOT_FOUND"])
    }
  })
})

describe("JSON pages", () => {
  test("pages of up to 10,000 with a cursor; each page signed and carrying its own anchor", async () => {
    const first = await app.request("GET", "/v1/compliance/export/audit?limit=1000&until=2100-01-01", { apiKey: dev.apiKey })
    expect(first.status).toBe(200)
    expect(first.body.entries.length).toBe(1000)
    expect(first.body.anchor).toBeNull()
    const second = await app.request("GET", `/v1/compliance/export/audit?limit=1000&cursor=${first.body.nextCursor}`, { apiKey: dev.apiKey })
    expect(second.body.entries[0].seq).toBe(1001)
    expect(second.body.anchor).toBe(first.body.entries[999].hash)
    expect(second.body.total).toBe(first.body.total)
    const otherFilters = await app.request("GET", `/v1/compliance/export/audit?status=failure&cursor=${first.body.nextCursor}`, { apiKey: dev.apiKey })
    expect([otherFilters.status, otherFilters.body.code]).toEqual([400, "BAD_REQUEST"])
    for (const page of [first, second]) expect((await verifyExport(new TextEncoder().encode(page.text), jwks)).ok).toBe(true)
    const grants = await app.request("GET", "/v1/compliance/export/grants?limit=2", { apiKey: dev.apiKey })
    expect(grants.body).toMatchObject({ total: 3 })
    expect(grants.body.grants.length).toBe(2)
    const rest = await app.request("GET", `/v1/compliance/export/grants?limit=2&cursor=${grants.body.nextCursor}`, { apiKey: dev.apiKey })
    expect(rest.body.grants.length).toBe(1)
    expect(rest.body.nextCursor).toBeNull()
  })
})

describe("the verifier refuses a changed export", () => {
  const tamper = async (format: "ndjson" | "csv") => {
    const r = await get(`/v1/compliance/export/audit?format=${format}&until=2100-01-01`)
    expect((await verifyExport(r.bytes, jwks, { proof: r.proof })).ok).toBe(true)
    return { lines: text(r.bytes).split(format === "csv" ? "\r\n" : "\n"), proof: r.proof, sep: format === "csv" ? "\r\n" : "\n" }
  }
  const bytes = (ls: Array<string>, sep: string) => new TextEncoder().encode(ls.join(sep))
  for (const format of ["ndjson", "csv"] as const) {
    const firstRow = format === "ndjson" ? 0 : 1
    test(`${format}: one changed byte`, async () => {
      const { lines: ls, proof, sep } = await tamper(format)
      ls[firstRow + 5] = ls[firstRow + 5]!.replace("success", "succesS")
      const v = await verifyExport(bytes(ls, sep), jwks, { proof })
      expect(v.ok).toBe(false)
      expect(v.errors.join(" ")).toContain("sha256")
      expect(v.errors.join(" ")).toContain("hash does not match its content")
    })
    test(`${format}: one removed row`, async () => {
      const { lines: ls, proof, sep } = await tamper(format)
      ls.splice(firstRow + 100, 1)
      const v = await verifyExport(bytes(ls, sep), jwks, { proof })
      expect(v.ok).toBe(false)
      expect(v.errors.join(" ")).toContain("does not link")
    })
    test(`${format}: two rows swapped`, async () => {
      const { lines: ls, proof, sep } = await tamper(format)
      ;[ls[firstRow + 7], ls[firstRow + 8]] = [ls[firstRow + 8]!, ls[firstRow + 7]!]
      const v = await verifyExport(bytes(ls, sep), jwks, { proof })
      expect(v.ok).toBe(false)
      expect(v.errors.join(" ")).toContain("out of chain order")
    })
  }
  test("a proof with a changed fact, or re-signed with another key, is refused (the JWKS decides)", async () => {
    const { lines: ls, proof, sep } = await tamper("ndjson")
    const changed = await verifyExport(bytes(ls, sep), jwks, { proof: { ...proof, developerId: "dev_someone_else" } })
    expect(changed.errors).toContain("signature: signature verification failed")
    const [h] = proof.signature.split(".")
    const resigned = await verifyExport(bytes(ls, sep), jwks, { proof: { ...proof, signature: `${h}..${"A".repeat(342)}` } })
    expect(resigned.ok).toBe(false)
    expect(resigned.errors.join(" ")).toContain("signature")
  })
  test("another export's proof, or headers of another export, are refused", async () => {
    const a = await get("/v1/compliance/export/audit?format=ndjson&status=blocked")
    const b = await get("/v1/compliance/export/audit?format=ndjson&status=failure")
    expect((await verifyExport(b.bytes, jwks, { proof: a.proof })).ok).toBe(false)
    const v = await verifyExport(b.bytes, jwks, { proof: b.proof, headers: a.headers })
    expect(v.errors).toEqual([`Export-Id ${a.proof.exportId} is not the proof's export (${b.proof.exportId})`])
  })
  test("a filtered export with one row removed fails on the signed digest and count", async () => {
    const r = await get("/v1/compliance/export/audit?format=ndjson&status=failure&until=2100-01-01")
    const ls = text(r.bytes).split("\n")
    ls.splice(3, 1)
    const v = await verifyExport(bytes(ls, "\n"), jwks, { proof: r.proof })
    expect(v.ok).toBe(false)
    expect(v.errors.join(" ")).toMatch(/sha256.*rows, the proof says/)
  })
  test("a body without its proof is not taken as verified", async () => {
    const r = await get("/v1/compliance/export/grants?format=csv")
    expect(await verifyExport(r.bytes, jwks)).toMatchObject({ ok: false, errors: [expect.stringContaining("no proof")] })
  })
})

describe("bad input", () => {
  const cases: Array<[string, string]> = [
    ["malformed since", "/v1/compliance/export/audit?since=yesterday"],
    ["impossible date", "/v1/compliance/export/grants?until=2026-02-30"],
    ["inverted window", "/v1/compliance/export/audit?since=2026-11-02&until=2026-11-01"],
    ["unknown format", "/v1/compliance/export/audit?format=xml"],
    ["unknown status", "/v1/compliance/export/grants?status=paused"],
    ["limit over 10,000", "/v1/compliance/export/audit?limit=10001"],
    ["cursor that does not decode", "/v1/compliance/export/audit?cursor=xyz"],
    ["summary inverted", "/v1/compliance/summary?since=2026-11-02T00:00:00Z&until=2026-11-01T00:00:00Z"],
    ["evidence pack framework", "/v1/compliance/evidence-pack?framework=iso"],
    ["evidence pack malformed until", "/v1/compliance/evidence-pack?until=2026-13-01"],
    ["envelope neither true nor false", "/v1/compliance/export/audit?format=csv&envelope=yes"]
  ]
  for (const [name, path] of cases) {
    test(`${name} → 400 BAD_REQUEST`, async () => {
      const r = await app.request("GET", path, { apiKey: dev.apiKey })
      expect(r.status).toBe(400)
      expect(r.body).toMatchObject({ code: "BAD_REQUEST", requestId: expect.any(String) })
    })
  }
  test("no API key → 401", async () => {
    expect((await app.request("GET", "/v1/compliance/export/audit")).status).toBe(401)
  })
})

test("tenants are isolated: another developer's export holds none of these entries (an empty body, 0 rows, verified)", async () => {
  const other = await app.signup()
  const r = await streamedExport(app, other.apiKey, "/v1/compliance/export/audit?format=ndjson")
  expect(r.bytes.length).toBe(0)
  expect(r.proof.rows).toBe(0)
  expect((await verifyExport(r.bytes, jwks, { proof: r.proof })).ok).toBe(true)
})
