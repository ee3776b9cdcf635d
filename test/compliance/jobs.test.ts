/**
 * Export jobs (decisions §15): run by the job round, downloaded with Content-Digest, claimed once
 * across instances, resumed after a crash once the lease runs out (TestClock), kept 7 days then 410,
 * and limited per developer. A slow job keeps its lease (renewed while it runs) so no other
 * instance runs it too; a job whose runs never finish is failed after MAX_ATTEMPTS claims; the
 * limits hold under concurrent creates.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { verifyExport } from "../../scripts/verify-export.ts"
import { Duration, Fiber, Stream } from "effect"
import { LEASE_KIND, LEASE_MS, MAX_ATTEMPTS, runDueJobs } from "../../src/compliance/Jobs.ts"
import { Compliance } from "../../src/compliance/Service.ts"
import { startTestApp, usingRealPostgres, type TestApp } from "../support/app.ts"
import { download, jwksOf, seedAudit } from "./support.ts"
import { waitFor } from "../support/wait.ts"

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
  // rows only: the header row and one CRLF-ended record a row, as many as rowCounts says
  expect(new TextDecoder().decode(file.bytes).split("\r\n").length - 1).toBe(2_100 + 1)
  // verified from the job's proof (its view), or from the download's own headers (Export-Proof)
  expect(job).toMatchObject({ exportId: id, rows: 2_100, anchor: null, kid: jwks.keys[0].kid })
  expect(await verifyExport(file.bytes, jwks, { proof: job })).toMatchObject({ ok: true, rows: 2_100 })
  expect(await verifyExport(file.bytes, jwks, { headers: file.headers })).toMatchObject({ ok: true, rows: 2_100 })
  expect(file.headers.get("export-id")).toBe(id)
  // ?envelope=true wraps the same stored rows in the proof's lines: one file that verifies alone
  const wrapped = await download(app, d.apiKey, `/v1/compliance/exports/${id}/download?envelope=true`)
  expect(await verifyExport(wrapped.bytes, jwks)).toMatchObject({ ok: true, kind: "audit csv envelope", rows: 2_100 })
  const audited = await app.query<any>("SELECT metadata FROM audit_log WHERE developer_id = $1 AND action = 'service.compliance.exported' ORDER BY seq", [d.developerId])
  expect(audited.map((a) => [a.metadata.exportId, a.metadata.stage])).toEqual([[id, "started"], [id, "completed"]])
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
  await app.query("UPDATE compliance_exports SET status = 'running' WHERE id = $1", [id])
  await app.query("INSERT INTO leases (kind, key, holder, lease_until, attempts, updated_at) VALUES ($1, $2, 'a-dead-instance', $3, 1, $3)",
    [LEASE_KIND, id, leaseUntil])
  await app.query("INSERT INTO compliance_export_chunks (export_id, n, data) VALUES ($1, 0, $2)", [id, Buffer.from("{\"export\":{half a file")])
  expect(await round()).toEqual({ claimed: 0, completed: 0 })
  await app.adjust(LEASE_MS)
  expect(await round()).toEqual({ claimed: 0, completed: 0 })
  await app.adjust("1 millis")
  expect(await round()).toEqual({ claimed: 1, completed: 1 })
  const job = (await app.request("GET", `/v1/compliance/exports/${id}`, { apiKey: d.apiKey })).body
  expect(job).toMatchObject({ status: "complete", rowCounts: { entries: 1_200 } })
  const file = await download(app, d.apiKey, `/v1/compliance/exports/${id}/download`)
  expect(await verifyExport(file.bytes, jwks, { headers: file.headers })).toMatchObject({ ok: true, rows: 1_200 })
  expect((await app.query<any>("SELECT attempts, holder, lease_until FROM leases WHERE kind = $1 AND key = $2", [LEASE_KIND, id]))[0])
    .toEqual({ attempts: 2, holder: null, leaseUntil: null })
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
    expect(audited[0].n).toBe(2) // its start and its completion
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

test("a job exports the chain as it stood when it was requested: its start entry and later entries lie outside, a re-run reads the same rows", async () => {
  const d = await app.signup()
  await seedAudit(app, d.developerId, 300)
  const { id } = (await create(d.apiKey, { kind: "audit", format: "ndjson" })).body
  await seedAudit(app, d.developerId, 7) // written after the request
  // a first run that died after it had begun (its lease ran out), then the run that completes
  const leaseUntil = new Date((await nowMs()) + LEASE_MS)
  await app.query("UPDATE compliance_exports SET status = 'running' WHERE id = $1", [id])
  await app.query("INSERT INTO leases (kind, key, holder, lease_until, attempts, updated_at) VALUES ($1, $2, 'a-dead-instance', $3, 1, $3)",
    [LEASE_KIND, id, leaseUntil])
  await app.adjust(LEASE_MS + 1)
  expect(await round()).toEqual({ claimed: 1, completed: 1 })
  const job = (await app.request("GET", `/v1/compliance/exports/${id}`, { apiKey: d.apiKey })).body
  expect(job).toMatchObject({ status: "complete", rowCounts: { entries: 300 }, rows: 300 })
  const file = await download(app, d.apiKey, `/v1/compliance/exports/${id}/download`)
  const lines = new TextDecoder().decode(file.bytes).split("\n").slice(0, -1).map((l) => JSON.parse(l))
  expect(lines.map((e) => e.seq)).toEqual(Array.from({ length: 300 }, (_, i) => i + 1))
  expect(await verifyExport(file.bytes, jwks, { proof: job })).toMatchObject({ ok: true, rows: 300 })
})

test("a job that died after its proof and end entry, before it was marked complete: the re-run writes no second end entry", async () => {
  const d = await app.signup()
  await seedAudit(app, d.developerId, 50)
  const { id } = (await create(d.apiKey, { kind: "audit", format: "ndjson" })).body
  expect(await round()).toEqual({ claimed: 1, completed: 1 })
  // as if the completing transaction had never committed: running again, held by an instance that died
  await app.query("UPDATE compliance_exports SET status = 'running', completed_at = NULL WHERE id = $1", [id])
  await app.query("UPDATE leases SET holder = 'a-dead-instance', lease_until = $3 WHERE kind = $1 AND key = $2", [LEASE_KIND, id, new Date(await nowMs())])
  await app.adjust("1 millis")
  expect(await round()).toEqual({ claimed: 1, completed: 1 })
  const stages = await app.query<{ stage: string; n: number }>(
    `SELECT metadata->>'stage' AS stage, count(*)::int AS n FROM audit_log
      WHERE developer_id = $1 AND action = 'service.compliance.exported' AND metadata->>'exportId' = $2 GROUP BY 1 ORDER BY 1`, [d.developerId, id])
  expect(stages).toEqual([{ stage: "completed", n: 1 }, { stage: "started", n: 1 }])
  const file = await download(app, d.apiKey, `/v1/compliance/exports/${id}/download`)
  expect(await verifyExport(file.bytes, jwks, { headers: file.headers })).toMatchObject({ ok: true, rows: 50 })
})

// ---- the shared lease (platform/Leases.ts) and the locked limits ------------------------------------

/** the round with every export stream first waiting `delay` on the Effect Clock (a slow job); `started` counts runs */
let started = 0
const slowRound = (delay: Duration.DurationInput) =>
  runDueJobs().pipe(Effect.provideServiceEffect(Compliance, Effect.map(Compliance, (svc) => ({
    ...svc,
    exportStream: (...args: Parameters<typeof svc.exportStream>) =>
      Stream.concat(Stream.drain(Stream.fromEffect(Effect.sync(() => started++).pipe(Effect.zipRight(Effect.sleep(delay))))), svc.exportStream(...args))
  }))))

