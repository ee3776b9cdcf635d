/**
 * Streamed exports beyond their rows (decisions §15, revised): cells a spreadsheet would run as
 * formulas, the one-file envelope form, and the audit chain's record of every export, started and
 * completed, so one whose client went away is still on record.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { parse } from "csv-parse/sync"
import { verifyExport } from "../../scripts/verify-export.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { download, jwksOf, seedAudit, streamedExport } from "./support.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
let jwks: any

/** what a spreadsheet would run as a formula, and a value that already starts with the guard */
const RISKY = ["=HYPERLINK(\"http://evil.example\",\"x\")", "+1+1", "-2+3", "@SUM(A1:A9)", "\tcmd", "\rcmd", "'=already quoted"]

beforeAll(async () => {
  app = await startTestApp()
  dev = await app.signup()
  await seedAudit(app, dev.developerId, 40, (i) => i < RISKY.length
    ? { action: RISKY[i]!, principalId: RISKY[(i + 1) % RISKY.length]!, agentDid: RISKY[(i + 2) % RISKY.length]! }
    : {})
  jwks = await jwksOf(app)
})
afterAll(() => app.stop())

const text = (b: Uint8Array) => new TextDecoder().decode(b)
const exportedEntries = (developerId: string) =>
  app.query<any>("SELECT metadata FROM audit_log WHERE developer_id = $1 AND action = 'service.compliance.exported' ORDER BY seq", [developerId])

describe("formula injection", () => {
  test("no CSV cell starts with = + - @ tab or CR: each such cell (and one starting with ') gets a leading '; the verifier reads them back", async () => {
    const r = await streamedExport(app, dev.apiKey, "/v1/compliance/export/audit?format=csv")
    const cells = (parse(text(r.bytes), { relax_quotes: false, relax_column_count: false }) as Array<Array<string>>).flat()
    expect(cells.filter((c) => /^[=+\-@\t\r]/.test(c))).toEqual([])
    const records = parse(text(r.bytes), { columns: true }) as Array<Record<string, string>>
    expect(records.slice(0, RISKY.length).map((row) => row.action)).toEqual(RISKY.map((v) => `'${v}`))
    expect(records[0]!.principalId).toBe(`'${RISKY[1]}`)
    // the guard is only in the CSV: NDJSON carries the values as stored, and both verify
    const nd = await streamedExport(app, dev.apiKey, "/v1/compliance/export/audit?format=ndjson")
    expect(text(nd.bytes).split("\n").slice(0, RISKY.length).map((l) => JSON.parse(l).action)).toEqual(RISKY)
    expect(await verifyExport(r.bytes, jwks, { proof: r.proof })).toMatchObject({ ok: true, rows: 40 })
    // (and the CSV export's own two entries)
    expect(await verifyExport(nd.bytes, jwks, { proof: nd.proof })).toMatchObject({ ok: true, rows: 42 })
  })
})

describe("?envelope=true: the one-file form", () => {
  for (const format of ["ndjson", "csv"] as const) {
    test(`${format}: a first line with the start, the same rows, a last line with the very proof the API serves`, async () => {
      const r = await streamedExport(app, dev.apiKey, `/v1/compliance/export/audit?format=${format}&envelope=true&until=2100-01-01`)
      const lines = text(r.bytes).split("\n").slice(0, -1)
      const [first, last] = format === "ndjson"
        ? [JSON.parse(lines[0]!).export, JSON.parse(lines.at(-1)!).exportEnd]
        : [JSON.parse(lines[0]!.slice("# export ".length)), JSON.parse(lines.at(-1)!.slice("# end ".length))]
      const { id, rowCounts, bytes, createdAt, completedAt, expiresAt, error, ...proof } = r.proof
      expect(last).toEqual(proof)
      expect(first).toEqual({
        exportId: proof.exportId, kind: "audit", format, issuer: proof.issuer, developerId: dev.developerId, generatedAt: proof.generatedAt,
        since: null, until: proof.until, filters: {}, anchor: null
      })
      expect(lines.length).toBe(proof.rows + (format === "csv" ? 3 : 2))
      if (format === "csv") {
        const rows = parse(text(r.bytes), { comment: "#", comment_no_infix: true, columns: true }) as Array<any>
        expect(rows.length).toBe(proof.rows)
      }
      expect(await verifyExport(r.bytes, jwks)).toEqual({ ok: true, kind: `audit ${format} envelope`, rows: proof.rows, errors: [] })
    })
  }

  test("an envelope whose first line no longer says what the proof says is refused", async () => {
    const r = await download(app, dev.apiKey, "/v1/compliance/export/grants?format=ndjson&envelope=true")
    const lines = text(r.bytes).split("\n")
    const first = JSON.parse(lines[0]!)
    lines[0] = JSON.stringify({ export: { ...first.export, filters: { status: "active" } } })
    const v = await verifyExport(new TextEncoder().encode(lines.join("\n")), jwks)
    expect(v.errors).toEqual(["the first line does not say what the signed proof says"])
  })
})

