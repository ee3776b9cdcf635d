/**
 * Shared benchmark plumbing. The service under test runs as a process of its own
 * (load/service.ts: `startServer` as `src/main.ts serve` runs it) on a fresh database and the real
 * PostgreSQL/Redis when TEST_DATABASE_URL / TEST_REDIS_URL are set; this process keeps a second,
 * idle instance on the same database and Redis (the "control") for setup and for the figures taken
 * in process (`server.run`). The HTTP load comes from `wrk` (load/wrk.ts), a third process, or, for
 * the benches that time sequences of calls, from this process's fetch, which is not the service's
 * either. Embedded mode (no TEST_DATABASE_URL) cannot share its database between processes, so
 * there the service runs in this process, as every bench did before; rows say which.
 * Limits are lifted by RATE_LIMIT_SCALE (BENCH_RATE_LIMIT_SCALE, default 1,000,000: see README).
 */
import { createPublicKey, verify as cryptoVerify } from "node:crypto"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { existsSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { type AppConfig, loadConfig } from "../../src/Config.ts"
import { generateRsaPrivateKeyPem } from "../../src/platform/Keys.ts"
import { type AppOptions, startServer } from "../../src/Server.ts"
import { createDatabase } from "../../test/support/app.ts"
import { type Target, wrk, type WrkResult } from "./load/wrk.ts"

let key: string | undefined

/** RATE_LIMIT_SCALE for every bench: the lowest limit a bench meets (revocation status, 100/min per
 * address) times this must stay far above what 16 connections send in a minute (~2M at 30k/s) */
export const BENCH_RATE_LIMIT_SCALE = process.env.BENCH_RATE_LIMIT_SCALE ?? "1000000"

export interface BenchServer {
  /** the service under test (its own process, or this one in embedded mode) */
  readonly url: string
  readonly config: AppConfig
  /** runs an effect in this process's control instance (same database and Redis as the service) */
  readonly run: <A, E>(effect: Effect.Effect<A, E, any>) => Promise<A>
  /** the process serving `url`, whose CPU the rows count */
  readonly pid: number
  /** whether the service is a process of its own */
  readonly separate: boolean
  readonly stop: () => Promise<void>
}

/** services' processes still running: ended with this process, however it ends */
const children = new Set<{ kill: (signal?: number | NodeJS.Signals) => void }>()
let reaping = false
const reapOnExit = () => {
  if (reaping) return
  reaping = true
  process.on("exit", () => children.forEach((c) => c.kill("SIGKILL")))
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(signal, () => process.exit(130))
}

/** the service's own process, from load/service.ts; answers once it listens */
const spawnService = async (env: Record<string, string>, options: Pick<AppOptions, "workers" | "rateLimit" | "lean" | "anomalies">) => {
  // BENCH_SERVICE_BUN_ARGS: flags for the service's bun, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"
  const flags = (process.env.BENCH_SERVICE_BUN_ARGS ?? "").split(" ").filter((f) => f !== "")
  const child = Bun.spawn([process.execPath, ...flags, new URL("./load/service.ts", import.meta.url).pathname], {
    cwd: tmpdir(),
    env: {
      PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? tmpdir(),
      // what the service reads from its environment beside its configuration (PG_PREPARE: prepared.ts) and the engine's settings
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k === "PG_PREPARE" || k.startsWith("BUN_JSC_")) as Array<[string, string]>),
      ...env, BENCH_APP_OPTIONS: JSON.stringify(options)
    },
    stdout: "pipe",
    stderr: "inherit"
  })
  reapOnExit()
  children.add(child)
  const reader = child.stdout.getReader()
  let buffered = ""
  for (;;) {
    const { done, value } = await reader.read()
    if (done) {
      children.delete(child)
      throw new Error("the service's process exited before listening")
    }
    buffered += new TextDecoder().decode(value)
    const match = /\{"url":"(http:\/\/[^"]+)"\}/.exec(buffered)
    if (match) {
      void (async () => {
        for (;;) if ((await reader.read().catch(() => ({ done: true }))).done) return
      })()
      return { url: match[1]!, pid: child.pid, stop: async () => (child.kill("SIGTERM"), await child.exited, children.delete(child)) }
    }
  }
}

