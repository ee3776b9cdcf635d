/**
 * Issue 3: what the rate-limit gate costs. Requests/second of an API-key route (GET /v1/me) with
 * the gate on versus the same service without it, in one run. Target: under 10% throughput lost.
 * The gate makes exactly one counter-store round trip per request (one EVALSHA of the Lua script,
 * whatever the number of windows); with Redis that is counted on the service's own client.
 */
import Redis from "ioredis"
import { Counters } from "../../src/platform/Counters.ts"
import { cpuCell, load, type LoadResult, makeCpuTally, row, startBenchServer } from "./support.ts"

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
    const send = () => fetch(`${server.url}/v1/me`, { headers }).then(async (r) => (await r.arrayBuffer(), r.ok))
    return { server, send }
  }
  const withGate = await start(true)
  const withoutGate = await start(false)
  const rounds = { on: [] as Array<LoadResult>, off: [] as Array<LoadResult> }
  // CPU per request, main thread (the event loop) and whole machine, over the rounds
  const tally = { on: makeCpuTally(), off: makeCpuTally() }
  try {
    for (let i = 0; i < 4; i++) {
      rounds.off.push(await tally.off.measure(withoutGate.send, 1.5))
      rounds.on.push(await tally.on.measure(withGate.send, 1.5))
    }
  } finally {
    await withGate.server.stop()
    await withoutGate.server.stop()
  }
  const combine = (rs: Array<LoadResult>) => ({
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
  row("  CPU per request µs, event loop / machine (on)", cpuCell(cpuOn), cpuCell(cpuOff))
  // What the gate adds per request, next to the 10% budget of a request without it: the part on the
  // event loop and the part anywhere on the machine (Redis, the kernel's loopback, the client).
  if (Number.isFinite(cpuOn.main)) {
    row("  gate CPU per request on the event loop µs", `+${Math.round(cpuOn.main - cpuOff.main)}`, `${Math.round(cpuOff.main / 10)} (10% of ${Math.round(cpuOff.main)})`)
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
    // same Redis server do not count.
    const server = await startBenchServer()
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
      const send = () => fetch(`http://127.0.0.1:${bare.port}/`).then(async (r) => (await r.arrayBuffer(), r.ok))
      const plain = makeCpuTally(), called = makeCpuTally()
      const plainRuns = [], calledRuns = []
      for (let i = 0; i < 3; i++) {
        withCall = false
        plainRuns.push((await plain.measure(send, 1)).perSecond)
        withCall = true
        calledRuns.push((await called.measure(send, 1)).perSecond)
      }
      const a = Math.round(plainRuns.reduce((x, y) => x + y, 0) / plainRuns.length)
      const b = Math.round(calledRuns.reduce((x, y) => x + y, 0) / calledRuns.length)
      // issue 27, target 5: the gate's event-loop CPU beyond the one round trip it cannot avoid
      const roundTrip = Math.round(called.perRequest().main - plain.perRequest().main)
      row("diagnostic: bare handler req/s with one Redis call", b, a, `one round trip = ${roundTrip} µs of event-loop CPU (bare handler)`)
      row("  CPU per request µs, event loop / machine (with the call)", cpuCell(called.perRequest()), cpuCell(plain.perRequest()))
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