describe("the audit chain records every export", () => {
  test("when it starts (what, with which filters) and when it ends (rows, digest)", async () => {
    const d = await app.signup()
    await seedAudit(app, d.developerId, 5) // one of them a failure
    const r = await streamedExport(app, d.apiKey, "/v1/compliance/export/audit?format=ndjson&status=success")
    const entries = await app.request("GET", "/v1/audit/entries?action=service.compliance.exported", { apiKey: d.apiKey })
    const common = { exportId: r.proof.exportId, kind: "audit", format: "ndjson" }
    expect(entries.body.entries.map((e: any) => e.metadata).sort((a: any, b: any) => a.stage.localeCompare(b.stage))).toEqual([
      { ...common, stage: "completed", rows: 4, sha256: r.proof.sha256 },
      { ...common, stage: "started", since: null, until: null, filters: { status: "success" } }
    ])
    const pack = await app.request("GET", "/v1/compliance/evidence-pack", { apiKey: d.apiKey })
    expect((await exportedEntries(d.developerId)).slice(2).map((e) => [e.metadata.exportId, e.metadata.stage])).toEqual([
      [pack.body.meta.exportId, "started"], [pack.body.meta.exportId, "completed"]
    ])
  })

  test("a 20,000-row export has 20,000 lines; a client that goes away mid-export leaves its start on the chain and no proof", async () => {
    const d = await app.signup()
    await seedAudit(app, d.developerId, 20_000)
    const whole = await streamedExport(app, d.apiKey, "/v1/compliance/export/audit?format=ndjson&until=2100-01-01")
    expect(text(whole.bytes).split("\n").length - 1).toBe(20_000)
    expect(whole.proof.rowCounts).toEqual({ entries: 20_000 })
    const controller = new AbortController()
    const res = await fetch(`${app.url}/v1/compliance/export/audit?format=csv`, {
      headers: { authorization: `Bearer ${d.apiKey}` }, signal: controller.signal
    })
    const exportId = res.headers.get("export-id")!
    const reader = res.body!.getReader()
    await reader.read()
    controller.abort()
    await reader.read().catch(() => undefined)
    // a new connection: the service still serves (the embedded database's one connection too)
    const after = await streamedExport(app, d.apiKey, "/v1/compliance/export/audit?format=ndjson&status=blocked")
    expect((await verifyExport(after.bytes, jwks, { proof: after.proof })).ok).toBe(true)
    const stages = (await exportedEntries(d.developerId)).filter((e) => e.metadata.exportId === exportId).map((e) => e.metadata.stage)
    expect(stages).toEqual(["started"])
    expect((await app.request("GET", `/v1/compliance/exports/${exportId}`, { apiKey: d.apiKey })).status).toBe(404)
  }, 120_000)
})

