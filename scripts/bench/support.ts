/**
 * Shared benchmark plumbing: start the service (real PostgreSQL/Redis when TEST_DATABASE_URL /
 * TEST_REDIS_URL are set, embedded otherwise) with limits lifted by RATE_LIMIT_SCALE, and drive it
 * with a fixed number of concurrent in-flight requests for a fixed time.
 */
import { createPublicKey, verify as cryptoVerify } from "node:crypto"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { existsSync, readFileSync } from "node:fs"
import { loadConfig } from "../../src/Config.ts"
import { generateRsaPrivateKeyPem } from "../../src/platform/Keys.ts"
import { type AppOptions, startServer } from "../../src/Server.ts"
import { createDatabase } from "../../test/support/app.ts"

let key: string | undefined

export const startBenchServer = async (env: Record<string, string> = {}, options: AppOptions = {}) => {
  const db = await createDatabase()
  const config = loadConfig({
    DATABASE_URL: db.url,
    REDIS_URL: process.env.TEST_REDIS_URL ?? "memory://",
    RSA_PRIVATE_KEY: (key ??= generateRsaPrivateKeyPem()),
    PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "none",
    RATE_LIMIT_SCALE: "100000",
    WEBHOOK_ALLOW_PRIVATE_HOSTS: "true",
    REDIS_KEY_PREFIX: `bench_${Math.random().toString(36).slice(2, 8)}:`,
    ...env
  })
  const server = await startServer(config, { workers: false, ...options })
  return {
    ...server,
    config,
    stop: async () => {
      await server.stop()
      await db.drop()
    }
  }
}

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
 * service's threads, PostgreSQL, Redis, the kernel; from /proc/stat) and on this process's main
 * thread (the event loop the service and the load generator share). The figures behind the "at
 * best" rows: work that needs C ms of CPU cannot finish in less than C / cores ms of wall time.
 * Undefined where /proc is not there. (On a VM without steal accounting, time the host takes is
 * counted too, so these are upper bounds of what the work itself needs.)
 */
export const cpuDuring = async <A>(work: () => Promise<A>): Promise<{ result: A; machineMs?: number; mainThreadMs?: number }> => {
  const since = cpuStopwatch()
  const result = await work()
  return { result, ...since() }
}

/**
 * The counters behind `cpuDuring` read now; the function answers the CPU ms spent since (both
 * undefined where /proc is not there). Synchronous, for work timed inside an Effect.
 */
export const cpuStopwatch = (): (() => { machineMs?: number; mainThreadMs?: number }) => {
  if (!existsSync("/proc/stat")) return () => ({})
  const ticksPerMs = 100 / 1000 // USER_HZ
  const machine = () => {
    const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
    return f[0]! + f[1]! + f[2]! + f[5]! + f[6]! // user, nice, system, irq, softirq (not idle, iowait, steal)
  }
  const mainThread = () => {
    const f = readFileSync(`/proc/self/task/${process.pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return Number(f[11]) + Number(f[12]) // utime + stime
  }
  const m0 = machine(), t0 = mainThread()
  return () => ({ machineMs: (machine() - m0) / ticksPerMs, mainThreadMs: (mainThread() - t0) / ticksPerMs })
}

/**
 * A load run timed for its CPU: each `measure` runs `send` for `seconds` after a short warm-up and
 * adds its CPU time and requests to the tally; `perRequest` answers µs per request, on the main
 * thread and on the whole machine (NaN where /proc is not there). `load` and `during` tally work
 * as a benchmark already runs it: `load` exactly as `load` (its warm-up not tallied), `during` any
 * work, counted in the units it names (requests, rows, operations), so `perRequest` is per unit.
 */
export const makeCpuTally = () => {
  let main = 0
  let machine = 0
  let requests = 0
  const during = async <A>(work: () => Promise<A>, units: (result: A) => number): Promise<A> => {
    const { result, machineMs, mainThreadMs } = await cpuDuring(work)
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

/** A tally's CPU per unit as the rows print it: "event loop / machine" µs, or n/a without /proc. */
export const cpuCell = (perUnit: { readonly main: number; readonly machine: number }, digits = 0) =>
  Number.isFinite(perUnit.main) && Number.isFinite(perUnit.machine) ? `${perUnit.main.toFixed(digits)} / ${perUnit.machine.toFixed(digits)}` : "n/a"
