/**
 * Issue 4: POST /v1/tokens/verify and POST /v1/token per second, next to two floors measured in the
 * same run: the crypto alone (RS256 verify as the service makes it, and sign through the Keys
 * service, per second in this process) and the service's HTTP floor (GET /v1/me: API-key
 * authentication and the limiter, a constant-sized body, the same stack). Target: tokens/verify
 * ≥ 60% of the lower floor.
 */
import { Effect } from "effect"
import { Keys } from "../../src/platform/Keys.ts"
import { load, opsPerSecond, postJson, row, rs256Check, startBenchServer } from "./support.ts"

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
    const verifyFloor = await opsPerSecond(rs256Check(token, keys.jwks.keys[0]!), 2)
    const claims = await Effect.runPromise(keys.verify(token, now))
    const signFloor = await opsPerSecond(() => Effect.runPromise(keys.sign({ ...claims, iat: now, exp: now + 3600 })), 2)
    const headers = { authorization: `Bearer ${apiKey}` }
    const httpFloor = await load(() => fetch(`${server.url}/v1/me`, { headers }).then(async (r) => (await r.arrayBuffer(), r.ok)), { seconds: 3 })
    const verifyBody = JSON.stringify({ token })
    const verify = await load(() =>
      fetch(`${server.url}/v1/tokens/verify`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: verifyBody })
        .then(async (r) => ((await r.json()) as any).valid === true), { seconds: 3 })
    // codes are made ahead so the measurement is the exchange alone
    const codes: Array<string> = []
    for (let i = 0; i < 1500; i++) codes.push(await code())
    let next = 0
    const issued: Array<string> = []
    const issue = await load(() => {
      const c = codes[next++]
      if (c === undefined) return Promise.resolve(true)
      return fetch(`${server.url}/v1/token`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ code: c, agentId: agent.agentId }) })
        .then(async (r) => (issued.push(((await r.json()) as any).grantToken), r.status === 201))
    }, { seconds: 2, warmupSeconds: 0 })
    // many agents' tokens in turn: each one's first check is a signature check, the rest remembered
    let turn = 0
    const verifyMany = await load(() =>
      fetch(`${server.url}/v1/tokens/verify`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ token: issued[turn++ % issued.length] }) })
        .then(async (r) => ((await r.json()) as any).valid === true), { seconds: 3, warmupSeconds: 0 })
    const lower = Math.min(verifyFloor, httpFloor.perSecond)
    row("crypto floor: RS256 verify/s (one process)", verifyFloor)
    row("crypto floor: RS256 sign/s (one process)", signFloor)
    row("HTTP floor: GET /v1/me req/s", httpFloor.perSecond)
    row("POST /v1/tokens/verify req/s", verify.perSecond, lower, verify.perSecond >= 0.6 * lower ? "PASS (≥ 60% of the lower floor)" : `FAIL (${Math.round(100 * verify.perSecond / lower)}%)`)
    row("  p50 / p99 ms", `${verify.p50Ms} / ${verify.p99Ms}`)
    row(`POST /v1/tokens/verify req/s, ${issued.length} tokens in turn`, verifyMany.perSecond, lower, verifyMany.perSecond >= 0.6 * lower ? "PASS (≥ 60% of the lower floor)" : `FAIL (${Math.round(100 * verifyMany.perSecond / lower)}%)`)
    row("POST /v1/token req/s (code exchange, writes)", issue.perSecond, signFloor)
    row("  p50 / p99 ms", `${issue.p50Ms} / ${issue.p99Ms}`)
    return {
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