test("the verifier's command line: body, JWKS, proof.json and the headers as curl -D writes them", async () => {
  const { mkdtempSync, rmSync, writeFileSync } = await import("node:fs")
  const dir = mkdtempSync("/tmp/verify-export-")
  const r = await streamedExport(app, dev.apiKey, "/v1/compliance/export/audit?format=csv&until=2100-01-01")
  writeFileSync(`${dir}/audit.csv`, r.bytes)
  writeFileSync(`${dir}/jwks.json`, JSON.stringify(jwks))
  writeFileSync(`${dir}/proof.json`, JSON.stringify(r.proof))
  writeFileSync(`${dir}/headers.txt`, `HTTP/1.1 200 OK\r\n${[...r.headers.entries()].map(([k, v]) => `${k}: ${v}`).join("\r\n")}\r\n\r\n`)
  const run = (...args: Array<string>) => {
    const p = Bun.spawnSync([process.execPath, "scripts/verify-export.ts", ...args], { cwd: new URL("../..", import.meta.url).pathname })
    return { code: p.exitCode, out: p.stdout.toString() }
  }
  expect(run(`${dir}/audit.csv`, `${dir}/jwks.json`, `${dir}/proof.json`, "--headers", `${dir}/headers.txt`))
    .toEqual({ code: 0, out: `VALID: audit csv, ${r.proof.rows} rows\n` })
  writeFileSync(`${dir}/audit.csv`, Buffer.from(r.bytes).toString("utf8").replace("success", "failure"))
  const bad = run(`${dir}/audit.csv`, `${dir}/jwks.json`, `${dir}/proof.json`)
  expect(bad.code).toBe(1)
  expect(bad.out).toContain("sha256 of the body does not match its proof")
  expect(run(`${dir}/audit.csv`, `${dir}/jwks.json`)).toMatchObject({ code: 1, out: expect.stringContaining("no proof") })
  rmSync(dir, { recursive: true, force: true })
})

test("decisions §24: `agent-auth verify-export`, and the verifier's own package installed alone and run by plain Node", async () => {
  const { mkdtempSync, rmSync, writeFileSync } = await import("node:fs")
  const { buildVerifierPackage } = await import("../../scripts/buildKit.ts")
  const root = new URL("../..", import.meta.url).pathname
  const dir = mkdtempSync("/tmp/verify-export-pkg-")
  try {
    const r = await streamedExport(app, dev.apiKey, "/v1/compliance/export/audit?format=ndjson&until=2100-01-01")
    writeFileSync(`${dir}/audit.ndjson`, r.bytes)
    writeFileSync(`${dir}/jwks.json`, JSON.stringify(jwks))
    writeFileSync(`${dir}/proof.json`, JSON.stringify(r.proof))
    const spawn = (cmd: Array<string>, cwd = root) => {
      const p = Bun.spawnSync(cmd, { cwd, env: { ...process.env, npm_config_loglevel: "silent" } })
      return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() }
    }
    const args = [`${dir}/audit.ndjson`, `${dir}/jwks.json`, `${dir}/proof.json`]
    const valid = `VALID: audit ndjson, ${r.proof.rows} rows\n`
    // the binary's command (src/main.ts is what dist/agent-auth runs)
    expect(spawn([process.execPath, "src/main.ts", "verify-export", ...args])).toMatchObject({ code: 0, out: valid })
    // the package: packed, installed into an empty project from its tarball alone, run with node
    const out = `${dir}/export-verifier`
    await buildVerifierPackage(out)
    const project = `${dir}/auditor`
    Bun.spawnSync(["mkdir", "-p", project])
    writeFileSync(`${project}/package.json`, JSON.stringify({ name: "auditor", private: true }))
    const packed = spawn(["npm", "pack", out, "--pack-destination", project, "--ignore-scripts", "--offline", "--silent"], project)
    expect(packed.code).toBe(0)
    const tarball = `${project}/${packed.out.trim().split("\n").pop()}`
    expect(spawn(["npm", "install", tarball, "--offline", "--ignore-scripts", "--no-audit", "--no-fund", "--silent"], project).code).toBe(0)
    const bin = `${project}/node_modules/.bin/agent-auth-verify-export`
    expect(spawn(["node", bin, ...args], project)).toMatchObject({ code: 0, out: valid, err: "" })
    writeFileSync(`${dir}/audit.ndjson`, Buffer.from(r.bytes).toString("utf8").replace("success", "failure"))
    const bad = spawn(["node", bin, ...args], project)
    expect([bad.code, bad.out.startsWith("INVALID")]).toEqual([1, true])
    expect(spawn(["node", bin], project).code).toBe(2)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}, 120_000)
