/**
 * Issue 4: POST /v1/tokens/verify and POST /v1/token per second, next to two floors measured in the
 * same run: the crypto alone (RS256 verify as the service makes it, and sign through the Keys
 * service, per second in this process) and the service's HTTP floor (GET /v1/me: API-key
 * authentication and the limiter, a constant-sized body, through the API's pipeline as when issue 4
 * set it: `?via=api`, since the lean path answers no query string). Target: tokens/verify ≥ 60% of
 * the lower floor. The lean GET /v1/me (issue 27: no fiber, nearly a bare handler) is printed
 * beside it; verify's own full floor (the same query and crypto, bare) is in light-reads.ts.
 */
import { Effect } from "effect"
import { Keys } from "../../src/platform/Keys.ts"
import { cpuCell, load, makeCpuTally, postJson, row, rs256Check, startBenchServer, timedOps } from "./support.ts"

export async function run() {
  const server = await startBenchServer()
  try {
    const json = postJson(server.url)
    // a sandbox developer gets a code straight from /v1/authorize
    const { apiKey } = await json("/v1/signup", { name: "bench", mode: "sandbox" })
    const agent = await json("/v1/agents", { name: "bench", scopes: ["email:read"] }, apiKey)
    const code = async () => (await json("/v1/authorize", { agentId: agent.agentId, principalId: "p", scopes: ["email:read"] }, apiKey)).code
    const first = await json("/v1/token", { code: await code(), agentId: agent.agentId }, apiKey)
    const token = first.grantToken as string

    const keys = await server.run(Keys)
    const now = Math.floor(Date.now() / 1000)
    // CPU per operation of every figure, event loop / machine
    const cpu = { verifyFloor: makeCpuTally(), signFloor: makeCpuTally(), httpFloor: makeCpuTally(), leanMe: makeCpuTally(), verify: makeCpuTally(), verifyMany: makeCpuTally(), issue: makeCpuTally() }
    const ops = (r: { ops: number }) => r.ops
    const verifyFloor = (await cpu.verifyFloor.during(() => timedOps(rs256Check(token, keys.jwks.keys[0]!), 2), ops)).perSecond
    const claims = await Effect.runPromise(keys.verify(token, now))
    const signFloor = (await cpu.signFloor.during(() => timedOps(() => Effect.runPromise(keys.sign({ ...claims, iat: now, exp: now + 3600 })), 2), ops)).perSecond
    const headers = { authorization: `Bearer ${apiKey}` }
    const httpFloor = await cpu.httpFloor.load(() => fetch(`${server.url}/v1/me?via=api`, { headers }).then(async (r) => (await r.arrayBuffer(), r.ok)), { seconds: 3 })
    const leanMe = await cpu.leanMe.load(() => fetch(`${server.url}/v1/me`, { headers }).then(async (r) => (await r.arrayBuffer(), r.ok)), { seconds: 3 })
    const verifyBody = JSON.stringify({ token })
    const verify = await cpu.verify.load(() =>
      fetch(`${server.url}/v1/tokens/verify`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: verifyBody })
        .then(async (r) => ((await r.json()) as any).valid === true), { seconds: 3 })
    // codes are made ahead so the measurement is the exchange alone
    const codes: Array<string> = []
    // enough for the 2 s run at a quiet machine's rate (~1,500/s), made 16 at a time
    while (codes.length < 5000) codes.push(...await Promise.all(Array.from({ length: 16 }, code)))
    let next = 0
    const issued: Array<string> = []
    // (CPU per exchange made: once the codes run out the load's requests are not requests)
    const issue = await cpu.issue.during(() => load(() => {
      const c = codes[next++]
      if (c === undefined) return Promise.resolve(true)
      return fetch(`${server.url}/v1/token`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ code: c, agentId: agent.agentId }) })
        .then(async (r) => (issued.push(((await r.json()) as any).grantToken), r.status === 201))
    }, { seconds: 2, warmupSeconds: 0 }), () => Math.min(next, codes.length))
    // many agents' tokens in turn: each one's first check is a signature check, the rest remembered
    let turn = 0
    const verifyMany = await cpu.verifyMany.during(() => load(() =>
      fetch(`${server.url}/v1/tokens/verify`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ token: issued[turn++ % issued.length] }) })
        .then(async (r) => ((await r.json()) as any).valid === true), { seconds: 3, warmupSeconds: 0 }), (r) => r.requests)
    const lower = Math.min(verifyFloor, httpFloor.perSecond)
    const c = Object.fromEntries(Object.entries(cpu).map(([k, t]) => [k, t.perRequest()])) as Record<keyof typeof cpu, { main: number; machine: number }>
    // the floor column's CPU: that of the lower floor, the one the ratio is taken against
    const lowerCpu = cpuCell(verifyFloor <= httpFloor.perSecond ? c.verifyFloor : c.httpFloor)
    row("crypto floor: RS256 verify/s (one process)", verifyFloor)
    row("  CPU per verify µs, event loop / machine", cpuCell(c.verifyFloor))
    row("crypto floor: RS256 sign/s (one process)", signFloor)
    row("  CPU per sign µs, event loop / machine", cpuCell(c.signFloor))
    row("HTTP floor: GET /v1/me through the API req/s", httpFloor.perSecond)
    row("  CPU per request µs, event loop / machine", cpuCell(c.httpFloor))
    row("diagnostic: lean GET /v1/me req/s", leanMe.perSecond)
    row("  CPU per request µs, event loop / machine", cpuCell(c.leanMe))
    row("POST /v1/tokens/verify req/s", verify.perSecond, lower, verify.perSecond >= 0.6 * lower ? "PASS (≥ 60% of the lower floor)" : `FAIL (${Math.round(100 * verify.perSecond / lower)}%)`)
    row("  p50 / p99 ms", `${verify.p50Ms} / ${verify.p99Ms}`)
    row("  CPU per request µs, event loop / machine", cpuCell(c.verify), lowerCpu)
    row(`POST /v1/tokens/verify req/s, ${issued.length} tokens in turn`, verifyMany.perSecond, lower, verifyMany.perSecond >= 0.6 * lower ? "PASS (≥ 60% of the lower floor)" : `FAIL (${Math.round(100 * verifyMany.perSecond / lower)}%)`)
    row("  CPU per request µs, event loop / machine", cpuCell(c.verifyMany), lowerCpu)
    row("POST /v1/token req/s (code exchange, writes)", issue.perSecond, signFloor)
    row("  p50 / p99 ms", `${issue.p50Ms} / ${issue.p99Ms}`)
    row("  CPU per exchange µs, event loop / machine", cpuCell(c.issue), cpuCell(c.signFloor))
    if (next > codes.length) console.log(`  (codes ran out: the exchange rate counts ${next - codes.length} requests never sent)`)
    return {
      cpuMicros: c,
      verifyFloor, signFloor, httpFloor: httpFloor.perSecond,
      verifyPerSecond: verify.perSecond, verifyP50Ms: verify.p50Ms, verifyP99Ms: verify.p99Ms,
      verifyManyTokensPerSecond: verifyMany.perSecond, verifyManyTokens: issued.length,
      issuePerSecond: issue.perSecond, issueP50Ms: issue.p50Ms, issueP99Ms: issue.p99Ms
    }
  } finally {
    await server.stop()
  }
}

if (import.meta.main) await run()
