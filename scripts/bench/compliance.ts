/**
 * Issue 24: NDJSON audit export speed, rows per second through the service (HTTP, streamed from
 * keyset pages, hashed and signed), printed next to the floor measured in the same run: a plain
 * `COPY (the same rows as JSON) TO STDOUT` read by a bare client. The issue asks for at least
 * 50,000 rows/s. CSV is measured too. COMPLIANCE_BENCH_ENTRIES sets the size (default 200,000).
 * The COPY floor needs a real PostgreSQL (TEST_DATABASE_URL): the embedded database serves one
 * connection, which the service holds.
 */
import { Effect } from "effect"
import pg from "pg"
import { AuditChain, type AppendInput } from "../../src/platform/AuditChain.ts"
import { cpuCell, makeCpuTally, row, startBenchServer } from "./support.ts"

const N = Number(process.env.COMPLIANCE_BENCH_ENTRIES ?? 200_000)

/** a bare COPY OUT through node-postgres: counts bytes and rows, keeps nothing */
class CopyOut {
  bytes = 0
  rows = 0
  private resolve!: () => void
  private reject!: (e: unknown) => void
  readonly done = new Promise<void>((res, rej) => { this.resolve = res; this.reject = rej })
  constructor(private readonly text: string) {}
  submit(connection: any) { connection.query(this.text) }
  handleCopyData(msg: { chunk: Buffer }) {
    this.bytes += msg.chunk.length
    for (let i = 0; i < msg.chunk.length; i++) if (msg.chunk[i] === 10) this.rows++
  }
  handleCommandComplete() {}
  handleReadyForQuery() { this.resolve() }
  handleError(e: unknown) { this.reject(e) }
}

const drain = async (url: string, apiKey: string) => {
  const started = performance.now()
  const res = await fetch(url, { headers: { authorization: `Bearer ${apiKey}` } })
  const reader = res.body!.getReader()
  let bytes = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    bytes += value.length
  }
  return { seconds: (performance.now() - started) / 1000, bytes }
}

export async function run() {
  const server = await startBenchServer()
  try {
    const { apiKey, developerId } = await fetch(`${server.url}/v1/signup`, {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: "bench" })
    }).then((r) => r.json() as any)
    for (let start = 0; start < N; start += 5000) {
      const inputs: Array<AppendInput> = []
      for (let i = start; i < Math.min(N, start + 5000); i++) {
        inputs.push({ developerId, action: "email.read", agentId: `ag_${i % 7}`, agentDid: `did:service:ag_${i % 7}`, grantId: `grnt_${i % 11}`,
          principalId: `user_${i % 13}`, metadata: { i, source: "bench" }, status: "success" })
      }
      await server.run(Effect.flatMap(AuditChain, (c) => c.appendMany(inputs)))
    }
    const ndjsonUrl = `${server.url}/v1/compliance/export/audit?format=ndjson`
    await drain(ndjsonUrl, apiKey) // warm-up
    // CPU per exported row: the service's process (its own, this one draining the answer) or, for
    // the floor, the bare client's event loop; and the machine (PostgreSQL too)
    const cpu = { nd: makeCpuTally(server.pid), csv: makeCpuTally(server.pid), floor: makeCpuTally() }
    const nd = await cpu.nd.during(() => drain(ndjsonUrl, apiKey), () => N)
    const csv = await cpu.csv.during(() => drain(`${server.url}/v1/compliance/export/audit?format=csv`, apiKey), () => N)
    const ndRate = Math.round(N / nd.seconds)
    let floor: number | undefined
    if (!server.config.databaseUrl.startsWith("pglite://")) {
      const client = new pg.Client({ connectionString: server.config.databaseUrl })
      await client.connect()
      try {
        const copy = new CopyOut(`COPY (SELECT json_build_object('seq', seq, 'entryId', id, 'agentId', agent_id, 'agentDid', agent_did,
            'grantId', grant_id, 'principalId', principal_id, 'developerId', developer_id, 'action', action, 'metadata', metadata,
            'status', status, 'timestamp', timestamp, 'prevHash', prev_hash, 'hash', hash)::text
          FROM audit_log WHERE developer_id = '${developerId.replace(/'/g, "''")}' AND seq <= ${N} ORDER BY seq) TO STDOUT`)
        const started = performance.now()
        await cpu.floor.during(() => (client.query(copy as any), copy.done), () => copy.rows)
        floor = Math.round(copy.rows / ((performance.now() - started) / 1000))
      } finally {
        await client.end()
      }
    }
    row(`NDJSON audit export rows/s (${N} entries, ${(nd.bytes / 1048576).toFixed(0)} MB)`, ndRate,
      floor === undefined ? "n/a (embedded)" : `${floor} (COPY TO STDOUT)`, ndRate >= 50_000 ? "meets 50,000" : "below 50,000")
    row("  CPU per exported row µs, service process (floor: its client) / machine", cpuCell(cpu.nd.perRequest(), 1), floor === undefined ? undefined : cpuCell(cpu.floor.perRequest(), 1))
    row("CSV audit export rows/s", Math.round(N / csv.seconds))
    row("  CPU per exported row µs, service process / machine", cpuCell(cpu.csv.perRequest(), 1))
    return {
      entries: N, ndjsonRowsPerSecond: ndRate, csvRowsPerSecond: Math.round(N / csv.seconds), copyFloorRowsPerSecond: floor ?? null,
      cpuMicrosPerRow: { ndjson: cpu.nd.perRequest(), csv: cpu.csv.perRequest(), ...(floor === undefined ? {} : { copyFloor: cpu.floor.perRequest() }) }
    }
  } finally {
    await server.stop()
  }
}

if (import.meta.main) {
  await run()
  process.exit(0)
}
