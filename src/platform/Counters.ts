/**
 * Counters: the fixed-window counter store behind rate limiting.
 *
 * `hit` checks every window of a request and increments them all in ONE round trip (a Lua script
 * on Redis; the same algorithm in memory): if any window is already full nothing is incremented,
 * so a request refused by one limiter never spends another's budget.
 *
 * Redis runs with no offline queue and a 250 ms command timeout: when it is down or slow the call
 * fails at once and the caller fails closed (503), instead of queueing requests behind it.
 */
import { Context, Data, Effect, Layer } from "effect"
import Redis from "ioredis"
import { Config } from "../Config.ts"

export interface WindowCheck {
  /** full counter key, including the window start */
  readonly key: string
  readonly limit: number
}

export interface HitResult {
  /** index of the first window that was already full, or -1 when the request is allowed */
  readonly rejectedBy: number
  /** count of each window after this request (unchanged counts when rejected) */
  readonly counts: ReadonlyArray<number>
}

export class CounterStoreUnavailable extends Data.TaggedError("CounterStoreUnavailable")<{ readonly cause: unknown }> {}

export interface CounterStore {
  readonly hit: (checks: ReadonlyArray<WindowCheck>, ttlMs: number) => Effect.Effect<HitResult, CounterStoreUnavailable>
  /** the same call as a promise (rejected with CounterStoreUnavailable), for the lean path's fiberless admission */
  readonly hitNow: (checks: ReadonlyArray<WindowCheck>, ttlMs: number) => Promise<HitResult>
  readonly ping: Effect.Effect<void, CounterStoreUnavailable>
  /** the same PING as a promise, for a probe that runs outside a fiber (the lean /health) */
  readonly pingNow: () => Promise<void>
  readonly kind: "redis" | "memory"
  /**
   * Billing quotas (decisions §16): takes up to `want` units while the counter is below `limit`.
   * Answers the count after, the units granted (0: at the limit) and the counter's remaining life,
   * or `missing` when there is no counter (the caller seeds it from durable rows).
   */
  readonly quotaHit: (key: string, limit: number, want: number) => Effect.Effect<QuotaHit, CounterStoreUnavailable>
  /** "nx" sets a missing counter, "max" raises it, "set" replaces it (expiring after ttlMs); "refund" takes `value` back */
  readonly quotaSeed: (key: string, value: number, ttlMs: number, mode: "nx" | "max" | "set" | "refund") => Effect.Effect<void, CounterStoreUnavailable>
  /** prefix for every key; tests give each app its own */
  readonly prefix: string
  /** the Redis client itself (benchmark floors make the same call through it) */
  readonly redis?: Redis
}

export type QuotaHit =
  | { readonly missing: true }
  | { readonly missing: false; readonly count: number; readonly granted: number; readonly ttlMs: number }

const QUOTA_HIT_SCRIPT = `
local c = redis.call('GET', KEYS[1])
if not c then return {-1, 0, 0} end
c = tonumber(c)
local room = tonumber(ARGV[1]) - c
local want = tonumber(ARGV[2])
if room <= 0 then return {c, 0, redis.call('PTTL', KEYS[1])} end
if want > room then want = room end
return {redis.call('INCRBY', KEYS[1], want), want, redis.call('PTTL', KEYS[1])}
`
const QUOTA_SEED_SCRIPT = `
local c = redis.call('GET', KEYS[1])
if ARGV[3] == 'refund' then
  if c then redis.call('DECRBY', KEYS[1], ARGV[1]) end
  return 0
end
if ARGV[3] == 'nx' and c then return 0 end
if ARGV[3] == 'max' and c and tonumber(c) >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`

export class Counters extends Context.Tag("agent-auth/Counters")<Counters, CounterStore>() {}

const HIT_SCRIPT = `
local n = #KEYS
for i = 1, n do
  local c = tonumber(redis.call('GET', KEYS[i]) or '0')
  if c >= tonumber(ARGV[i + 1]) then
    local out = {i}
    for j = 1, n do out[#out + 1] = tonumber(redis.call('GET', KEYS[j]) or '0') end
    return out
  end
end
local out = {0}
for i = 1, n do
  local c = redis.call('INCR', KEYS[i])
  if c == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
  out[#out + 1] = c
end
return out
`

