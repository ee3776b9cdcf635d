/**
 * PostgreSQL or Redis unreachable at start is not a configuration error (decisions §10, revised):
 * `serve` tries again with backoff for STARTUP_TIMEOUT_SECONDS, one log line per failed try, then
 * gives up with StartupTimeout (exit 75, EX_TEMPFAIL: the systemd unit restarts on it). What waiting
 * cannot fix (wrong password, no such database, unknown host) is StartupRefused at once (exit 1).
 * The pauses are the Effect Clock's (tests drive them with TestClock); the probes are real I/O.
 */
import { Clock, Duration, Effect } from "effect"
import Redis from "ioredis"
import pg from "pg"
import type { AppConfig } from "../Config.ts"
import { isTransientPostgresFailure, postgresConnectFailure, redisReason, where } from "./ConnectErrors.ts"
import type { LogService } from "./Log.ts"

export interface StartupTarget {
  readonly dependency: "db" | "redis"
  /** resolves when the dependency answers; rejects with what went wrong */
  readonly probe: () => Promise<void>
  /** one line naming the variable and why, and whether waiting may fix it */
  readonly explain: (cause: unknown) => { readonly message: string; readonly transient: boolean }
}

/** still unreachable when STARTUP_TIMEOUT_SECONDS ran out: exit 75 */
export class StartupTimeout extends Error {
  readonly _tag = "StartupTimeout"
}
/** a failure waiting cannot fix: exit 1 */
export class StartupRefused extends Error {
  readonly _tag = "StartupRefused"
}

const FIRST_PAUSE_MS = 500
const LONGEST_PAUSE_MS = 5_000
const CONNECT_TIMEOUT_MS = 3_000

/** the pause after the n-th failed try (1-based): 0.5 s, 1 s, 2 s, 4 s, then 5 s */
export const pauseAfter = (attempt: number) => Math.min(LONGEST_PAUSE_MS, FIRST_PAUSE_MS * 2 ** (attempt - 1))

export const waitForDependencies = (targets: ReadonlyArray<StartupTarget>, timeoutSeconds: number, log: LogService) =>
  Effect.gen(function*() {
    const started = yield* Clock.currentTimeMillis
    const deadline = started + timeoutSeconds * 1000
    let waiting = targets
    for (let attempt = 1; waiting.length > 0; attempt++) {
      const outcomes = yield* Effect.forEach(waiting, (target) =>
        Effect.map(
          Effect.promise(() => target.probe().then(() => undefined, (cause: unknown) => target.explain(cause))),
          (failure) => ({ target, failure })
        ), { concurrency: "unbounded" })
      const failed = outcomes.filter((o) => o.failure !== undefined)
      const refused = failed.find((o) => !o.failure!.transient)
      if (refused !== undefined) return yield* Effect.fail(new StartupRefused(refused.failure!.message))
      if (failed.length === 0) return attempt
      const now = yield* Clock.currentTimeMillis
      const left = deadline - now
      if (left <= 0) {
        const seconds = Math.round((now - started) / 1000)
        return yield* Effect.fail(new StartupTimeout(`${failed[0]!.failure!.message} (gave up after ${seconds} s and ${attempt} ${attempt === 1 ? "try" : "tries"}; STARTUP_TIMEOUT_SECONDS=${timeoutSeconds})`))
      }
      const pause = Math.min(pauseAfter(attempt), left)
      for (const { target, failure } of failed) {
        log.write("warn", "dependency unreachable at start; retrying", { dependency: target.dependency, attempt, retryInMs: pause, reason: failure!.message })
      }
      waiting = failed.map((o) => o.target)
      yield* Effect.sleep(Duration.millis(pause))
    }
    return 0
  })

const postgresTarget = (url: string): StartupTarget => ({
  dependency: "db",
  probe: async () => {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS })
    client.on("error", () => {})
    try {
      await client.connect()
      await client.query("SELECT 1")
    } finally {
      await client.end().catch(() => {})
    }
  },
  explain: (cause) => ({ message: postgresConnectFailure(url, cause).message, transient: isTransientPostgresFailure(cause) })
})

const redisTarget = (url: string): StartupTarget => {
  // ioredis rejects connect() with a bare "Connection is closed."; the socket's own error says why
  let last: unknown
  return {
    dependency: "redis",
    probe: async () => {
      last = undefined
      const client = new Redis(url, {
        lazyConnect: true,
        // the index is checked once connected (Counters.ts says which indexes the server has)
        db: 0,
        enableOfflineQueue: false,
        connectTimeout: CONNECT_TIMEOUT_MS,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null
      })
      client.on("error", (e) => (last = e))
      try {
        await client.connect()
        await client.ping()
      } catch (e) {
        throw last ?? e
      } finally {
        client.disconnect()
      }
    },
    explain: (cause) => {
      const { reason, transient } = redisReason(cause)
      return { message: `REDIS_URL: cannot connect to ${where(url, "6379")}: ${reason}`, transient }
    }
  }
}

/** what `serve` waits for: a PostgreSQL server and a Redis server (never the embedded ones) */
export const startupTargets = (config: AppConfig): ReadonlyArray<StartupTarget> => [
  ...(config.databaseUrl.startsWith("pglite:") ? [] : [postgresTarget(config.databaseUrl)]),
  ...(config.redisUrl.startsWith("memory:") ? [] : [redisTarget(config.redisUrl)])
]