const statusOf = async (id: string) => (await app.query<any>("SELECT status FROM compliance_exports WHERE id = $1", [id]))[0]?.status

test("a slow job keeps its lease while it runs: another instance never runs it too, and it completes once", async () => {
  while ((await round()).claimed > 0) { /* earlier tests' jobs */ }
  const d = await app.signup()
  await seedAudit(app, d.developerId, 300)
  const { id } = (await create(d.apiKey, { kind: "audit", format: "ndjson" })).body
  const second = usingRealPostgres ? await startTestApp({ databaseUrl: app.databaseUrl, testClock: true, startTime: await nowMs() }) : app
  try {
    // this instance's run takes 4 leases' time before it writes a byte
    const slow = app.run(slowRound(`${4 * LEASE_MS} millis`))
    expect(await waitFor(async () => (await statusOf(id)) === "running")).toBe(true)
    const leaseUntil = async () =>
      new Date((await app.query<any>("SELECT lease_until FROM leases WHERE kind = $1 AND key = $2", [LEASE_KIND, id]))[0]?.leaseUntil ?? 0).getTime()
    for (let passed = 0; passed < 3 * LEASE_MS; passed += LEASE_MS / 6) {
      await app.adjust(`${LEASE_MS / 6} millis`)
      // the renewal (every third of the lease) has been written before the clock moves on
      const now = await nowMs()
      await waitFor(async () => (await leaseUntil()) - now > (2 * LEASE_MS) / 3 - 1, 100)
      await second.setTime(now)
      // the other instance finds nothing to claim: the lease is still held
      expect(await round(second)).toEqual({ claimed: 0, completed: 0 })
    }
    await app.adjust(`${LEASE_MS} millis`)
    expect(await slow).toEqual({ claimed: 1, completed: 1 })
    const job = (await app.request("GET", `/v1/compliance/exports/${id}`, { apiKey: d.apiKey })).body
    expect(job).toMatchObject({ status: "complete", rowCounts: { entries: 300 } })
    expect((await app.query<any>("SELECT attempts FROM leases WHERE kind = $1 AND key = $2", [LEASE_KIND, id]))[0].attempts).toBe(1)
    // one start (written with the job) and one completion: the job ran once
    const audited = await app.query<any>(
      "SELECT metadata->>'stage' AS stage FROM audit_log WHERE developer_id = $1 AND action = 'service.compliance.exported' ORDER BY stage", [d.developerId])
    expect(audited.map((a: any) => a.stage)).toEqual(["completed", "started"])
  } finally {
    if (second !== app) await second.server.stop()
  }
})