export const startBenchServer = async (env: Record<string, string> = {}, options: AppOptions & { readonly inProcess?: boolean } = {}): Promise<BenchServer> => {
  const db = await createDatabase()
  const vars: Record<string, string> = {
    DATABASE_URL: db.url,
    REDIS_URL: process.env.TEST_REDIS_URL ?? "memory://",
    RSA_PRIVATE_KEY: (key ??= generateRsaPrivateKeyPem()),
    PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "none",
    RATE_LIMIT_SCALE: BENCH_RATE_LIMIT_SCALE,
    WEBHOOK_ALLOW_PRIVATE_HOSTS: "true",
    REDIS_KEY_PREFIX: `bench_${Math.random().toString(36).slice(2, 8)}:`,
    ...env
  }
  const config = loadConfig(vars)
  const separate = options.inProcess !== true && !db.url.startsWith("pglite://") && process.env.BENCH_IN_PROCESS !== "true"
  const { inProcess: _, ...appOptions } = options
  // the control migrates the database first; the service's process then finds nothing pending
  const control = await startServer(config, { ...appOptions, workers: separate ? false : (options.workers ?? false) })
  const child = separate
    ? await spawnService(vars, { workers: options.workers ?? false, rateLimit: options.rateLimit, lean: options.lean, anomalies: options.anomalies })
        .catch(async (e) => (await control.stop(), await db.drop(), Promise.reject(e)))
    : undefined
  return {
    url: child?.url ?? control.url,
    config,
    run: control.run,
    pid: child?.pid ?? process.pid,
    separate,
    stop: async () => {
      await child?.stop()
      await control.stop()
      await db.drop()
    }
  }
}

/** How the rows name where the service ran. */
export const serviceWhere = (server: { readonly separate: boolean }) => server.separate ? "service in its own process" : "service in the harness process (embedded)"

/**
 * Signs a developer up on the enterprise plan (no caps): a bench that makes thousands of grants
 * or agents would otherwise meet the free plan's caps (402) and measure refusals.
 */
