/**
 * Export jobs (decisions §15): run by the job round, downloaded with Content-Digest, claimed once
 * across instances, resumed after a crash once the lease runs out (TestClock), kept 7 days then 410,
 * and limited per developer.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { verifyExport } from "../../scripts/verify-export.ts"
import { LEASE_MS, runDueJobs } from "../../src/compliance/Jobs.ts"
import { startTestApp, usingRealPostgres, type TestApp } from "../support/app.ts"
import { download, jwksOf, seedAudit } from "./support.ts"

let app: TestApp
let jwks: any
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
  jwks = await jwksOf(app)
})
afterAll(() => app.stop())

const nowMs = async () => Number(await app.run(Effect.flatMap(Effect.clock, (c) => c.currentTimeMillis)))
const round = (a: TestApp = app) => a.run(runDueJobs())
const create = (apiKey: string, body: unknown) => app.request("POST", "/v1/compliance/exports", { apiKey, body })

test("a job runs in the round; its download is the verified file, with a Content-Digest", async () => {
  const d = await app.signup()
  await seedAudit(app, d.developerId, 2_100)
  const created = await create(d.apiKey, { kind: "audit", format: "csv" })
  expect(created.status).toBe(202)
  expect(created.body).toEqual({ id: expect.stringMatching(/^cexp_/), status: "pending" })
  const id = created.body.id
  expect((await app.request("GET", `/v1/compliance/exports/${id}`, { apiKey: d.apiKey })).body.status).toBe("pending")
  expect((await app.request("GET", `/v1/compliance/exports/${id}/download`, { apiKey: d.apiKey })).body.code).toBe("EXPORT_NOT_READY")
  expect(await round()).toEqual({ claimed: 1, completed: 1 })
  const job = (await app.request("GET", `/v1/compliance/exports/${id}`, { apiKey: d.apiKey })).body
  expect(job).toMatchObject({ status: "complete", format: "csv", rowCounts: { entries: 2_100 } })
  expect(Date.parse(job.expiresAt) - Date.parse(job.completedAt)).toBe(7 * 86_400_000)
  const file = await download(app, d.apiKey, `/v1/compliance/exports/${id}/download`)
  expect(file.status).toBe(200)
  const sha = createHash("sha256").update(file.bytes).digest()
  expect(sha.toString("hex")).toBe(job.sha256)
  expect(file.headers.get("content-digest")).toBe(`sha-256=:${sha.toString("base64")}:`)
  expect(file.headers.get("content-disposition")).toBe(`attachment; filename="${id}.csv"`)
  expect(await verifyExport(file.bytes, jwks)).toMatchObject({ ok: true, rows: 2_100 })
  // the signature the job reports is the file's own
  expect(new TextDecoder().decode(file.bytes)).toContain(job.signature)
  const audited = await app.query<any>("SELECT metadata FROM audit_log WHERE developer_id = $1 AND action = 'service.compliance.exported'", [d.developerId])
  expect(audited.map((a) => a.metadata.exportId)).toEqual([id])
})

test("an evidence-pack job of any size, verified", async () => {
  const d = await app.signup()
  await seedAudit(app, d.developerId, 1_500)
  const { id } = (await create(d.apiKey, { kind: "evidence-pack", framework: "gdpr" })).body
  await round()
  const file = await download(app, d.apiKey, `/v1/compliance/exports/${id}/download`)
  expect(file.headers.get("content-type")).toBe("application/json")
  expect(await verifyExport(file.bytes, jwks)).toMatchObject({ ok: true, kind: "evidence-pack", rows: 1_500 })
})

test("results are kept 7 days, then 410 GONE and their chunks deleted", async () => {
  const d = await app.signup()
  await seedAudit(app, d.developerId, 10)
  const { id } = (await create(d.apiKey, { kind: "grants", format: "ndjson" })).body
  await round()
  await app.adjust(7 * 86_400_000 - 1000)
  expect((await download(app, d.apiKey, `/v1/compliance/exports/${id}/download`)).status).toBe(200)
  await app.adjust("1 second")
  expect((await app.request("GET", `/v1/compliance/exports/${id}`, { apiKey: d.apiKey })).body.status).toBe("expired")
  const gone = await app.request("GET", `/v1/compliance/exports/${id}/download`, { apiKey: d.apiKey })
  expect(gone.status).toBe(410)
  expect(gone.body.code).toBe("GONE")
  await round()
  expect(await app.query("SELECT n FROM compliance_export_chunks WHERE export_id = $1", [id])).toEqual([])
})

test("a job whose instance died is claimed again only once its lease has run out, and completes from the start", async () => {
  const d = await app.signup()
  await seedAudit(app, d.developerId, 1_200)
  const { id } = (await create(d.apiKey, { kind: "audit", format: "ndjson" })).body
  // another instance claimed it, wrote part of the file, and was killed
  const leaseUntil = new Date((await nowMs()) + LEASE_MS)
  await app.query("UPDATE compliance_exports SET status = 'running', attempts = 1, lease_until = $2 WHERE id = $1", [id, leaseUntil])
  await app.query("INSERT INTO compliance_export_chunks (export_id, n, data) VALUES ($1, 0, $2)", [id, Buffer.from("{\"export\":{half a file")])
  expect(await round()).toEqual({ claimed: 0, completed: 0 })
  await app.adjust(LEASE_MS)
  expect(await round()).toEqual({ claimed: 0, completed: 0 })
  await app.adjust("1 millis")
  expect(await round()).toEqual({ claimed: 1, completed: 1 })
  const job = (await app.request("GET", `/v1/compliance/exports/${id}`, { apiKey: d.apiKey })).body
  expect(job).toMatchObject({ status: "complete", rowCounts: { entries: 1_200 } })
  const file = await download(app, d.apiKey, `/v1/compliance/exports/${id}/download`)
  expect(await verifyExport(file.bytes, jwks)).toMatchObject({ ok: true, rows: 1_200 })
  expect((await app.query<any>("SELECT attempts FROM compliance_exports WHERE id = $1", [id]))[0].attempts).toBe(2)
})

test("a job is claimed by one instance only: two rounds at once run it once", async () => {
  const d = await app.signup()
  await seedAudit(app, d.developerId, 500)
  const { id } = (await create(d.apiKey, { kind: "audit", format: "ndjson" })).body
  // real PostgreSQL: a second instance on the same database; embedded: two rounds in one process
  const second = usingRealPostgres ? await startTestApp({ databaseUrl: app.databaseUrl, testClock: true, startTime: await nowMs() }) : app
  try {
    const results = await Promise.all([round(app), round(second)])
    expect(results.reduce((n, r) => n + r.claimed, 0)).toBe(1)
    expect(results.reduce((n, r) => n + r.completed, 0)).toBe(1)
    const audited = await app.query<any>(
      "SELECT count(*)::int AS n FROM audit_log WHERE developer_id = $1 AND action = 'service.compliance.exported'", [d.developerId])
    expect(audited[0].n).toBe(1)
    expect((await app.request("GET", `/v1/compliance/exports/${id}`, { apiKey: d.apiKey })).body.status).toBe("complete")
  } finally {
    if (second !== app) await second.server.stop()
  }
})

test("limits: 3 unfinished jobs at a time and 5 an hour per developer → 429 RATE_LIMITED", async () => {
  const d = await app.signup()
  for (let i = 0; i < 3; i++) expect((await create(d.apiKey, { kind: "grants" })).status).toBe(202)
  const fourth = await create(d.apiKey, { kind: "grants" })
  expect(fourth.status).toBe(429)
  expect(fourth.body.code).toBe("RATE_LIMITED")
  while ((await round()).claimed > 0) { /* run them all */ }
  for (let i = 0; i < 2; i++) expect((await create(d.apiKey, { kind: "grants" })).status).toBe(202)
  expect((await create(d.apiKey, { kind: "grants" })).status).toBe(429)
  await app.adjust("1 hour")
  while ((await round()).claimed > 0) { /* drain */ }
  expect((await create(d.apiKey, { kind: "grants" })).status).toBe(202)
})

