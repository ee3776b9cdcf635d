/**
 * Issue 25: what the entitlement check costs POST /v1/authorize and POST /v1/token (code exchange).
 * Side by side in one run, on one server: a free-plan developer (monthly quotas set, so every
 * request takes the live quota counter: check and increment in one store call) against an
 * enterprise developer (no quota: the check returns at once). Each in-flight slot alternates the
 * two, so both meet the same load at the same moment (a shared 2-core machine drifts too much for
 * separate runs). Also the check alone, in process (µs per call). Target: the checked requests'
 * mean latency at most 3% above the unchecked ones' (at fixed concurrency, the same bound on throughput).
 */
import { Effect } from "effect"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Authorization } from "../../src/authorization/Service.ts"
import { Entitlements } from "../../src/billing/Entitlements.ts"
import { ApiKeys } from "../../src/platform/Auth.ts"
import { cpuCell, cpuStopwatch, makeCpuTally, postJson, row, startBenchServer } from "./support.ts"

const ROUNDS = Number(process.env.BILLING_BENCH_ROUNDS ?? 3)
const SECONDS = Number(process.env.BILLING_BENCH_SECONDS ?? 2)

export async function run() {
  const dir = mkdtempSync(join(tmpdir(), "bench-plans-"))
  const plans = join(dir, "plans.json")
  // quotas far above what the run reaches: the check runs in full but never refuses
  writeFileSync(plans, JSON.stringify({ free: { name: "Free", limits: { authorizationsPerMonth: 1e9, tokenExchangesPerMonth: 1e9 } } }))
  const server = await startBenchServer({ PLANS_FILE: plans })
  try {
    const json = postJson(server.url)
    const setUp = async (plan: "free" | "enterprise") => {
      const { apiKey, developerId } = await json("/v1/signup", { name: `bench-${plan}`, mode: "sandbox" })
      if (plan !== "free") await server.run(Effect.flatMap(Effect.promise(() => import("@effect/sql")), (m) =>
        Effect.flatMap(m.SqlClient.SqlClient, (sql) => sql`UPDATE developers SET plan = ${plan} WHERE id = ${developerId}`)))
      // (set before the key's first use, so no cached developer holds the old plan)
      const agent = await json("/v1/agents", { name: "bench", scopes: ["email:read"] }, apiKey)
      return { apiKey, developerId, agentId: agent.agentId as string, plan }
    }
    const checked = await setUp("free")
    const unchecked = await setUp("enterprise")
    const authorizeBody = (agentId: string) => JSON.stringify({ agentId, principalId: "p", scopes: ["email:read"] })
    const authorizeOnce = (dev: typeof checked) =>
      fetch(`${server.url}/v1/authorize`, {
        method: "POST",
        headers: { authorization: `Bearer ${dev.apiKey}`, "content-type": "application/json" },
        body: authorizeBody(dev.agentId)
      }).then(async (r) => (await r.json()) as any)

    // Side by side: every in-flight slot alternates a checked and an unchecked request, so both see
    // the same load at the same moment; the overhead is the difference of their mean latencies.
    // (Their CPU can only be taken together: CPU per request of both kinds, interleaved.)
    const sideBySide = async (send: (dev: typeof checked) => Promise<boolean | "done">) => {
      const lat = { free: [] as Array<number>, enterprise: [] as Array<number> }
      let errors = 0
      let sent = 0
      const cpu = makeCpuTally(server.pid)
      const since = cpuStopwatch(server.pid)
      for (let round = 0; round < ROUNDS; round++) {
        const until = performance.now() + SECONDS * 1000
        await Promise.all(Array.from({ length: 16 }, async (_, slot) => {
          let turn = slot % 2
          while (performance.now() < until) {
            const dev = turn++ % 2 === 0 ? checked : unchecked
            const t = performance.now()
            const ok = await send(dev).catch(() => false)
            if (ok === "done") break
            sent++
            if (!ok) errors++
            else lat[dev.plan].push(performance.now() - t)
          }
        }))
      }
      cpu.add(since(), sent)
      const mean = (xs: Array<number>) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length)
      const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0
      return {
        checkedMeanMs: mean(lat.free), uncheckedMeanMs: mean(lat.enterprise),
        checkedP50Ms: median(lat.free), uncheckedP50Ms: median(lat.enterprise),
        requests: lat.free.length + lat.enterprise.length, errors, cpuMicros: cpu.perRequest()
      }
    }
    const authorizeResult = await sideBySide((dev) => authorizeOnce(dev).then((b) => typeof b.code === "string"))
    // codes made ahead, so the exchange is measured alone
    const pools = new Map<string, Array<string>>()
    for (const dev of [checked, unchecked]) {
      const codes: Array<string> = []
      const target = Math.ceil((authorizeResult.requests / 2) * 1.5) + 200
      while (codes.length < target) {
        const batch = await Promise.all(Array.from({ length: 16 }, () => authorizeOnce(dev)))
        for (const b of batch) if (typeof b.code === "string") codes.push(b.code)
      }
      pools.set(dev.plan, codes)
    }
    const exchangeResult = await sideBySide((dev) => {
      const code = pools.get(dev.plan)!.pop()
      if (code === undefined) return Promise.resolve("done" as const)
      return fetch(`${server.url}/v1/token`, {
        method: "POST",
        headers: { authorization: `Bearer ${dev.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ code, agentId: dev.agentId })
      }).then(async (r) => (await r.arrayBuffer(), r.status === 201))
    })

    // In process, one at a time, alternating: the authorize and exchange services for each developer
    // (no HTTP, no concurrency: the least noisy view of what the check adds on a busy machine).
    const inProcess = await server.run(Effect.gen(function*() {
      const keys = yield* ApiKeys
      const authorization = yield* Authorization
      const devs = { free: (yield* keys.resolve(checked.apiKey))!.developer, enterprise: (yield* keys.resolve(unchecked.apiKey))!.developer }
      const agentOf = { free: checked.agentId, enterprise: unchecked.agentId }
      const spent = { authorize: { free: 0, enterprise: 0 }, exchange: { free: 0, enterprise: 0 } }
      const codes = { free: [] as Array<string>, enterprise: [] as Array<string> }
      const n = 300
      // CPU per call over each loop, both plans together (2n calls)
      const cpu = { authorize: makeCpuTally(), exchange: makeCpuTally() }
      let since = cpuStopwatch()
      for (let i = 0; i < n; i++) {
        for (const plan of (i % 2 === 0 ? ["free", "enterprise"] : ["enterprise", "free"]) as Array<"free" | "enterprise">) {
          const t = performance.now()
          const r = yield* authorization.authorize(devs[plan], { agentId: agentOf[plan], principalId: "p", scopes: ["email:read"] })
          spent.authorize[plan] += performance.now() - t
          codes[plan].push(r.code!)
        }
      }
      cpu.authorize.add(since(), 2 * n)
      since = cpuStopwatch()
      for (let i = 0; i < n; i++) {
        for (const plan of (i % 2 === 0 ? ["free", "enterprise"] : ["enterprise", "free"]) as Array<"free" | "enterprise">) {
          const t = performance.now()
          yield* authorization.exchangeCode(devs[plan], { code: codes[plan][i]!, agentId: agentOf[plan] })
          spent.exchange[plan] += performance.now() - t
        }
      }
      cpu.exchange.add(since(), 2 * n)
      return {
        authorize: { checkedUs: (spent.authorize.free * 1000) / n, uncheckedUs: (spent.authorize.enterprise * 1000) / n, cpuMicros: cpu.authorize.perRequest() },
        exchange: { checkedUs: (spent.exchange.free * 1000) / n, uncheckedUs: (spent.exchange.enterprise * 1000) / n, cpuMicros: cpu.exchange.perRequest() }
      }
    }))

    // the check alone, in process: the free developer's authorization quota (store call included)
    const admitCpu = makeCpuTally()
    const admitUs = await server.run(Effect.gen(function*() {
      const entitlements = yield* Entitlements
      const dev = { id: checked.developerId, plan: "free" as const }
      const n = 2_000
      const since = cpuStopwatch()
      const started = performance.now()
      for (let i = 0; i < n; i++) yield* entitlements.admit(dev, "authorizations")
      const us = ((performance.now() - started) * 1000) / n
      admitCpu.add(since(), n)
      return us
    }))

    const out: Record<string, unknown> = { rounds: ROUNDS, secondsPerRound: SECONDS, admitMicroseconds: Number(admitUs.toFixed(1)) }
    for (const [op, r] of [["authorize", authorizeResult], ["exchange", exchangeResult]] as const) {
      const overhead = (100 * (r.checkedMeanMs - r.uncheckedMeanMs)) / r.uncheckedMeanMs
      const label = op === "authorize" ? "POST /v1/authorize" : "POST /v1/token (code exchange)"
      row(`${label} mean ms, no quota (enterprise)`, r.uncheckedMeanMs.toFixed(2))
      row(`${label} mean ms, quota checked (free)`, r.checkedMeanMs.toFixed(2), r.uncheckedMeanMs.toFixed(2),
        overhead <= 3 ? `PASS (adds ${overhead.toFixed(1)}%)` : `FAIL (adds ${overhead.toFixed(1)}%)`)
      row(`  p50 ms checked / unchecked; requests, errors`, `${r.checkedP50Ms.toFixed(2)} / ${r.uncheckedP50Ms.toFixed(2)}; ${r.requests}, ${r.errors}`)
      row(`  CPU per request µs (both plans, interleaved), ${server.separate ? "service process" : "event loop"} / machine`, cpuCell(r.cpuMicros))
      out[op] = { ...r, overheadPct: Number(overhead.toFixed(2)) }
    }
    for (const op of ["authorize", "exchange"] as const) {
      const r = inProcess[op]
      const overhead = (100 * (r.checkedUs - r.uncheckedUs)) / r.uncheckedUs
      // informational: sequential timings on a shared machine swing by several per cent either way
      row(`${op} service, in process, one at a time: µs checked / unchecked`, `${r.checkedUs.toFixed(0)} / ${r.uncheckedUs.toFixed(0)}`, undefined, `(${overhead.toFixed(1)}%)`)
      row("  CPU per call µs (both plans, alternating; in process), event loop / machine", cpuCell(r.cpuMicros))
      out[`${op}InProcess`] = { ...r, overheadPct: Number(overhead.toFixed(2)) }
    }
    const share = (100 * admitUs) / Math.min(inProcess.authorize.uncheckedUs, inProcess.exchange.uncheckedUs)
    row("entitlement check alone, as % of the cheaper unchecked service call", `${share.toFixed(2)}%`, "3%", share <= 3 ? "PASS" : "FAIL")
    out.checkSharePct = Number(share.toFixed(3))
    row("entitlement check alone, µs per call (in process)", admitUs.toFixed(1))
    row("  CPU per check µs, event loop / machine", cpuCell(admitCpu.perRequest(), 1))
    out.admitCpuMicros = admitCpu.perRequest()
    return out
  } finally {
    await server.stop()
  }
}

if (import.meta.main) {
  await run()
  process.exit(0)
}