export const signupUncapped = async (server: { url: string; run: <A>(effect: Effect.Effect<A, any, any>) => Promise<A> }, mode?: "sandbox" | "live") => {
  const { apiKey, developerId } = await postJson(server.url)("/v1/signup", mode === undefined ? { name: "bench" } : { name: "bench", mode })
  await server.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE developers SET plan = 'enterprise' WHERE id = ${developerId}`))
  return { apiKey: apiKey as string, developerId: developerId as string }
}

/** POSTs JSON to the service (with an API key when given) and answers the parsed body. */
export const postJson = (baseUrl: string) => (path: string, body: unknown, apiKey?: string) =>
  fetch(baseUrl + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
    body: JSON.stringify(body)
  }).then((r) => r.json() as Promise<any>)

/**
 * The RS256 check alone, as the service makes it on a token it has not seen (its remembered
 * verifications bypassed): the crypto floor of token verification and vault exchange.
 */
export const rs256Check = (token: string, jwk: { readonly kty: string; readonly n: string; readonly e: string }) => {
  const [header, payload, signature] = token.split(".") as [string, string, string]
  const key = createPublicKey({ key: { kty: jwk.kty, n: jwk.n, e: jwk.e }, format: "jwk" })
  // the buffers are made on each call, as the service makes them
  return () => cryptoVerify("sha256", Buffer.from(`${header}.${payload}`), key, Buffer.from(signature, "base64url"))
}

export interface LoadResult {
  readonly requests: number
  readonly perSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly errors: number
}

export const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

/** `concurrency` calls of `send` at a time, batch after batch, for `seconds` (load's warm-up). */
const warmUp = async (send: () => Promise<boolean>, concurrency: number, seconds: number) => {
  const until = performance.now() + seconds * 1000
  while (performance.now() < until) await Promise.all(Array.from({ length: concurrency }, send))
}

/** Runs `send` with `concurrency` requests in flight for `seconds`; `send` resolves to ok or not. */
export const load = async (
  send: () => Promise<boolean>,
  options: { seconds?: number; concurrency?: number; warmupSeconds?: number } = {}
): Promise<LoadResult> => {
  const seconds = options.seconds ?? 4
  const concurrency = options.concurrency ?? 16
  await warmUp(send, concurrency, options.warmupSeconds ?? 0.5)
  const latencies: Array<number> = []
  let errors = 0
  const started = performance.now()
  const until = started + seconds * 1000
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const t = performance.now()
        const ok = await send().catch(() => false)
        latencies.push(performance.now() - t)
        if (!ok) errors++
      }
    })
  )
  const elapsed = (performance.now() - started) / 1000
  latencies.sort((a, b) => a - b)
  return {
    requests: latencies.length,
    perSecond: Math.round(latencies.length / elapsed),
    p50Ms: Number(percentile(latencies, 50).toFixed(2)),
    p99Ms: Number(percentile(latencies, 99).toFixed(2)),
    errors
  }
}

/** Times a synchronous or async operation repeated for `seconds`; operations per second. */
export const opsPerSecond = async (op: () => unknown, seconds = 2): Promise<number> => (await timedOps(op, seconds)).perSecond

/** The same, with the number of operations made (for CPU per operation). */
export const timedOps = async (op: () => unknown, seconds = 2): Promise<{ perSecond: number; ops: number }> => {
  const until = performance.now() + seconds * 1000
  let n = 0
  const started = performance.now()
  while (performance.now() < until) {
    await op()
    n++
  }
  return { perSecond: Math.round(n / ((performance.now() - started) / 1000)), ops: n }
}

/** Every row printed in this process, for the closing table of `npm run bench`. */
export const printedRows: Array<{ bench: string; name: string; value: string; floor: string; verdict: string }> = []
export const currentBench = { name: "" }

export const row = (name: string, value: string | number, floor?: string | number, verdict?: string) => {
  printedRows.push({ bench: currentBench.name, name: name.trim(), value: String(value), floor: floor === undefined ? "" : String(floor), verdict: verdict ?? "" })
  console.log(`${name.padEnd(52)} ${String(value).padStart(12)}${floor === undefined ? "" : `   floor ${String(floor).padStart(10)}`}${verdict ? `   ${verdict}` : ""}`)
}

/**
 * CPU time spent while `work` runs, in milliseconds: on the whole machine (every process: the
 * service, PostgreSQL, Redis, the load generator, the kernel, other users; from /proc/stat) and
 * in the serving process: `pid`'s every thread (/proc/<pid>/stat), or, without a pid, this
 * process's main thread. (`mainThreadMs` names the latter for the in-process figures; with a pid it
 * is that process's whole CPU.) Undefined where /proc is not there. (On a VM without steal
 * accounting, time the host takes is counted too, so these are upper bounds.)
 */
export const cpuDuring = async <A>(work: () => Promise<A>, pid?: number): Promise<{ result: A; machineMs?: number; mainThreadMs?: number }> => {
  const since = cpuStopwatch(pid)
  const result = await work()
  return { result, ...since() }
}

/**
 * The counters behind `cpuDuring` read now; the function answers the CPU ms spent since (both
 * undefined where /proc is not there). Synchronous, for work timed inside an Effect.
 */
export const cpuStopwatch = (pid?: number): (() => { machineMs?: number; mainThreadMs?: number }) => {
  if (!existsSync("/proc/stat")) return () => ({})
  const ticksPerMs = 100 / 1000 // USER_HZ
  const machine = () => {
    const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
    return f[0]! + f[1]! + f[2]! + f[5]! + f[6]! // user, nice, system, irq, softirq (not idle, iowait, steal)
  }
  const own = () => {
    const f = readFileSync(pid === undefined ? `/proc/self/task/${process.pid}/stat` : `/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return Number(f[11]) + Number(f[12]) // utime + stime
  }
  const m0 = machine(), t0 = own()
  return () => ({ machineMs: (machine() - m0) / ticksPerMs, mainThreadMs: (own() - t0) / ticksPerMs })
}

