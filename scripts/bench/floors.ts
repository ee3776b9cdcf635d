/**
 * Full floors (issue 27): bare Bun.serve handlers doing exactly a route's work (the same SQL texts
 * through a pg pool built as the service's, the same Redis script through a client built as its, the same
 * crypto, the same JSON) without the framework and our plumbing (routing, envelope, headers,
 * fibers). Every benchmark builds its floors from this module so they all count the same work, and
 * compares with `compare`: wrk (a process of its own) loads the service (a process of its own) and
 * the floor (served by the bench's process, which is otherwise idle while wrk runs) in interleaved
 * rounds, CPU per request from /proc/<pid>/stat of each serving process.
 */
import { Effect } from "effect"
import { createHash } from "node:crypto"
import type Pg from "pg"
import { Counters, type CounterStore } from "../../src/platform/Counters.ts"
import { PgPool } from "../../src/platform/PgPool.ts"
import { type Target, wrk, type WrkResult } from "./load/wrk.ts"
import { makeCpuTally, row } from "./support.ts"

interface Server {
  readonly run: <A, E>(effect: Effect.Effect<A, E, any>) => Promise<A>
  readonly config: { readonly rateLimits: { readonly scale: number; readonly routeDefault: number; readonly planFree: number; readonly planPro: number; readonly planEnterprise: number; readonly revocationStatus: number } }
}

export interface FloorDeveloper {
  readonly id: string
  readonly name: string
  readonly email: string | null
  readonly mode: string
  readonly plan: "free" | "pro" | "enterprise"
  readonly fidoRequired: boolean
  readonly createdAt: Date
}

/** The service's clients, built as the service builds them (by this process's control instance: same
 * pool settings, same ioredis client), and the gate's and authentication's work done plainly. */
export const floorKit = async (server: Server) => {
  const pool: Pg.Pool = await server.run(PgPool)
  const counters: CounterStore = await server.run(Counters)
  const prefix = `floor_${Math.random().toString(36).slice(2, 8)}:`
  const figures = server.config.rateLimits
  const scaled = (n: number) => Math.max(1, Math.floor(n * figures.scale))
  /** one counter-store call checking and counting every window, the gate's script */
  const hit = (keys: ReadonlyArray<string>, limits: ReadonlyArray<number>, ttlMs: number): Promise<ReadonlyArray<number>> => {
    const redis = counters.redis as any
    if (redis === undefined) {
      const r = Effect.runSync(counters.hit(keys.map((key, i) => ({ key, limit: limits[i]! })), ttlMs))
      return Promise.resolve([r.rejectedBy + 1, ...r.counts])
    }
    return new Promise((resolve, reject) =>
      redis.rateHit(keys.length, ...keys, ttlMs, ...limits, (e: unknown, out: Array<number>) => (e ? reject(e) : resolve(out))))
  }
  // the API-key cache as the service keeps it: by SHA-256, 5 s, filled by the same statement
  const keyCache = new Map<string, { developer: FloorDeveloper | undefined; until: number }>()
  const developerOf = async (authorization: string | null): Promise<FloorDeveloper | undefined> => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "")
    if (m === null || !/^sk_(live|test)_[A-Za-z0-9_-]{20,100}$/.test(m[1]!)) return undefined
    const hash = createHash("sha256").update(m[1]!).digest("hex")
    const cached = keyCache.get(hash)
    if (cached !== undefined && cached.until > Date.now()) return cached.developer
    const { rows } = await pool.query(
      "SELECT d.id, d.name, d.email, d.mode, d.plan, d.fido_required, d.created_at FROM api_keys k JOIN developers d ON d.id = k.developer_id WHERE k.key_hash = $1", [hash])
    const r = rows[0]
    const developer = r === undefined ? undefined : { id: r.id, name: r.name, email: r.email, mode: r.mode, plan: r.plan, fidoRequired: r.fido_required, createdAt: r.created_at }
    keyCache.set(hash, { developer, until: Date.now() + 5_000 })
    return developer
  }
  const windowKeys = (route: string, subject: string) => {
    const now = Date.now()
    const windowStart = now - (now % 60_000)
    return { route: `${prefix}rl:route:${route}:${subject}:${windowStart}`, windowStart }
  }
  /** the gate of an API-key route: the developer, then its route window and budget in one call */
  /** (the address as the service learns it, for the route's per-address window: the server's requestIP) */
  const apiKeyGate = async (request: Request, route: string, routeLimit: number, budget: "plan" | "revocationStatus" = "plan", address = "127.0.0.1") => {
    const developer = await developerOf(request.headers.get("authorization"))
    if (developer === undefined) return undefined
    const { route: routeKey, windowStart } = windowKeys(route, `addr:${address}`)
    const budgetLimit = budget === "revocationStatus" ? figures.revocationStatus
      : developer.plan === "enterprise" ? figures.planEnterprise : developer.plan === "pro" ? figures.planPro : figures.planFree
    const out = await hit([routeKey, `${prefix}rl:{${developer.id}}:${budget}:${windowStart}`], [scaled(routeLimit), scaled(budgetLimit)], 120_000)
    return Number(out[0]) === 0 ? developer : undefined
  }
  /** the gate of a grant-token route: its window counted by the token's id */
  const grantGate = async (jti: string, routeLimit: number) => {
    const { route } = windowKeys("grant", `jti:${jti}`)
    const out = await hit([route], [scaled(routeLimit)], 120_000)
    return Number(out[0]) === 0
  }
  return { pool, counters, hit, developerOf, apiKeyGate, grantGate, scaled }
}

export type FloorKit = Awaited<ReturnType<typeof floorKit>>

