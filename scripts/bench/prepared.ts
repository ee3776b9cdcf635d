/**
 * Issue 27: what PostgreSQL itself spends per light query with and without prepared statements
 * (PgPool.ts). Two services, one sending every statement unnamed (PG_PREPARE=false, as before) and
 * one preparing, serve revocation status in interleaved rounds; the CPU time of the PostgreSQL
 * backends serving each service's pool is read from /proc (same host only) and divided by the
 * requests served.
 */
import { readFileSync } from "node:fs"
import { PgPool } from "../../src/platform/PgPool.ts"
import { wrk } from "./load/wrk.ts"
import { cpuCell, makeCpuTally, postJson, row, startBenchServer } from "./support.ts"

const backendTicks = (pids: ReadonlyArray<number>) => {
  let ticks = 0
  for (const pid of pids) {
    try {
      const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
      ticks += Number(f[11]) + Number(f[12])
    } catch {
      // the backend ended (an idle connection closed): its time is lost to both sides alike
    }
  }
  return ticks
}

export async function run() {
  if (process.env.TEST_DATABASE_URL === undefined) return { skipped: "embedded database (statements are not prepared there)" }
  const start = async (prepare: boolean) => {
    process.env.PG_PREPARE = prepare ? "true" : "false"
    const server = await startBenchServer()
    delete process.env.PG_PREPARE
    const json = postJson(server.url)
    const { apiKey } = await json("/v1/signup", { name: "bench" })
    const agent = await json("/v1/agents", { name: "bench", scopes: ["email:read"] }, apiKey)
    const bundles: Array<string> = []
    for (let i = 0; i < 16; i++) bundles.push((await json("/v1/consent-bundles", { agentId: agent.agentId, userId: `u${i}`, scopes: ["email:read"] }, apiKey)).bundleId)
    const send = { url: server.url, pid: server.pid, expectBody: '"active"', requests: bundles.map((b) => ({ path: `/v1/consent-bundles/${b}/revocation-status`, headers: { authorization: `Bearer ${apiKey}` } })) }
    await wrk(send, { seconds: 1 })
    // the pool's connections, by backend pid (each service has its own database; the bench process's
    // idle control instance has a few there too, whose CPU stays ~0)
    const pool = await server.run(PgPool)
    const { rows } = await pool.query("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'agent-auth'")
    return { server, send, pids: rows.map((r) => Number(r.pid)), ticks: 0, requests: 0, perSecond: [] as Array<number>, cpu: makeCpuTally(server.pid) }
  }
  const sides = { unnamed: await start(false), prepared: await start(true) }
  try {
    for (let i = 0; i < 3; i++) {
      for (const side of [sides.unnamed, sides.prepared]) {
        const t0 = backendTicks(side.pids)
        const r = await side.cpu.wrk(side.send, 2, 0)
        side.ticks += backendTicks(side.pids) - t0
        side.requests += r.requests
        side.perSecond.push(r.perSecond)
      }
    }
  } finally {
    await sides.unnamed.server.stop()
    await sides.prepared.server.stop()
  }
  // USER_HZ = 100: a tick is 10 ms
  const micros = (s: typeof sides.unnamed) => Math.round((s.ticks * 10_000) / s.requests)
  const rate = (s: typeof sides.unnamed) => Math.round(s.perSecond.reduce((a, b) => a + b, 0) / s.perSecond.length)
  row("PostgreSQL CPU per revocation-status request µs, prepared", micros(sides.prepared), micros(sides.unnamed), "floor column: unnamed statements (before)")
  row("  revocation status req/s, prepared", rate(sides.prepared), rate(sides.unnamed))
  row("  CPU per request µs, service process / machine, prepared", cpuCell(sides.prepared.cpu.perRequest()), cpuCell(sides.unnamed.cpu.perRequest()))
  return {
    cpuMicrosPrepared: sides.prepared.cpu.perRequest(), cpuMicrosUnnamed: sides.unnamed.cpu.perRequest(),
    postgresMicrosPrepared: micros(sides.prepared), postgresMicrosUnnamed: micros(sides.unnamed),
    perSecondPrepared: rate(sides.prepared), perSecondUnnamed: rate(sides.unnamed)
  }
}

if (import.meta.main) {
  await run()
  process.exit(0)
}
