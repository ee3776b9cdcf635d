/**
 * Streamed and paged exports (decisions §15): what a client reads back with real parsers, what the
 * verifier accepts and refuses, the anchor of a ranged export, filters, bad input, and the audit
 * entry every export leaves.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { parse } from "csv-parse/sync"
import { verifyExport } from "../../scripts/verify-export.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"
import { download, jwksOf, seedAudit } from "./support.ts"

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
const lines = (b: Uint8Array) => text(b).split("\n").filter((l) => l !== "")
/** the audit rows of the chain as stored, in chain order */
const storedEntries = (developerId: string) =>
  app.query<any>("SELECT id, seq, hash FROM audit_log WHERE developer_id = $1 ORDER BY seq", [developerId])

describe("NDJSON", () => {
  test("every entry of the chain, one JSON object a line, between a header with the anchor and a signed trailer", async () => {
    const before = await storedEntries(dev.developerId)
    const r = await download(app, dev.apiKey, "/v1/compliance/export/audit?format=ndjson")
    expect(r.status).toBe(200)
    expect(r.headers.get("content-type")).toBe("application/x-ndjson")
    expect(r.headers.get("content-disposition")).toMatch(/^attachment; filename="audit-export\.ndjson"$/)
    const all = lines(r.bytes).map((l) => JSON.parse(l))
    const header = all[0].export
    const trailer = all[all.length - 1].exportEnd
    const rows = all.slice(1, -1)
    expect(header).toMatchObject({ kind: "audit", format: "ndjson", developerId: dev.developerId, contiguous: true, anchor: null })
    // the export is bounded by the head as it stood: exactly the entries stored before it began
    expect(rows.map((e: any) => e.entryId)).toEqual(before.map((e) => e.id))
    expect(rows[0]).toEqual(expect.objectContaining({ seq: 1, prevHash: null, metadata: { i: 0, note: "comma, \"quote\"\nnewline #hash", nested: { z: 1, a: [0, null] } } }))
    expect(trailer.rows).toBe(before.length)
    expect(trailer.lastHash).toBe(before[before.length - 1]!.hash)
    expect(await verifyExport(r.bytes, jwks)).toEqual({ ok: true, kind: "audit ndjson", rows: before.length, errors: [] })
  })

  test("a ranged export carries the hash of the entry before its first as its anchor, and verifies on its own", async () => {
    const d = await app.signup()
    await seedAudit(app, d.developerId, 30)
    const stored = await storedEntries(d.developerId)
    // move the first 10 entries an hour back, so the window starts at seq 11
    await app.query("UPDATE audit_log SET created_at = created_at - interval '1 hour' WHERE developer_id = $1 AND seq <= 10", [d.developerId])
    const since = new Date(Date.now() - 30 * 60_000).toISOString()
    const r = await download(app, d.apiKey, `/v1/compliance/export/audit?format=ndjson&since=${encodeURIComponent(since)}`)
    const all = lines(r.bytes).map((l) => JSON.parse(l))
    expect(all[0].export.anchor).toBe(stored[9]!.hash)
    expect(all[1].seq).toBe(11)
    expect(all.length - 2).toBe(20)
    expect((await verifyExport(r.bytes, jwks)).ok).toBe(true)
  })

  test("filters give only matching entries (not contiguous: each hash is still checked)", async () => {
    const r = await download(app, dev.apiKey, "/v1/compliance/export/audit?format=ndjson&status=failure&agentId=ag_3")
    const all = lines(r.bytes).map((l) => JSON.parse(l))
    const rows = all.slice(1, -1)
    expect(all[0].export).toMatchObject({ contiguous: false, filters: { status: "failure", agentId: "ag_3" } })
    const expected = await app.query<any>(
      "SELECT count(*)::int AS n FROM audit_log WHERE developer_id = $1 AND status = 'failure' AND agent_id = 'ag_3' AND seq <= $2",
      [dev.developerId, SEEDED])
    expect(rows.length).toBe(expected[0].n)
    expect(rows.length).toBeGreaterThan(0)
    expect(rows.every((e: any) => e.status === "failure" && e.agentId === "ag_3")).toBe(true)
    expect((await verifyExport(r.bytes, jwks)).ok).toBe(true)
  })
})