/** A bare Bun.serve handler on a free loopback port. */
export const serveFloor = (fetch: (request: Request, server: Bun.Server<undefined>) => Promise<Response>) => {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch })
  return { url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) }
}

/** A promise bounded by `ms`: false when it fails or is late (the health probes' bound). */
export const bounded = (promise: Promise<unknown>, ms: number): Promise<boolean> => {
  let timer: ReturnType<typeof setTimeout> | undefined
  return Promise.race([
    promise.then(() => true, () => false),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)))
  ]).finally(() => clearTimeout(timer))
}

export interface Pair {
  readonly name: string
  /** the requests to the service (its own process), taken in turn by wrk */
  readonly service: Target
  /** the same requests to its floor (served by this process) */
  readonly floor: Target
  /** the target as a fraction of the floor's rate, e.g. 0.65 */
  readonly target?: number
}

export interface PairResult {
  readonly perSecond: number
  readonly floorPerSecond: number
  readonly percentOfFloor: number
  readonly p50Ms: number
  readonly floorP50Ms: number
  readonly p99Ms: number
  readonly floorP99Ms: number
  readonly errors: number
  readonly floorErrors: number
  /** CPU µs per request of the serving process (all its threads) */
  readonly processMicros: number
  readonly floorProcessMicros: number
  readonly machineMicros: number
  readonly floorMachineMicros: number
  /** wrk's own CPU µs per request */
  readonly generatorMicros: number
  readonly pass?: boolean
}

const mean = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length)

/**
 * Each pair's service and floor take turns in short wrk rounds (so background load falls on both
 * alike; which goes first alternates) and the rates and CPU per request are averaged over the
 * rounds; prints one row per pair with its floor, its ratio, and the CPU per request of each side
 * (the serving process / the whole machine).
 */
export const compare = async (pairs: ReadonlyArray<Pair>, options: { rounds?: number; seconds?: number } = {}): Promise<Record<string, PairResult>> => {
  const rounds = options.rounds ?? 3
  const seconds = options.seconds ?? Number(process.env.BENCH_SECONDS ?? 2)
  const runs = pairs.map((p) => ({ service: [] as Array<WrkResult>, floor: [] as Array<WrkResult>, tally: makeCpuTally(p.service.pid), floorTally: makeCpuTally(p.floor.pid) }))
  // one warm-up of each side first (a fresh process compiles its paths; pools, caches), not tallied
  for (const pair of pairs) {
    await wrk(pair.floor, { seconds: 2 })
    await wrk(pair.service, { seconds: 2 })
  }
  for (let i = 0; i < rounds; i++) {
    for (const [j, pair] of pairs.entries()) {
      const r = runs[j]!
      if (i % 2 === 0) {
        r.floor.push(await r.floorTally.wrk(pair.floor, seconds, 0))
        r.service.push(await r.tally.wrk(pair.service, seconds, 0))
      } else {
        r.service.push(await r.tally.wrk(pair.service, seconds, 0))
        r.floor.push(await r.floorTally.wrk(pair.floor, seconds, 0))
      }
    }
  }
  const out: Record<string, PairResult> = {}
  if (pairs.some((p) => p.service.pid === p.floor.pid)) {
    console.log("  (embedded mode: the service runs in this process beside its floor, so each side's process CPU counts both; wrk is still apart)")
  }
  for (const [j, pair] of pairs.entries()) {
    const r = runs[j]!
    const perSecond = Math.round(mean(r.service.map((x) => x.perSecond)))
    const floorPerSecond = Math.round(mean(r.floor.map((x) => x.perSecond)))
    const ratio = perSecond / floorPerSecond
    const cpu = r.tally.perRequest()
    const floorCpu = r.floorTally.perRequest()
    const generator = r.service.reduce((a, x) => a + x.generatorMs, 0) * 1000 / r.service.reduce((a, x) => a + x.requests, 0)
    const pass = pair.target === undefined ? undefined : ratio >= pair.target
    const verdict = `${Math.round(ratio * 100)}% of the floor` +
      (pair.target === undefined ? "" : `; target ≥ ${Math.round(pair.target * 100)}%: ${pass ? "PASS" : "FAIL"}`)
    const result: PairResult = {
      perSecond, floorPerSecond, percentOfFloor: Math.round(ratio * 100),
      p50Ms: Number(mean(r.service.map((x) => x.p50Ms)).toFixed(2)), floorP50Ms: Number(mean(r.floor.map((x) => x.p50Ms)).toFixed(2)),
      p99Ms: Number(mean(r.service.map((x) => x.p99Ms)).toFixed(2)), floorP99Ms: Number(mean(r.floor.map((x) => x.p99Ms)).toFixed(2)),
      errors: r.service.reduce((a, x) => a + x.errors, 0), floorErrors: r.floor.reduce((a, x) => a + x.errors, 0),
      processMicros: Math.round(cpu.main), floorProcessMicros: Math.round(floorCpu.main),
      machineMicros: Math.round(cpu.machine), floorMachineMicros: Math.round(floorCpu.machine),
      generatorMicros: Math.round(generator),
      ...(pass === undefined ? {} : { pass })
    }
    out[pair.name] = result
    row(`${pair.name} req/s`, perSecond, floorPerSecond, verdict)
    row("  p50 / p99 ms", `${result.p50Ms} / ${result.p99Ms}`, `${result.floorP50Ms} / ${result.floorP99Ms}`)
    row("  CPU per request µs, serving process / machine", `${result.processMicros} / ${result.machineMicros}`, `${result.floorProcessMicros} / ${result.floorMachineMicros}`)
    if (result.errors + result.floorErrors > 0) row("  errors (socket, timeout, status ≥ 400, wrong body)", result.errors, result.floorErrors)
  }
  return out
}