/** The in-process store: the same algorithm over a Map. Also the containment fallback. */
export const makeMemoryStore = (prefix = ""): CounterStore => {
  const windows = new Map<string, { count: number; expiresAt: number }>()
  let lastSweep = Date.now()
  const current = (key: string, now: number) => {
    const entry = windows.get(key)
    if (entry === undefined || entry.expiresAt <= now) return 0
    return entry.count
  }
  const quotas = new Map<string, { count: number; expiresAt: number }>()
  const quota = (key: string) => {
    const entry = quotas.get(key)
    if (entry !== undefined && entry.expiresAt <= Date.now()) quotas.delete(key)
    return entry !== undefined && entry.expiresAt > Date.now() ? entry : undefined
  }
  const hitWindows = (checks: ReadonlyArray<WindowCheck>, ttlMs: number): HitResult => {
    // Real time for expiry bookkeeping only; window keys already carry the (Clock) window start.
    const now = Date.now()
    if (now - lastSweep > 60_000) {
      for (const [key, entry] of windows) if (entry.expiresAt <= now) windows.delete(key)
      lastSweep = now
    }
    for (let i = 0; i < checks.length; i++) {
      if (current(checks[i]!.key, now) >= checks[i]!.limit) {
        return { rejectedBy: i, counts: checks.map((c) => current(c.key, now)) }
      }
    }
    const counts = checks.map((c) => {
      const entry = windows.get(c.key)
      if (entry === undefined || entry.expiresAt <= now) {
        windows.set(c.key, { count: 1, expiresAt: now + ttlMs })
        return 1
      }
      entry.count++
      return entry.count
    })
    return { rejectedBy: -1, counts }
  }
  return {
    kind: "memory",
    prefix,
    ping: Effect.void,
    pingNow: () => Promise.resolve(),
    quotaHit: (key, limit, want) =>
      Effect.sync((): QuotaHit => {
        const entry = quota(key)
        if (entry === undefined) return { missing: true }
        const granted = Math.max(0, Math.min(want, limit - entry.count))
        entry.count += granted
        return { missing: false, count: entry.count, granted, ttlMs: entry.expiresAt - Date.now() }
      }),
    quotaSeed: (key, value, ttlMs, mode) =>
      Effect.sync(() => {
        const entry = quota(key)
        if (mode === "refund") {
          if (entry !== undefined) entry.count -= value
          return
        }
        if (mode === "nx" && entry !== undefined) return
        if (mode === "max" && entry !== undefined && entry.count >= value) return
        quotas.set(key, { count: value, expiresAt: Date.now() + ttlMs })
      }),
    hit: (checks, ttlMs) => Effect.sync(() => hitWindows(checks, ttlMs)),
    hitNow: (checks, ttlMs) => Promise.resolve(hitWindows(checks, ttlMs))
  }
}

