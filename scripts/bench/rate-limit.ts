/**
 * Issue 3: what the rate-limit gate costs. Requests/second of an API-key route (GET /v1/me) with
 * the gate on versus the same service without it, in one run. Target: under 10% throughput lost.
 * The gate makes exactly one counter-store round trip per request (one EVALSHA of the Lua script,
 * whatever the number of windows); with Redis that is counted on the service's own client.
 */
import Redis from "ioredis"
import { Counters } from "../../src/platform/Counters.ts"
import type { WrkResult } from "./load/wrk.ts"
import { cpuCell, makeCpuTally, row, startBenchServer } from "./support.ts"

export async function run() {
  const results: Record<string, unknown> = {}
  // Both services run side by side and take turns in short rounds, so background load on the
  // machine falls on both alike.
  const start = async (rateLimit: boolean) => {
    // both through the API (the lean path gates with the same admission, and has no gate-less form)
    const server = await startBenchServer({}, { rateLimit, lean: false })
    const signup = await fetch(`${server.url}/v1/signup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "bench" })
    }).then((r) => r.json() as Promise<{ apiKey: string }>)
    const headers = { authorization: `Bearer ${signup.apiKey}` }
    return { server, send: { url: server.url, pid: server.pid, requests: [{ path: "/v1/me", headers }], expectBody: '"developerId"' } }
  }
  const withGate = await start(true)
  const withoutGate = await start(false)
  const rounds = { on: [] as Array<WrkResult>, off: [] as Array<WrkResult> }
  // CPU per request, each service's process and the whole machine, over the rounds
  const tally = { on: makeCpuTally(withGate.server.pid), off: makeCpuTally(withoutGate.server.pid) }
  try {
    for (let i = 0; i < 3; i++) {
      rounds.off.push(await tally.off.wrk(withoutGate.send, 2, i === 0 ? 2 : 0))
      rounds.on.push(await tally.on.wrk(withGate.send, 2, i === 0 ? 2 : 0))
    }
  } finally {
    await withGate.server.stop()
    await withoutGate.server.stop()
  }
  const combine = (rs: Array<WrkResult>) => ({
    perSecond: Math.round(rs.reduce((a, r) => a + r.perSecond, 0) / rs.length),
    p50Ms: Number((rs.reduce((a, r) => a + r.p50Ms, 0) / rs.length).toFixed(2)),
    p99Ms: Number((rs.reduce((a, r) => a + r.p99Ms, 0) / rs.length).toFixed(2))
  })
  const on = combine(rounds.on)
  const off = combine(rounds.off)
  const cost = 1 - on.perSecond / off.perSecond
  // issue 3's bound (< 10% of a request through the API) is replaced by issue 27's target 5 below
  // (the gate's CPU beyond the one Redis round trip no design with a shared counter can avoid)
  row("GET /v1/me req/s, limiter on", on.perSecond, off.perSecond, `${(cost * 100).toFixed(1)}% cost (issue 3 asked < 10%; see the last row)`)
  row("  p50 / p99 ms (on)", `${on.p50Ms} / ${on.p99Ms}`, `${off.p50Ms} / ${off.p99Ms}`)
  const cpuOn = tally.on.perRequest()
  const cpuOff = tally.off.perRequest()
  row("  CPU per request µs, service process / machine (on)", cpuCell(cpuOn), cpuCell(cpuOff))
  // What the gate adds per request, next to the 10% budget of a request without it: the part in the
  // service's process and the part anywhere on the machine (Redis, the kernel's loopback, wrk).
  if (Number.isFinite(cpuOn.main)) {
    row("  gate CPU per request in the service's process µs", `+${Math.round(cpuOn.main - cpuOff.main)}`, `${Math.round(cpuOff.main / 10)} (10% of ${Math.round(cpuOff.main)})`)
    row("  gate CPU per request on the machine µs", `+${Math.round(cpuOn.machine - cpuOff.machine)}`, `${Math.round(cpuOff.machine / 10)} (10% of ${Math.round(cpuOff.machine)})`)
    results.gateMainThreadMicros = Math.round(cpuOn.main - cpuOff.main)
    results.gateMachineMicros = Math.round(cpuOn.machine - cpuOff.machine)
    results.requestMainThreadMicrosWithoutGate = Math.round(cpuOff.main)
    results.requestMachineMicrosWithoutGate = Math.round(cpuOff.machine)
  }
  results.limiterOnPerSecond = on.perSecond
  results.limiterOffPerSecond = off.perSecond
  results.limiterCostPercent = Number((cost * 100).toFixed(1))

  if (process.env.TEST_REDIS_URL) {
    // Counted on the service's own Redis client (every command it sends), so other users of the
    // same Redis server do not count: a count, not a timing, so this service runs in this process.
    const server = await startBenchServer({}, { inProcess: true })
    try {
      const client = (await server.run(Counters)).redis as any
      let commands = 0
      const send = client.sendCommand.bind(client)
      client.sendCommand = (...args: Array<unknown>) => (commands++, send(...args))
      const signup = await fetch(`${server.url}/v1/signup`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: "rt" }) }).then((r) => r.json() as Promise<{ apiKey: string }>)
      await fetch(`${server.url}/v1/me`, { headers: { authorization: `Bearer ${signup.apiKey}` } }).then((r) => r.arrayBuffer())
      commands = 0
      for (let i = 0; i < 100; i++) await fetch(`${server.url}/v1/me`, { headers: { authorization: `Bearer ${signup.apiKey}` } }).then((r) => r.arrayBuffer())
      const perRequest = commands / 100
      row("Redis commands per limited request (the service's client)", perRequest, 1, perRequest === 1 ? "PASS" : "FAIL")
      results.redisRoundTripsPerRequest = perRequest
    } finally {
      await server.stop()
    }
    // Diagnostic: what one Redis round trip costs a bare Bun handler on this machine, the part of
    // the gate's cost no gate design with a shared counter per request can avoid.
    const client = new Redis(process.env.TEST_REDIS_URL, { enableAutoPipelining: true, commandTimeout: 250 })
    const key = `bench_rt_${Math.random().toString(36).slice(2, 8)}`
    let withCall = false
    const bare = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async () => {
        if (withCall) await client.eval("return redis.call('INCR', KEYS[1])", 1, key)
        return new Response("ok")
      }
    })
    try {
      const send = { url: `http://127.0.0.1:${bare.port}`, pid: process.pid, requests: [{ path: "/" }] }
      // this process serves it (its control instances idle meanwhile)
      const plain = makeCpuTally(process.pid), called = makeCpuTally(process.pid)
      const plainRuns = [], calledRuns = []
      for (let i = 0; i < 3; i++) {
        withCall = false
        plainRuns.push((await plain.wrk(send, 1, i === 0 ? 1 : 0)).perSecond)
        withCall = true
        calledRuns.push((await called.wrk(send, 1, i === 0 ? 1 : 0)).perSecond)
      }
      const a = Math.round(plainRuns.reduce((x, y) => x + y, 0) / plainRuns.length)
      const b = Math.round(calledRuns.reduce((x, y) => x + y, 0) / calledRuns.length)
      // issue 27, target 5: the gate's CPU beyond the one round trip it cannot avoid
      const roundTrip = Math.round(called.perRequest().main - plain.perRequest().main)
      row("diagnostic: bare handler req/s with one Redis call", b, a, `one round trip = ${roundTrip} µs of the process's CPU (bare handler)`)
      row("  CPU per request µs, serving process / machine (with the call)", cpuCell(called.perRequest()), cpuCell(plain.perRequest()))
      if (results.gateMainThreadMicros !== undefined) {
        const beyond = (results.gateMainThreadMicros as number) - roundTrip
        row("gate CPU per request beyond its one round trip µs", beyond, 25, beyond <= 25 ? "PASS (≤ 25 µs)" : "FAIL (> 25 µs)")
        results.gateBeyondRoundTripMicros = beyond
      }
      results.bareHandlerPerSecond = a
      results.bareHandlerWithRedisCallPerSecond = b
      results.redisRoundTripMainThreadMicros = roundTrip
      await client.del(key)
    } finally {
      bare.stop(true)
      client.disconnect()
    }
  }
  return results
}

if (import.meta.main) await run()
