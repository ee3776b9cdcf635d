/**
 * Issue 26: what verifiable credentials cost (decisions §18), each figure next to its floor in the
 * same run, rounds alternating so background load falls on both alike:
 * - POST /v1/token with credentialFormat "vc-jwt" against a plain token issue (target: at most 1.5×
 *   the cost, i.e. at least 2/3 of the plain rate);
 * - GET /v1/credentials/status/:listId against the service's HTTP floor, GET /v1/me (API-key
 *   authentication and the limiter, a constant body; target ≥ 70%) through the API's pipeline as the
 *   status list is (`?via=api`: the lean path answers no query string; the lean /v1/me is ~4× faster
 *   and no longer a floor for a route served by HttpApiBuilder), and the exempt constant JWKS.
 */
import { wrk } from "./load/wrk.ts"
import { cpuCell, makeCpuTally, oneUseFor, postJson, row, signupUncapped, startBenchServer } from "./support.ts"

export async function run() {
  const server = await startBenchServer()
  try {
    const json = postJson(server.url)
    const { apiKey } = await signupUncapped(server, "sandbox")
    const agent = await json("/v1/agents", { name: "bench", scopes: ["email:read"] }, apiKey)
    const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" }
    // codes made ahead (16 at a time), so the measurement is the exchange alone
    const makeCodes = async (n: number) => {
      const codes: Array<string> = []
      while (codes.length < n) {
        const batch = await Promise.all(Array.from({ length: 16 }, () =>
          json("/v1/authorize", { agentId: agent.agentId, principalId: "p", scopes: ["email:read"] }, apiKey).then((r) => r.code as string)))
        codes.push(...batch)
      }
      return codes
    }
    const oneCode = () => json("/v1/authorize", { agentId: agent.agentId, principalId: "p", scopes: ["email:read"] }, apiKey).then((r) => r.code as string)
    // each code once: wrk takes them in turn (a code sent twice is refused, and counted an error)
    const exchange = (codes: Array<string>, extra: Record<string, unknown>) => ({
      url: server.url, pid: server.pid, expectBody: '"grantToken"',
      requests: codes.map((code) => ({ method: "POST", path: "/v1/token", headers, body: JSON.stringify({ code, agentId: agent.agentId, ...extra }) }))
    })
    const seconds = 2
    // CPU per request of every figure, the service's process / machine, over all its rounds
    const cpu = { plain: makeCpuTally(server.pid), vc: makeCpuTally(server.pid), floor: makeCpuTally(server.pid), jwks: makeCpuTally(server.pid), list: makeCpuTally(server.pid) }
    // a fresh service process: both exchange paths warmed first (JIT) with codes of their own, not tallied
    await wrk(exchange(await oneUseFor(1, oneCode), {}), { seconds: 1 })
    await wrk(exchange(await oneUseFor(1, oneCode), { credentialFormat: "vc-jwt" }), { seconds: 1 })
    const plainRuns = [], vcRuns = []
    let listUrl = ""
    for (let round = 0; round < 2; round++) {
      const plainCodes = await oneUseFor(seconds, oneCode)
      plainRuns.push(await cpu.plain.wrk(exchange(plainCodes, {}), seconds, 0))
      const vcCodes = await oneUseFor(seconds, oneCode)
      vcRuns.push(await cpu.vc.wrk(exchange(vcCodes, { credentialFormat: "vc-jwt" }), seconds, 0))
      if (plainCodes.length < plainRuns[round]!.requests || vcCodes.length < vcRuns[round]!.requests) console.log("  (codes ran out: the rate counts refused re-sends; raise BENCH_MAX_CODES)")
    }
    const sample = await json("/v1/token", { code: (await makeCodes(1))[0], agentId: agent.agentId, credentialFormat: "vc-jwt" }, apiKey)
    listUrl = JSON.parse(Buffer.from(sample.verifiableCredential.split(".")[1], "base64url").toString()).credentialStatus[0].statusListCredential
    const listPath = new URL(listUrl).pathname

    const get = (path: string, h: Record<string, string> = {}) => ({ url: server.url, pid: server.pid, requests: [{ path, headers: h }] })
    const floorRuns = [], jwksRuns = [], listRuns = []
    for (let round = 0; round < 2; round++) {
      const warm = round === 0 ? 2 : 0
      floorRuns.push(await cpu.floor.wrk(get("/v1/me?via=api", { authorization: `Bearer ${apiKey}` }), 2, warm))
      jwksRuns.push(await cpu.jwks.wrk(get("/.well-known/jwks.json"), 2, warm))
      listRuns.push(await cpu.list.wrk(get(listPath), 2, warm))
    }
    const mean = (xs: Array<{ perSecond: number }>) => Math.round(xs.reduce((a, r) => a + r.perSecond, 0) / xs.length)
    const meanP = (xs: Array<{ p50Ms: number; p99Ms: number }>) =>
      `${(xs.reduce((a, r) => a + r.p50Ms, 0) / xs.length).toFixed(2)} / ${(xs.reduce((a, r) => a + r.p99Ms, 0) / xs.length).toFixed(2)}`
    const plain = mean(plainRuns), vc = mean(vcRuns)
    const floor = mean(floorRuns), jwks = mean(jwksRuns), list = mean(listRuns)
    const costRatio = plain / vc
    const errors = [...plainRuns, ...vcRuns, ...listRuns].reduce((a, r) => a + r.errors, 0)
    const c = Object.fromEntries(Object.entries(cpu).map(([k, t]) => [k, t.perRequest()])) as Record<keyof typeof cpu, { main: number; machine: number }>
    const cpuRow = (side: keyof typeof c, floorSide?: keyof typeof c) =>
      row("  CPU per request µs, service process / machine", cpuCell(c[side]), floorSide === undefined ? undefined : cpuCell(c[floorSide]))
    row("POST /v1/token (plain) req/s", plain)
    row("  p50 / p99 ms", meanP(plainRuns))
    cpuRow("plain")
    row("POST /v1/token credentialFormat vc-jwt req/s", vc, plain, costRatio <= 1.5 ? `PASS (cost ${costRatio.toFixed(2)}× ≤ 1.5×)` : `FAIL (cost ${costRatio.toFixed(2)}×)`)
    row("  p50 / p99 ms", meanP(vcRuns))
    cpuRow("vc", "plain")
    row("HTTP floor: GET /v1/me through the API req/s", floor)
    cpuRow("floor")
    row("GET /.well-known/jwks.json (exempt, constant) req/s", jwks)
    cpuRow("jwks")
    row("GET /v1/credentials/status/:listId req/s", list, floor, list >= 0.7 * floor ? `PASS (${Math.round((100 * list) / floor)}% ≥ 70%)` : `FAIL (${Math.round((100 * list) / floor)}%)`)
    row("  p50 / p99 ms", meanP(listRuns))
    cpuRow("list", "floor")
    row("  errors", errors)
    return {
      cpuMicros: c,
      plainPerSecond: plain, vcJwtPerSecond: vc, costRatio: Number(costRatio.toFixed(2)),
      httpFloorPerSecond: floor, jwksPerSecond: jwks, statusListPerSecond: list,
      statusListPercentOfFloor: Math.round((100 * list) / floor), errors
    }
  } finally {
    await server.stop()
  }
}

if (import.meta.main) await run()
