/**
 * Issue 22: what policies cost, in one run.
 *  - authorize: a developer with 50 built-in rules and a 100-policy Cedar set, none of which decides
 *    the request (so both sides do the same database work: a pending request), against a developer
 *    with no policies. Target: p50 latency ≤ 1.3× (throughput printed too). Rounds alternate A/B.
 *  - vault exchange: a developer without exchange policies (the path every developer took before
 *    policies: one in-memory Set lookup more), one with 50 authorize-only rules and a Cedar set that
 *    does not name vault.exchange, and one with an exchange rule (the only one that evaluates),
 *    side by side.
 * `bun scripts/bench/policies.ts [seconds]` (default 2 s per round).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { Grants } from "../../src/grants/Service.ts"
import { PolicyEngine } from "../../src/policies/Service.ts"
import { newId } from "../../src/platform/Ids.ts"
import type { WrkResult } from "./load/wrk.ts"
import { cpuCell, cpuStopwatch, makeCpuTally, row, startBenchServer } from "./support.ts"

// (the argument only when run on its own: under run.ts, argv[2] is the bench's name)
const SECONDS = Number((import.meta.main ? process.argv[2] : undefined) ?? process.env.BENCH_SECONDS ?? 2)

const cedarSet = (n: number) =>
  Array.from({ length: n }, (_, i) =>
    // every 20th policy applies to every request (never satisfied), so each decision runs cedar on a slice of 5
    i % 20 === 0
      ? `@id("c${i}") forbid(principal, action == Action::"authorize", resource) when { context.scopes.contains("admin:${i}") };`
      : i % 2 === 0
      ? `@id("c${i}") forbid(principal == Agent::"ag_other_${i}", action, resource) when { context.scopes.contains("email:send") };`
      : `@id("c${i}") permit(principal, action == Action::"authorize", resource in Group::"group_${i}") when { context.time.minuteOfDay < ${i} };`
  ).join("\n")

export async function run(): Promise<Record<string, unknown>> {
  const server = await startBenchServer({ VAULT_ENCRYPTION_KEYS: `bench:${randomBytes(32).toString("base64")}` })
  const sql = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, any>) => server.run(Effect.flatMap(SqlClient.SqlClient, f))
  const call = (method: string, path: string, apiKey: string | undefined, body?: unknown) =>
    fetch(server.url + path, {
      method,
      headers: { "content-type": "application/json", ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body)
    })
  const developer = async (name: string) => {
    const res = await call("POST", "/v1/signup", undefined, { name }).then((r) => r.json() as Promise<{ apiKey: string; developerId: string }>)
    await sql((s) => s`UPDATE developers SET plan = 'enterprise' WHERE id = ${res.developerId}`)
    const agentId = newId("ag")
    await sql((s) => s.unsafe(`INSERT INTO agents (id, developer_id, name, description, scopes, status, created_at, updated_at)
      VALUES ($1, $2, 'bench', NULL, $3, 'active', now(), now())`, [agentId, res.developerId, ["email:read", "github:read"]] as any))
    return { ...res, agentId }
  }
  const addPolicies = async (apiKey: string, actions: ReadonlyArray<string>) => {
    for (let i = 0; i < 50; i++) {
      const body = i % 2 === 0
        ? { name: `deny ${i}`, effect: "deny", agentId: `ag_other_${i}`, actions, timeOfDayStart: "22:00", timeOfDayEnd: "06:00", timeZone: "Europe/Paris" }
        : { name: `allow ${i}`, effect: "allow", principalId: `someone_${i}`, scopes: ["email:read"], daysOfWeek: [1, 2, 3], actions }
      const res = await call("POST", "/v1/policies", apiKey, body)
      if (res.status !== 201) throw new Error(`policy: ${res.status} ${await res.text()}`)
    }
    const synced = await call("POST", "/v1/policies/sync", apiKey, { format: "cedar", version: "1", content: Buffer.from(cedarSet(100)).toString("base64") })
    if (synced.status !== 201) throw new Error(`sync: ${synced.status} ${await synced.text()}`)
  }
  try {
    // ---- authorize ----
    const plain = await developer("bench-plain")
    const governed = await developer("bench-governed")
    await addPolicies(governed.apiKey, ["authorize"])
    // 1,000 principals in turn (a live developer's authorize answers a pending request, no code)
    const authorize = (d: { apiKey: string; agentId: string }) => ({
      url: server.url, pid: server.pid, expectBody: '"authRequestId"',
      requests: Array.from({ length: 1000 }, (_, n) => ({
        method: "POST", path: "/v1/authorize", headers: { "content-type": "application/json", authorization: `Bearer ${d.apiKey}` },
        body: JSON.stringify({ agentId: d.agentId, principalId: `user_${n}`, scopes: ["email:read"] })
      }))
    })
    // the decision alone, in process (less at the mercy of a busy machine than the HTTP figures)
    // `fresh`: every request asks for a scope never seen, so cedar's remembered decisions never answer
    // (and its CPU per decision, event loop / machine, over the same timed loop)
    const perDecisionUs = async (d: { developerId: string; agentId: string }, fresh = false) => {
      const count = 2000
      const cpu = makeCpuTally()
      const us = await server.run(Effect.gen(function*() {
        const engine = yield* PolicyEngine
        let n = 0
        const subject = () => ({ developerId: d.developerId, agentId: d.agentId, principalId: "user_1", scopes: fresh ? [`email:read:${n++}`] : ["email:read"] })
        for (let i = 0; i < 200; i++) yield* engine.explain("authorize", subject(), {})
        const since = cpuStopwatch()
        const started = performance.now()
        for (let i = 0; i < count; i++) yield* engine.explain("authorize", subject(), {})
        const us = Number((((performance.now() - started) / count) * 1000).toFixed(1))
        cpu.add(since(), count)
        return us
      }))
      return { us, cpu: cpu.perRequest() }
    }
    const decisions = { plain: await perDecisionUs(plain), governed: await perDecisionUs(governed), fresh: await perDecisionUs(governed, true) }
    row("decision in process, no policies: µs", decisions.plain.us)
    row("  CPU per decision µs, event loop / machine", cpuCell(decisions.plain.cpu))
    row("decision in process, 50 rules + 100 Cedar: µs", decisions.governed.us)
    row("  CPU per decision µs, event loop / machine", cpuCell(decisions.governed.cpu), cpuCell(decisions.plain.cpu))
    row("same, cedar's decision never remembered: µs", decisions.fresh.us)
    row("  CPU per decision µs, event loop / machine", cpuCell(decisions.fresh.cpu), cpuCell(decisions.plain.cpu))
    const rounds: Record<string, Array<WrkResult>> = { plain: [], governed: [] }
    // CPU per request over every round, in the service's process (the rows above take the best round)
    const authorizeCpu = { plain: makeCpuTally(server.pid), governed: makeCpuTally(server.pid) }
    for (let round = 0; round < 3; round++) {
      rounds.plain!.push(await authorizeCpu.plain.wrk(authorize(plain), SECONDS, round === 0 ? 2 : 0))
      rounds.governed!.push(await authorizeCpu.governed.wrk(authorize(governed), SECONDS, round === 0 ? 2 : 0))
    }
    const median = (xs: Array<WrkResult>, k: "p50Ms" | "perSecond") => xs.map((x) => x[k]).sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
    // (a round that completed no request has no latency: left out of the best p50)
    const best = (xs: Array<WrkResult>, k: "p50Ms" | "perSecond") => k === "p50Ms" ? Math.min(...xs.filter((x) => x.requests > 0).map((x) => x[k])) : Math.max(...xs.map((x) => x[k]))
    const plainP50 = best(rounds.plain!, "p50Ms"), governedP50 = best(rounds.governed!, "p50Ms")
    const ratio = governedP50 / plainP50
    row("authorize, no policies: p50 ms", plainP50)
    row("authorize, 50 rules + 100 Cedar: p50 ms", governedP50, `≤ ${(plainP50 * 1.3).toFixed(2)}`, ratio <= 1.3 ? "ok" : "over")
    row("authorize, no policies: req/s", best(rounds.plain!, "perSecond"))
    row("authorize, 50 rules + 100 Cedar: req/s", best(rounds.governed!, "perSecond"))
    row("authorize, no policies: CPU per request µs, service process / machine", cpuCell(authorizeCpu.plain.perRequest()))
    row("authorize, 50 rules + 100 Cedar: CPU per request µs, service process / machine", cpuCell(authorizeCpu.governed.perRequest()), cpuCell(authorizeCpu.plain.perRequest()))
    const errors = [...rounds.plain!, ...rounds.governed!].reduce((a, r) => a + r.errors, 0)
    if (errors > 0) row("authorize errors (should be 0)", errors)
    void median

    // ---- vault exchange ----
    const exchanger = async (name: string, policies: "none" | "other" | "exchange") => {
      const d = await developer(name)
      if (policies === "other") await addPolicies(d.apiKey, ["authorize", "delegate"])
      if (policies === "exchange") {
        await call("POST", "/v1/policies", d.apiKey, { name: "no night exchanges", effect: "deny", actions: ["vault.exchange"], timeOfDayStart: "23:59", timeOfDayEnd: "00:00", principalId: "nobody" })
      }
      const tokens: Array<string> = []
      for (let i = 0; i < 16; i++) {
        const principalId = `bench_user_${i}`
        const stored = await call("POST", "/v1/vault/credentials", d.apiKey, { principalId, service: "github", accessToken: `gho_${randomBytes(20).toString("hex")}` })
        if (stored.status !== 201) throw new Error(`store: ${stored.status}`)
        tokens.push(await server.run(Effect.gen(function*() {
          const grants = yield* Grants
          const grant = yield* grants.create({ developerId: d.developerId, agentId: d.agentId, principalId, scopes: ["github:read"], expiresAt: new Date(Date.now() + 3600_000), approvalMethod: "developer", policyId: null })
          return (yield* grants.issueToken(grant)).grantToken
        })))
      }
      return {
        url: server.url, pid: server.pid, expectBody: '"accessToken"',
        requests: tokens.map((t) => ({
          method: "POST", path: "/v1/vault/credentials/exchange", headers: { "content-type": "application/json", authorization: `Bearer ${t}` }, body: '{"service":"github"}'
        }))
      }
    }
    const sends = {
      none: await exchanger("vault-none", "none"),
      other: await exchanger("vault-other", "other"),
      exchange: await exchanger("vault-exchange", "exchange")
    }
    const vault: Record<string, Array<WrkResult>> = { none: [], other: [], exchange: [] }
    const vaultCpu = { none: makeCpuTally(server.pid), other: makeCpuTally(server.pid), exchange: makeCpuTally(server.pid) }
    for (let round = 0; round < 3; round++) {
      for (const k of ["none", "other", "exchange"] as const) vault[k]!.push(await vaultCpu[k].wrk(sends[k], SECONDS, round === 0 ? 2 : 0))
    }
    row("exchange, no policies (today's path): req/s", best(vault.none!, "perSecond"))
    row("exchange, policies not naming it: req/s", best(vault.other!, "perSecond"))
    row("exchange, an exchange policy (evaluated): req/s", best(vault.exchange!, "perSecond"))
    row("exchange, no policies: p50 ms", best(vault.none!, "p50Ms"))
    row("exchange, policies not naming it: p50 ms", best(vault.other!, "p50Ms"))
    row("exchange, an exchange policy: p50 ms", best(vault.exchange!, "p50Ms"))
    // floor column: the path without policies
    const none = cpuCell(vaultCpu.none.perRequest())
    row("exchange, no policies: CPU per request µs, service process / machine", none)
    row("exchange, policies not naming it: CPU per request µs, service process / machine", cpuCell(vaultCpu.other.perRequest()), none)
    row("exchange, an exchange policy: CPU per request µs, service process / machine", cpuCell(vaultCpu.exchange.perRequest()), none)
    const cpuMicros = {
      decision: { plain: decisions.plain.cpu, governed: decisions.governed.cpu, fresh: decisions.fresh.cpu },
      authorize: { plain: authorizeCpu.plain.perRequest(), governed: authorizeCpu.governed.perRequest() },
      vault: { none: vaultCpu.none.perRequest(), other: vaultCpu.other.perRequest(), exchange: vaultCpu.exchange.perRequest() }
    }
    return { authorize: rounds, ratio, vault, cpuMicros }
  } finally {
    await server.stop()
  }
}

if (import.meta.main) {
  await run()
  process.exit(0)
}
