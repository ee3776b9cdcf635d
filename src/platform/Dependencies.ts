/**
 * The service's dependencies (PostgreSQL, Redis) as an operator sees them: each probe is bounded to
 * one second and timed (agent_auth_dependency_probe_duration_seconds), and a change of state is
 * logged once, when it happens ("dependency unavailable" at warn, "dependency available again" at
 * info), never once per failed request. The readiness probe, the health probe and a monitor fiber
 * (every 10 s while serving) feed it.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Context, Duration, Effect, Layer, Option } from "effect"
import { migrations } from "../../sql/index.ts"
import { Counters } from "./Counters.ts"
import { DataDirectory } from "./DataDirectory.ts"
import { Metrics } from "./Metrics.ts"

export type Dependency = "db" | "redis"

export interface DependenciesService {
  /** probes both at once; true where reachable */
  readonly probe: Effect.Effect<Record<Dependency, boolean>>
  /** the embedded migrations not yet recorded as applied (empty when up to date) */
  readonly pendingMigrations: Effect.Effect<ReadonlyArray<string>, unknown>
  /** report an outcome seen elsewhere (a request that found the database away) */
  readonly report: (dependency: Dependency, ok: boolean, reason?: string) => Effect.Effect<void>
}

export class Dependencies extends Context.Tag("agent-auth/Dependencies")<Dependencies, DependenciesService>() {}

const PROBE_TIMEOUT = Duration.seconds(1)
const MONITOR_INTERVAL = Duration.seconds(10)

/** the ids of the embedded migrations (`0017_credentials` → 17) */
export const embeddedMigrationIds = (): ReadonlyArray<number> => Object.keys(migrations).map((name) => Number(name.split("_")[0]))

const reasonOf = (e: unknown): string => {
  const inner = (e as { cause?: { code?: string; message?: string }; message?: string } | null)
  const text = inner?.cause?.code ?? inner?.cause?.message ?? inner?.message ?? String(e)
  return String(text).split("\n")[0]!.slice(0, 200)
}

export const DependenciesLive = Layer.effect(
  Dependencies,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const counters = yield* Counters
    const dataDirectory = yield* DataDirectory
    const metrics = Option.getOrUndefined(yield* Effect.serviceOption(Metrics))
    // unknown until first seen: the first outcome is not a transition unless it is a failure
    const state: Record<Dependency, boolean | undefined> = { db: undefined, redis: undefined }

    const report = (dependency: Dependency, ok: boolean, reason?: string) =>
      Effect.suspend(() => {
        const before = state[dependency]
        state[dependency] = ok
        if (before === ok || (before === undefined && ok)) return Effect.void
        return ok
          ? Effect.logInfo("dependency available again").pipe(Effect.annotateLogs({ dependency }))
          : Effect.logWarning("dependency unavailable").pipe(Effect.annotateLogs({ dependency, reason: reason ?? "unreachable" }))
      })

    const timed = (dependency: Dependency, effect: Effect.Effect<unknown, unknown>) =>
      Effect.gen(function*() {
        const started = performance.now()
        const result = yield* effect.pipe(
          Effect.timeoutFail({ duration: PROBE_TIMEOUT, onTimeout: () => new Error("timed out after 1 s") }),
          Effect.either
        )
        const ok = result._tag === "Right"
        metrics?.probe(dependency, ok, (performance.now() - started) / 1000)
        yield* report(dependency, ok, result._tag === "Left" ? reasonOf(result.left) : undefined)
        return ok
      })

    // embedded: the database is only as good as its data directory (gone or read-only → unavailable)
    const directory = Effect.suspend(() => {
      const problem = dataDirectory.check()
      return problem === undefined ? Effect.void : Effect.fail(new Error(problem))
    })
    const probe = Effect.all({ db: timed("db", Effect.zipRight(directory, sql`SELECT 1`)), redis: timed("redis", counters.ping) }, { concurrency: 2 })

    const pendingMigrations = Effect.gen(function*() {
      const rows = yield* sql<{ migrationId: number }>`SELECT migration_id FROM schema_migrations`
      const applied = new Set(rows.map((r) => Number(r.migrationId)))
      return Object.keys(migrations).filter((name) => !applied.has(Number(name.split("_")[0])))
    }).pipe(Effect.timeout(PROBE_TIMEOUT))

    return { probe, pendingMigrations, report }
  })
)

/** While serving: probe every 10 s, so a dependency going away (and coming back) is logged even when idle. */
export const DependencyMonitorLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const dependencies = yield* Dependencies
    // wall-clock pauses: a test that moves a TestClock by days must not replay thousands of probes
    const pause = Effect.sleep(MONITOR_INTERVAL).pipe(Effect.withClock(Clock.make()))
    yield* Effect.forkScoped(Effect.forever(Effect.zipRight(pause, dependencies.probe)))
  })
)