const makeRedisStore = (url: string, prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const client = new Redis(url, {
        enableOfflineQueue: false,
        commandTimeout: 250,
        connectTimeout: 1000,
        maxRetriesPerRequest: 0,
        lazyConnect: false,
        // concurrent requests share one write to Redis instead of one syscall each
        enableAutoPipelining: true,
        // keep reconnecting: limiting resumes by itself when Redis comes back
        retryStrategy: (times) => Math.min(50 * times, 1000)
      })
      client.on("error", () => {
        // connection errors surface on each command; this handler keeps ioredis from printing them
      })
      client.defineCommand("rateHit", { lua: HIT_SCRIPT })
      client.defineCommand("quotaHit", { numberOfKeys: 1, lua: QUOTA_HIT_SCRIPT })
      client.defineCommand("quotaSeed", { numberOfKeys: 1, lua: QUOTA_SEED_SCRIPT })
      return client
    }),
    (client) => Effect.promise(() => client.quit().catch(() => client.disconnect())).pipe(Effect.ignore)
  ).pipe(
    Effect.map((client): CounterStore => ({
      kind: "redis",
      prefix,
      redis: client,
      ping: Effect.tryPromise({
        try: () => client.ping(),
        catch: (cause) => new CounterStoreUnavailable({ cause })
      }).pipe(Effect.asVoid),
      pingNow: () => client.ping().then(() => undefined),
      // resumed from ioredis's callback, as `hit` is: authorize and code exchange wait on it
      quotaHit: (key, limit, want) =>
        Effect.async<QuotaHit, CounterStoreUnavailable>((resume) => {
          ;(client as any).quotaHit(key, limit, want, (error: unknown, out: [number, number, number]) => {
            if (error) resume(Effect.fail(new CounterStoreUnavailable({ cause: error })))
            else {
              resume(Effect.succeed(
                Number(out[0]) < 0
                  ? { missing: true }
                  : { missing: false, count: Number(out[0]), granted: Number(out[1]), ttlMs: Number(out[2]) }
              ))
            }
          })
        }),
      quotaSeed: (key, value, ttlMs, mode) =>
        Effect.tryPromise({
          try: () => (client as any).quotaSeed(key, value, ttlMs, mode) as Promise<number>,
          catch: (cause) => new CounterStoreUnavailable({ cause })
        }).pipe(Effect.asVoid),
      // One callback-style call resumed straight into the fiber: this is the hot path of every request.
      hit: (checks, ttlMs) =>
        Effect.async<HitResult, CounterStoreUnavailable>((resume) => {
          rateHit(client, checks, ttlMs, (error, result) => resume(error ? Effect.fail(error) : Effect.succeed(result!)))
        }),
      hitNow: (checks, ttlMs) =>
        new Promise<HitResult>((resolve, reject) => {
          rateHit(client, checks, ttlMs, (error, result) => (error ? reject(error) : resolve(result!)))
        })
    }))
  )

/** The rate-limit script's one call: every window checked and counted together. */
const rateHit = (
  client: Redis,
  checks: ReadonlyArray<WindowCheck>,
  ttlMs: number,
  done: (error: CounterStoreUnavailable | undefined, result?: HitResult) => void
) => {
  const args: Array<string | number> = [checks.length]
  for (const c of checks) args.push(c.key)
  args.push(ttlMs)
  for (const c of checks) args.push(c.limit)
  ;(client as any).rateHit(...args, (error: unknown, out: Array<number>) => {
    if (error) done(new CounterStoreUnavailable({ cause: error }))
    else done(undefined, { rejectedBy: Number(out[0]) - 1, counts: out.slice(1).map(Number) })
  })
}

/**
 * A database index the server does not have is refused at start (ioredis would keep retrying its
 * SELECT in the background while every request failed). Asked once with a short-lived connection;
 * a Redis that cannot be reached now is not checked (requests fail closed until it answers).
 */
const checkDatabaseIndex = (url: string) =>
  Effect.tryPromise(async () => {
    const db = Number(new URL(url).pathname.slice(1) || "0")
    if (db === 0) return undefined
    const probe = new Redis(url, { db: 0, lazyConnect: true, enableOfflineQueue: false, connectTimeout: 1000, commandTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null })
    probe.on("error", () => {})
    try {
      await probe.connect()
    } catch {
      probe.disconnect()
      return undefined
    }
    try {
      await probe.call("SELECT", String(db))
      return undefined
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e)
      if (!/out of range|invalid DB index/i.test(message)) return undefined
      const databases = await probe.call("CONFIG", "GET", "databases").then((r) => (r as Array<string>)[1], () => undefined)
      return `REDIS_URL: database index ${db} is out of range${databases ? ` (the server has ${databases}: 0-${Number(databases) - 1})` : ""}`
    } finally {
      probe.disconnect()
    }
  }).pipe(
    Effect.orElseSucceed(() => undefined),
    Effect.flatMap((problem) => problem === undefined ? Effect.void : Effect.fail(new Error(problem)))
  )

export const CountersLive = Layer.scoped(
  Counters,
  Effect.gen(function*() {
    const config = yield* Config
    const prefix = config.redisKeyPrefix
    if (config.redisUrl.startsWith("memory:")) return makeMemoryStore(prefix)
    yield* checkDatabaseIndex(config.redisUrl)
    return yield* makeRedisStore(config.redisUrl, prefix)
  })
)