test("bad job requests → 400", async () => {
  const d = await app.signup()
  for (const body of [
    { kind: "evidence-pack", format: "csv" },
    { kind: "audit", format: "json" },
    { kind: "audit", since: "2026-11-02", until: "2026-11-01" },
    { kind: "grants", since: "not a date" },
    { kind: "grants", agentId: "ag_1" },
    { kind: "audit", status: "maybe" },
    { kind: "receipts" }
  ]) {
    const r = await create(d.apiKey, body)
    expect([r.status, r.body.code]).toEqual([400, "BAD_REQUEST"])
  }
  expect((await app.request("GET", "/v1/compliance/exports/cexp_nope", { apiKey: d.apiKey })).status).toBe(404)
  const other = await app.signup()
  const { id } = (await create(d.apiKey, { kind: "grants" })).body
  expect((await app.request("GET", `/v1/compliance/exports/${id}`, { apiKey: other.apiKey })).status).toBe(404)
})

test("a job that cannot be produced is tried 3 times, then failed with a message that reveals nothing", async () => {
  while ((await round()).claimed > 0) { /* earlier tests' jobs */ }
  const d = await app.signup()
  const { id } = (await create(d.apiKey, { kind: "audit", format: "ndjson" })).body
  // a stored parameter the database refuses (as a bug or a bad row would): every run fails
  await app.query(`UPDATE compliance_exports SET params = '{"since":"not a date","until":null,"filters":{}}' WHERE id = $1`, [id])
  for (let i = 0; i < 3; i++) expect(await round()).toEqual({ claimed: 1, completed: 0 })
  expect(await round()).toEqual({ claimed: 0, completed: 0 })
  const job = (await app.request("GET", `/v1/compliance/exports/${id}`, { apiKey: d.apiKey })).body
  expect(job).toMatchObject({ status: "failed", error: "the export could not be produced", sha256: null })
  expect((await app.request("GET", `/v1/compliance/exports/${id}/download`, { apiKey: d.apiKey })).body.code).toBe("EXPORT_NOT_READY")
})
