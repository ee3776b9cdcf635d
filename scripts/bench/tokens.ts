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
import { type Req, wrk } from "./load/wrk.ts"
import { cpuCell, makeCpuTally, oneUseFor, postJson, row, rs256Check, signupUncapped, startBenchServer, timedOps } from "./support.ts"

const chunks = <A>(xs: Array<A>, n: number) => Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, (i + 1) * n))

export async function run() {
  const server = await startBenchServer()
  try {
    const json = postJson(server.url)
    // a sandbox developer gets a code straight from /v1/authorize; on the enterprise plan, so the
    // thousands of grants the run makes do not meet the free plan's caps (402: refusals measured)
    const { apiKey } = await signupUncapped(server, "sandbox")
    const agent = await json("/v1/agents", { name: "bench", scopes: ["email:read"] }, apiKey)
    const code = async () => (await json("/v1/authorize", { agentId: agent.agentId, principalId: "p", scopes: ["email:read"] }, apiKey)).code
    const first = await json("/v1/token", { code: await code(), agentId: agent.agentId }, apiKey)
    const token = first.grantToken as string

    const keys = await server.run(Keys)
    const now = Math.floor(Date.now() / 1000)
    // CPU per operation of every figure: the crypto floors on this process's event loop, the HTTP
    // figures in the service's process; and the machine
    const cpu = { verifyFloor: makeCpuTally(), signFloor: makeCpuTally(), httpFloor: makeCpuTally(server.pid), leanMe: makeCpuTally(server.pid), verify: makeCpuTally(server.pid), verifyMany: makeCpuTally(server.pid), issue: makeCpuTally(server.pid) }
    const ops = (r: { ops: number }) => r.ops
    const verifyFloor = (await cpu.verifyFloor.during(() => timedOps(rs256Check(token, keys.jwks.keys[0]!), 2), ops)).perSecond
    const claims = await Effect.runPromise(keys.verify(token, now))
    const signFloor = (await cpu.signFloor.during(() => timedOps(() => Effect.runPromise(keys.sign({ ...claims, iat: now, exp: now + 3600 })), 2), ops)).perSecond
    const headers = { authorization: `Bearer ${apiKey}` }
    const target = (requests: Array<Req>, expectBody?: string) => ({ url: server.url, pid: server.pid, requests, ...(expectBody === undefined ? {} : { expectBody }) })
    const httpFloor = await cpu.httpFloor.wrk(target([{ path: "/v1/me?via=api", headers }], '"developerId"'), 3)
    const leanMe = await cpu.leanMe.wrk(target([{ path: "/v1/me", headers }], '"developerId"'), 3)
    const post = (path: string, body: string) => ({ method: "POST", path, headers: { ...headers, "content-type": "application/json" }, body })
    const verify = await cpu.verify.wrk(target([post("/v1/tokens/verify", JSON.stringify({ token }))], '"valid":true'), 3)
    // codes are made ahead so the measurement is the exchange alone, 16 at a time
    const makeCodes = async (n: number) => {
      const codes: Array<string> = []
      while (codes.length < n) codes.push(...await Promise.all(Array.from({ length: 16 }, code)))
      return codes
    }
    // many agents' tokens, for verify with each one's first check a signature check, the rest remembered
    const issued: Array<string> = []
    for (const batch of chunks(await makeCodes(Number(process.env.BENCH_VERIFY_TOKENS ?? 1000)), 16)) {
      issued.push(...await Promise.all(batch.map((c) => json("/v1/token", { code: c, agentId: agent.agentId }, apiKey).then((r) => r.grantToken as string))))
    }
    // enough for the 2 s run (a code sent twice is refused: an error)
    // a fresh service process: its exchange path warmed first (JIT) with codes of its own, not tallied
    await wrk(target((await oneUseFor(1, code)).map((c) => post("/v1/token", JSON.stringify({ code: c, agentId: agent.agentId }))), '"grantToken"'), { seconds: 1 })
    const codes = await oneUseFor(2, code)
    const issue = await cpu.issue.wrk(target(codes.map((c) => post("/v1/token", JSON.stringify({ code: c, agentId: agent.agentId }))), '"grantToken"'), 2, 0)
    const verifyMany = await cpu.verifyMany.wrk(target(issued.map((t) => post("/v1/tokens/verify", JSON.stringify({ token: t }))), '"valid":true'), 3, 0)
    const lower = Math.min(verifyFloor, httpFloor.perSecond)
    const c = Object.fromEntries(Object.entries(cpu).map(([k, t]) => [k, t.perRequest()])) as Record<keyof typeof cpu, { main: number; machine: number }>
    // the floor column's CPU: that of the lower floor, the one the ratio is taken against
    const lowerCpu = cpuCell(verifyFloor <= httpFloor.perSecond ? c.verifyFloor : c.httpFloor)
    row("crypto floor: RS256 verify/s (one process)", verifyFloor)
    row("  CPU per verify µs, event loop / machine", cpuCell(c.verifyFloor))
    row("crypto floor: RS256 sign/s (one process)", signFloor)
    row("  CPU per sign µs, event loop / machine", cpuCell(c.signFloor))
    row("HTTP floor: GET /v1/me through the API req/s", httpFloor.perSecond)
    row("  CPU per request µs, service process / machine", cpuCell(c.httpFloor))
    row("diagnostic: lean GET /v1/me req/s", leanMe.perSecond)
    row("  CPU per request µs, service process / machine", cpuCell(c.leanMe))
    row("POST /v1/tokens/verify req/s", verify.perSecond, lower, verify.perSecond >= 0.6 * lower ? "PASS (≥ 60% of the lower floor)" : `FAIL (${Math.round(100 * verify.perSecond / lower)}%)`)
    row("  p50 / p99 ms", `${verify.p50Ms} / ${verify.p99Ms}`)
    row("  CPU per request µs, service process / machine", cpuCell(c.verify), lowerCpu)
    row(`POST /v1/tokens/verify req/s, ${issued.length} tokens in turn`, verifyMany.perSecond, lower, verifyMany.perSecond >= 0.6 * lower ? "PASS (≥ 60% of the lower floor)" : `FAIL (${Math.round(100 * verifyMany.perSecond / lower)}%)`)
    row("  CPU per request µs, service process / machine", cpuCell(c.verifyMany), lowerCpu)
    row("POST /v1/token req/s (code exchange, writes)", issue.perSecond, signFloor)
    row("  p50 / p99 ms", `${issue.p50Ms} / ${issue.p99Ms}`)
    row("  CPU per exchange µs, service process / machine", cpuCell(c.issue), cpuCell(c.signFloor))
    if (issue.requests > codes.length) console.log(`  (codes ran out: ${issue.requests - codes.length} exchanges sent a used code; raise BENCH_MAX_CODES)`)
    for (const [name, r] of Object.entries({ httpFloor, leanMe, verify, issue, verifyMany })) if (r.errors > 0) row(`  errors: ${name}`, r.errors)
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
