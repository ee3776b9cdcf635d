/**
 * Issue 19: SCIM speed.
 * 1. `GET /scim/v2/Users?filter=userName eq "..."` over SCIM_BENCH_USERS users (default 100,000)
 *    next to its floor, the keyed lookup `GET /scim/v2/Users/:id` in the same run; the plan of the
 *    filter's query is printed (an index does the work, not a scan).
 * 2. A re-sync of SCIM_BENCH_RESYNC users (default 10,000) by PUT, each changing the user, against
 *    the same number of `POST /v1/agents` (target: ≥ 50% of its throughput); and the same re-sync
 *    when nothing changed (what an IdP's periodic full sync mostly is).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { compileFilter } from "../../src/directory/Filter.ts"
import { USER_ATTRIBUTES } from "../../src/directory/Resources.ts"
import { cpuCell, makeCpuTally, postJson, row, signupUncapped, startBenchServer } from "./support.ts"

const USERS = Number(process.env.SCIM_BENCH_USERS ?? 100_000)
const RESYNC = Number(process.env.SCIM_BENCH_RESYNC ?? 10_000)
const CONCURRENCY = 16

/** runs requests `from`..`to`, `CONCURRENCY` in flight; the seconds it took and the failures */
const batch = async (from: number, to: number, send: (i: number) => Promise<boolean>) => {
  let next = from
  let errors = 0
  const started = performance.now()
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < to) if (!(await send(next++).catch(() => false))) errors++
  }))
  return { seconds: (performance.now() - started) / 1000, errors }
}

/**
 * Each kind in ROUNDS slices, the kinds taking turns, so load from others on the shared machine
 * falls on all of them alike; requests per second over each kind's own time, and its CPU per request.
 */
const ROUNDS = 4
const interleaved = async (pid: number, count: number, kinds: ReadonlyArray<(i: number) => Promise<boolean>>) => {
  const totals = kinds.map(() => ({ seconds: 0, errors: 0, cpu: makeCpuTally(pid) }))
  const slice = Math.ceil(count / ROUNDS)
  for (let r = 0; r < ROUNDS; r++) {
    for (const [k, send] of kinds.entries()) {
      const from = r * slice, to = Math.min(count, (r + 1) * slice)
      const result = await totals[k]!.cpu.during(() => batch(from, to, send), () => Math.max(0, to - from))
      totals[k]!.seconds += result.seconds
      totals[k]!.errors += result.errors
    }
  }
  return totals.map((t) => ({ perSecond: Math.round(count / t.seconds), errors: t.errors, cpu: t.cpu.perRequest() }))
}

