/**
 * An export job survives its instance being killed (decisions §15): a separate server process runs
 * the job, is SIGKILLed once part of the file is written, and another instance claims the job once
 * the lease has run out (its clock set past the lease) and completes it, the file verified.
 * Real PostgreSQL only: in embedded mode the database lives inside the killed process.
 */
import { expect, test } from "bun:test"
import { verifyExport } from "../../scripts/verify-export.ts"
import { runDueJobs } from "../../src/compliance/Jobs.ts"
import { createDatabase, startTestApp, testPrivateKey, usingRealPostgres } from "../support/app.ts"
import { download, jwksOf, seedAudit, spawnServer } from "./support.ts"

test.skipIf(!usingRealPostgres)("a job whose server was SIGKILLed mid-file is completed by another instance after the lease", async () => {
  const N = 60_000
  const db = await createDatabase()
  const seeder = await startTestApp({ databaseUrl: db.url })
  let server: Awaited<ReturnType<typeof spawnServer>> | undefined
  let survivor: Awaited<ReturnType<typeof startTestApp>> | undefined
  try {
    const d = await seeder.signup()
    await seedAudit(seeder, d.developerId, N)
    server = await spawnServer(db.url, testPrivateKey(), { MIGRATE_ON_START: "false", COMPLIANCE_JOB_POLL_SECONDS: "1" })
    const created = await fetch(`${server.url}/v1/compliance/exports`, {
      method: "POST", headers: { authorization: `Bearer ${d.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ kind: "audit", format: "csv" })
    })
    expect(created.status).toBe(202)
    const { id } = await created.json() as { id: string }
    // kill the server as soon as the first chunk of the file is stored
    for (let i = 0; i < 500; i++) {
      const [c] = await seeder.query<any>("SELECT count(*)::int AS n FROM compliance_export_chunks WHERE export_id = $1", [id])
      if (c.n > 0) break
      await Bun.sleep(10)
    }
    server.kill("SIGKILL")
    await server.exited
    const [job] = await seeder.query<any>(`SELECT status, (SELECT lease_until FROM leases WHERE kind = 'compliance.export' AND key = $1) AS lease_until,
      (SELECT count(*)::int FROM compliance_export_chunks WHERE export_id = $1) AS chunks FROM compliance_exports WHERE id = $1`, [id])
    expect(job.status).toBe("running")
    expect(job.chunks).toBeGreaterThan(0)
    // before the lease runs out nobody takes it; after, another instance does
    expect(await seeder.run(runDueJobs())).toEqual({ claimed: 0, completed: 0 })
    survivor = await startTestApp({ databaseUrl: db.url, testClock: true, startTime: job.leaseUntil.getTime() + 1 })
    expect(await survivor.run(runDueJobs())).toEqual({ claimed: 1, completed: 1 })
    const view = (await survivor.request("GET", `/v1/compliance/exports/${id}`, { apiKey: d.apiKey })).body
    expect(view).toMatchObject({ status: "complete", rowCounts: { entries: N } })
    const file = await download(survivor, d.apiKey, `/v1/compliance/exports/${id}/download`)
    expect(await verifyExport(file.bytes, await jwksOf(survivor), { headers: file.headers })).toMatchObject({ ok: true, rows: N })
  } finally {
    server?.kill("SIGKILL")
    await survivor?.server.stop()
    await seeder.stop()
  }
}, 180_000)