/**
 * A tally of CPU per request: `pid` is the serving process (the service's own, or this one for a
 * floor), whose every thread counts; without it, this process's main thread (figures taken in
 * process). `wrk` runs the load generator on a target and tallies it; `measure` and `load` drive
 * `send` from this process (a process apart from the service's when it runs on its own); `during`
 * tallies any work, counted in the units it names (requests, rows, operations), so `perRequest` is
 * per unit: µs in the serving process and on the whole machine (NaN where /proc is not there).
 */
export const makeCpuTally = (pid?: number) => {
  let main = 0
  let machine = 0
  let requests = 0
  const during = async <A>(work: () => Promise<A>, units: (result: A) => number): Promise<A> => {
    const { result, machineMs, mainThreadMs } = await cpuDuring(work, pid)
    main += mainThreadMs ?? NaN
    machine += machineMs ?? NaN
    requests += units(result)
    return result
  }
  return {
    measure: async (send: () => Promise<boolean>, seconds: number): Promise<LoadResult> => {
      await load(send, { seconds: 0.2, concurrency: 16, warmupSeconds: 0 })
      return during(() => load(send, { seconds, concurrency: 16, warmupSeconds: 0 }), (r) => r.requests)
    },
    load: async (send: () => Promise<boolean>, options: { seconds?: number; concurrency?: number; warmupSeconds?: number } = {}): Promise<LoadResult> => {
      await warmUp(send, options.concurrency ?? 16, options.warmupSeconds ?? 0.5)
      return during(() => load(send, { ...options, warmupSeconds: 0 }), (r) => r.requests)
    },
    /** wrk on `target` for `seconds` (after `warmup` s of it, not tallied: a fresh service process
     * compiles its paths in its first seconds; 0 for requests that work once, warmed apart) */
    wrk: async (target: Target, seconds: number, warmup = 2): Promise<WrkResult> => {
      if (warmup > 0) await wrk(target, { seconds: warmup })
      const r = await wrk(target, { seconds })
      main += r.processMs
      machine += r.machineMs
      requests += r.requests
      return r
    },
    during,
    /** CPU ms spent outside `during` (timed by a `cpuStopwatch`), for `units` more */
    add: (spent: { machineMs?: number; mainThreadMs?: number }, units: number) => {
      main += spent.mainThreadMs ?? NaN
      machine += spent.machineMs ?? NaN
      requests += units
    },
    perRequest: () => ({ main: (main * 1000) / requests, machine: (machine * 1000) / requests })
  }
}

/** A tally's CPU per unit as the rows print it: "serving process / machine" µs, or n/a without /proc. */
export const cpuCell = (perUnit: { readonly main: number; readonly machine: number }, digits = 0) =>
  Number.isFinite(perUnit.main) && Number.isFinite(perUnit.machine) ? `${perUnit.main.toFixed(digits)} / ${perUnit.machine.toFixed(digits)}` : "n/a"

/**
 * One-use items (codes) for a wrk run of `seconds` that sends each once: made 16 at a time by
 * `make`, as many as the rate they were made at predicts the run will use (×3, at least 320), so a
 * busy machine does not spend minutes making codes it never sends. A run that still sends more than
 * it was given re-sends used ones, refused and counted as errors (the rows say so).
 */
export const oneUseFor = async (seconds: number, make: () => Promise<string>): Promise<Array<string>> => {
  const items: Array<string> = []
  const started = performance.now()
  while (items.length < 320) items.push(...await Promise.all(Array.from({ length: 16 }, make)))
  const rate = items.length / ((performance.now() - started) / 1000)
  const wanted = Math.min(Number(process.env.BENCH_MAX_CODES ?? 8000), Math.max(320, Math.ceil(rate * seconds * 3)))
  while (items.length < wanted) items.push(...await Promise.all(Array.from({ length: 16 }, make)))
  return items
}