test("a job whose runs never finish (their instances die) is failed after the attempts cap, with a clear error", async () => {
  while ((await round()).claimed > 0) { /* earlier tests' jobs */ }
  const d = await app.signup()
  const { id } = (await create(d.apiKey, { kind: "grants", format: "ndjson" })).body
  started = 0
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    // an instance claims the job and dies mid-run (its fiber is interrupted; its lease is left behind)
    const fiber = await app.run(Effect.forkDaemon(slowRound("1 days")))
    expect(await waitFor(async () => started === attempt)).toBe(true)
    await app.run(Fiber.interrupt(fiber))
    await app.adjust(`${LEASE_MS + 1} millis`)
  }
  expect(await round()).toEqual({ claimed: 0, completed: 0 })
  const job = (await app.request("GET", `/v1/compliance/exports/${id}`, { apiKey: d.apiKey })).body
  expect(job).toMatchObject({ status: "failed", error: `the export could not be produced: ${MAX_ATTEMPTS} attempts did not finish`, sha256: null })
  // and it stays failed: never claimed again
  await app.adjust(`${LEASE_MS + 1} millis`)
  expect(await round()).toEqual({ claimed: 0, completed: 0 })
  expect(await statusOf(id)).toBe("failed")
})

test("concurrent creates cannot pass the limits together: exactly 3 unfinished jobs are accepted", async () => {
  const d = await app.signup()
  const answers = await Promise.all(Array.from({ length: 8 }, () => create(d.apiKey, { kind: "grants" })))
  expect(answers.map((a) => a.status).sort()).toEqual([202, 202, 202, 429, 429, 429, 429, 429])
  const [stored] = await app.query<any>("SELECT count(*)::int AS n FROM compliance_exports WHERE developer_id = $1", [d.developerId])
  expect(stored.n).toBe(3)
})