describe("CSV", () => {
  test("csv-parse reads back exactly the NDJSON rows (quotes, commas, newlines and # in values; null as an empty cell)", async () => {
    const nd = lines((await download(app, dev.apiKey, "/v1/compliance/export/audit?format=ndjson")).bytes).slice(1, -1).map((l) => JSON.parse(l))
    const r = await download(app, dev.apiKey, "/v1/compliance/export/audit?format=csv")
    expect(r.headers.get("content-type")).toBe("text/csv; charset=utf-8")
    const records = parse(text(r.bytes), {
      comment: "#", comment_no_infix: true, columns: true, cast: (v, c) => (!c.quoting && v === "" ? null : v)
    }) as Array<Record<string, string | null>>
    expect(records.length).toBe(nd.length + 1) // the ndjson export was itself audited before this one
    for (let i = 0; i < nd.length; i++) {
      const row = records[i]!
      expect({ ...row, seq: Number(row.seq), metadata: JSON.parse(row.metadata!) }).toEqual(nd[i])
    }
    expect(records.some((r) => r.metadata!.includes("comma, \\\"quote\\\"\\nnewline #hash"))).toBe(true)
    expect((await verifyExport(r.bytes, jwks)).ok).toBe(true)
  })

  test("grants as CSV and NDJSON, the status filter applied", async () => {
    await app.query("UPDATE grants SET status = 'revoked', revoked_at = now() WHERE developer_id = $1 AND principal_id = 'user_0'", [dev.developerId])
    const csv = await download(app, dev.apiKey, "/v1/compliance/export/grants?format=csv")
    const records = parse(text(csv.bytes), { comment: "#", comment_no_infix: true, columns: true }) as Array<any>
    expect(records.map((g) => g.status).sort()).toEqual(["active", "active", "revoked"])
    expect(JSON.parse(records[0].scopes)).toEqual(["email:read"])
    expect((await verifyExport(csv.bytes, jwks)).ok).toBe(true)
    const nd = await download(app, dev.apiKey, "/v1/compliance/export/grants?format=ndjson&status=revoked")
    const rows = lines(nd.bytes).slice(1, -1).map((l) => JSON.parse(l))
    expect(rows).toEqual([expect.objectContaining({ principalId: "user_0", status: "revoked", delegationDepth: 0 })])
    expect((await verifyExport(nd.bytes, jwks)).ok).toBe(true)
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
    const r = await download(app, dev.apiKey, `/v1/compliance/export/audit?format=${format}&until=2100-01-01`)
    expect((await verifyExport(r.bytes, jwks)).ok).toBe(true)
    return text(r.bytes).split("\n")
  }
  const bytes = (ls: Array<string>) => new TextEncoder().encode(ls.join("\n"))
  for (const format of ["ndjson", "csv"] as const) {
    const firstRow = format === "ndjson" ? 1 : 2
    test(`${format}: one changed byte`, async () => {
      const ls = await tamper(format)
      ls[firstRow + 5] = ls[firstRow + 5]!.replace("success", "succesS")
      const v = await verifyExport(bytes(ls), jwks)
      expect(v.ok).toBe(false)
      expect(v.errors.join(" ")).toContain("sha256")
      expect(v.errors.join(" ")).toContain("hash does not match its content")
    })
    test(`${format}: one removed row`, async () => {
      const ls = await tamper(format)
      ls.splice(firstRow + 100, 1)
      const v = await verifyExport(bytes(ls), jwks)
      expect(v.ok).toBe(false)
      expect(v.errors.join(" ")).toContain("does not link")
    })
    test(`${format}: two rows swapped`, async () => {
      const ls = await tamper(format)
      ;[ls[firstRow + 7], ls[firstRow + 8]] = [ls[firstRow + 8]!, ls[firstRow + 7]!]
      const v = await verifyExport(bytes(ls), jwks)
      expect(v.ok).toBe(false)
      expect(v.errors.join(" ")).toContain("out of chain order")
    })
  }
  test("a re-signed file with another key is refused (the JWKS decides)", async () => {
    const ls = await tamper("ndjson")
    const trailer = JSON.parse(ls[ls.length - 2]!)
    const [h, p] = trailer.exportEnd.signature.split(".")
    trailer.exportEnd.signature = `${h}.${p}.${"A".repeat(342)}`
    ls[ls.length - 2] = JSON.stringify(trailer)
    const v = await verifyExport(bytes(ls), jwks)
    expect(v.ok).toBe(false)
    expect(v.errors.join(" ")).toContain("signature")
  })
  test("a filtered export with one row removed fails on the signed digest and count", async () => {
    const r = await download(app, dev.apiKey, "/v1/compliance/export/audit?format=ndjson&status=failure&until=2100-01-01")
    const ls = text(r.bytes).split("\n")
    ls.splice(3, 1)
    const v = await verifyExport(bytes(ls), jwks)
    expect(v.ok).toBe(false)
    expect(v.errors.join(" ")).toMatch(/sha256.*rows, the trailer says/)
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
    ["evidence pack malformed until", "/v1/compliance/evidence-pack?until=2026-13-01"]
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

test("every export is on the audit chain with its digest", async () => {
  const d = await app.signup()
  await seedAudit(app, d.developerId, 5)
  const r = await download(app, d.apiKey, "/v1/compliance/export/audit?format=ndjson")
  const trailer = JSON.parse(lines(r.bytes).at(-1)!).exportEnd
  const header = JSON.parse(lines(r.bytes)[0]!).export
  const entries = await app.request("GET", "/v1/audit/entries?action=service.compliance.exported", { apiKey: d.apiKey })
  expect(entries.body.entries).toEqual([expect.objectContaining({
    action: "service.compliance.exported",
    metadata: { exportId: header.exportId, kind: "audit", format: "ndjson", rows: 5, sha256: trailer.sha256 }
  })])
})

test("tenants are isolated: another developer's export holds none of these entries", async () => {
  const other = await app.signup()
  const r = await download(app, other.apiKey, "/v1/compliance/export/audit?format=ndjson")
  expect(lines(r.bytes).length).toBe(2)
  expect(JSON.parse(lines(r.bytes)[1]!).exportEnd.rows).toBe(0)
  expect((await verifyExport(r.bytes, jwks)).ok).toBe(true)
})

test("a client that goes away mid-export leaves the service serving (the embedded database's one connection too)", async () => {
  const controller = new AbortController()
  const res = await fetch(`${app.url}/v1/compliance/export/audit?format=csv`, {
    headers: { authorization: `Bearer ${dev.apiKey}` }, signal: controller.signal
  })
  const reader = res.body!.getReader()
  await reader.read()
  controller.abort()
  await reader.read().catch(() => undefined)
  // a new connection (not one the client's pool might hand back from the aborted request)
  const res2 = await fetch(`${app.url}/v1/compliance/export/audit?format=ndjson&status=blocked`, {
    headers: { authorization: `Bearer ${dev.apiKey}` }, keepalive: false
  })
  expect(res2.status).toBe(200)
  expect((await verifyExport(new Uint8Array(await res2.arrayBuffer()), jwks)).ok).toBe(true)
  expect((await app.request("GET", "/v1/compliance/summary", { apiKey: dev.apiKey })).status).toBe(200)
})