export async function run() {
  const server = await startBenchServer()
  const json = postJson(server.url)
  try {
    const { apiKey, developerId } = await signupUncapped(server)
    const { token } = await json("/v1/scim/tokens", { label: "bench" }, apiKey)
    const sqlRun = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) => server.run(Effect.flatMap(SqlClient.SqlClient, f))
    // seeded in the database directly: what the benchmark measures is reading, not seeding
    const seeded = performance.now()
    await sqlRun((sql) => sql.unsafe(
      `INSERT INTO scim_users (id, developer_id, principal_id, user_name, external_id, display_name, active, resource, version, created_at, updated_at)
       SELECT 'scimuser_bench' || lpad(i::text, 8, '0'), $1, 'User' || i || '@Example.com', 'User' || i || '@Example.com', 'ext-' || i,
              'User ' || i, true,
              jsonb_build_object('name', jsonb_build_object('givenName', 'User', 'familyName', i::text),
                                 'emails', jsonb_build_array(jsonb_build_object('value', 'user' || i || '@example.com', 'type', 'work', 'primary', true))),
              1, now(), now()
       FROM generate_series(1, $2::int) AS i`, [developerId, USERS]))
    await sqlRun((sql) => sql.unsafe("ANALYZE scim_users"))
    row("users seeded", USERS, undefined, `${Math.round(performance.now() - seeded)} ms`)

    const headers = { authorization: `Bearer ${token}`, "content-type": "application/scim+json" }
    const pick = () => 1 + Math.floor(Math.random() * USERS)
    // wrk takes 4,000 random users in turn, by filter and by id
    const picks = Array.from({ length: 4000 }, pick)
    const byFilter = { url: server.url, pid: server.pid, expectBody: '"totalResults":1,', requests: picks.map((i) => ({ path: `/scim/v2/Users?filter=${encodeURIComponent(`userName eq "user${i}@EXAMPLE.com"`)}`, headers })) }
    const byId = { url: server.url, pid: server.pid, expectBody: '"userName"', requests: picks.map((i) => ({ path: `/scim/v2/Users/scimuser_bench${String(i).padStart(8, "0")}`, headers })) }

    // the plan of the list's queries for one filter
    const compiled = compileFilter('userName eq "user4242@example.com"', USER_ATTRIBUTES, 2)
    if ("_tag" in compiled) throw new Error(compiled.detail)
    const where = `u.developer_id = $1 AND u.deleted_at IS NULL AND (${compiled.sql})`
    for (const query of [`SELECT u.*, count(*) OVER () AS total FROM scim_users u WHERE ${where} ORDER BY u.created_at, u.id LIMIT 100 OFFSET 0`]) {
      const plan = await sqlRun((sql) => sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ANALYZE ${query}`, [developerId, ...compiled.params] as any))
      console.log(`  plan: ${query.slice(0, 60)}...`)
      for (const line of plan) console.log(`    ${Object.values(line)[0]}`)
    }

    const floorRuns = [], filterRuns = []
    const cpu = { floor: makeCpuTally(server.pid), filter: makeCpuTally(server.pid) }
    for (let i = 0; i < 2; i++) {
      floorRuns.push(await cpu.floor.wrk(byId, 2, i === 0 ? 2 : 0))
      filterRuns.push(await cpu.filter.wrk(byFilter, 2, i === 0 ? 2 : 0))
    }
    const mean = (xs: Array<number>) => Math.round(xs.reduce((a, b) => a + b, 0) / xs.length)
    const floor = mean(floorRuns.map((r) => r.perSecond))
    const filtered = mean(filterRuns.map((r) => r.perSecond))
    row("floor: GET /scim/v2/Users/:id req/s", floor)
    row(`GET /scim/v2/Users?filter=userName eq over ${USERS} users req/s`, filtered, floor, `${Math.round((100 * filtered) / floor)}% of the keyed lookup`)
    row("  p50 ms (filter / keyed)", `${filterRuns[1]!.p50Ms} / ${floorRuns[1]!.p50Ms}`)
    row("  CPU per request µs, service process / machine", cpuCell(cpu.filter.perRequest()), cpuCell(cpu.floor.perRequest()))
    row("  errors", filterRuns.reduce((a, r) => a + r.errors, 0) + floorRuns.reduce((a, r) => a + r.errors, 0))

    // re-sync: PUT every user with a change, then again unchanged; POST /v1/agents as many times
    const n = Math.min(RESYNC, USERS)
    const put = (round: string) => (i: number) => {
      const k = i + 1
      return fetch(`${server.url}/scim/v2/Users/scimuser_bench${String(k).padStart(8, "0")}`, {
        method: "PUT",
        headers,
        body: JSON.stringify({
          schemas: ["urn:ietf:params:scim:schemas:core:2.0:User"],
          userName: `User${k}@Example.com`,
          externalId: `ext-${k}`,
          displayName: `User ${k} ${round}`,
          name: { givenName: "User", familyName: String(k) },
          emails: [{ value: `user${k}@example.com`, type: "work", primary: true }],
          active: true
        })
      }).then(async (r) => r.status === 200 && (await r.arrayBuffer(), true))
    }
    const agents = (i: number) =>
      fetch(`${server.url}/v1/agents`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ name: `agent ${i}`, scopes: ["email:read"] })
      }).then(async (r) => r.status === 201 && (await r.arrayBuffer(), true))
    // per slice: agents, the PUTs that change each user, then the same PUTs again (now unchanged)
    type Run = Awaited<ReturnType<typeof interleaved>>[number]
    const [agentRun, changed, unchanged] = await interleaved(server.pid, n, [agents, put("v2"), put("v2")]) as [Run, Run, Run]
    row(`floor: ${n} POST /v1/agents req/s`, agentRun.perSecond)
    row(`re-sync of ${n} users by PUT, each changed, req/s`, changed.perSecond, agentRun.perSecond,
      `${Math.round((100 * changed.perSecond) / agentRun.perSecond)}% (target ≥ 50%)`)
    row("  CPU per request µs, service process / machine", cpuCell(changed.cpu), cpuCell(agentRun.cpu))
    row(`re-sync of ${n} users by PUT, unchanged, req/s`, unchanged.perSecond, agentRun.perSecond,
      `${Math.round((100 * unchanged.perSecond) / agentRun.perSecond)}%`)
    row("  CPU per request µs, service process / machine", cpuCell(unchanged.cpu), cpuCell(agentRun.cpu))
    row("  errors (agents / changed / unchanged)", `${agentRun.errors} / ${changed.errors} / ${unchanged.errors}`)
    return {
      users: USERS, filterPerSecond: filtered, keyedPerSecond: floor, percentOfKeyed: Math.round((100 * filtered) / floor),
      resync: n, agentsPerSecond: agentRun.perSecond, putChangedPerSecond: changed.perSecond, putUnchangedPerSecond: unchanged.perSecond,
      cpuMicrosPerRequest: { filter: cpu.filter.perRequest(), keyed: cpu.floor.perRequest(), agents: agentRun.cpu, putChanged: changed.cpu, putUnchanged: unchanged.cpu }
    }
  } finally {
    await server.stop()
  }
}

if (import.meta.main) await run()
