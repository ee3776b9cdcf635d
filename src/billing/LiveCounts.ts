/**
 * Meters counted live (decisions §16: `verifications`, "counted live, marked estimated"). A token
 * check writes nothing durable and is the hottest read there is, so it costs one map update here:
 * each instance adds its counts up in memory and writes the sums to live_meter_counts every
 * FLUSH_MS (one upsert per developer, meter and day) and when it stops. A crash loses at most one
 * interval of counts: hence "estimated". Reads add what this instance has not written yet.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Context, Duration, Effect, Layer, Schedule } from "effect"

export type LiveMeter = "verifications"

const FLUSH_MS = 5_000
const DAY_MS = 86_400_000

export interface LiveCountsService {
  /** one more of `meter` for the developer, today (the service's clock); synchronous, no fiber */
  readonly add: (developerId: string, meter: LiveMeter) => void
  /** the developer's counts per UTC day (YYYY-MM-DD) over [start, end) */
  readonly daily: (developerId: string, meter: LiveMeter, start: Date, end: Date) => Effect.Effect<Map<string, number>>
  /** writes what is counted in memory now (the interval's flush; tests call it) */
  readonly flush: Effect.Effect<void>
}

export class LiveCounts extends Context.Tag("agent-auth/LiveCounts")<LiveCounts, LiveCountsService>() {}

const dayOf = (ms: number) => new Date(Math.floor(ms / DAY_MS) * DAY_MS).toISOString().slice(0, 10)

export const LiveCountsLive = Layer.scoped(
  LiveCounts,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const clock = yield* Effect.clock
    /** `developer|meter|day` → count not yet written */
    let pending = new Map<string, number>()

    const flush = Effect.suspend(() => {
      if (pending.size === 0) return Effect.void
      const taken = pending
      pending = new Map()
      const rows = [...taken].map(([key, n]) => {
        const [developerId, meter, day] = key.split("|") as [string, string, string]
        return { developerId, meter, day, n }
      })
      return sql`INSERT INTO live_meter_counts ${sql.insert(rows.map((r) => ({ developer_id: r.developerId, meter: r.meter, day: r.day, n: r.n })))}
                 ON CONFLICT (developer_id, meter, day) DO UPDATE SET n = live_meter_counts.n + excluded.n`.pipe(
        Effect.asVoid,
        // the database is away: the counts go back and are written with the next flush
        Effect.catchAll((e) =>
          Effect.sync(() => {
            for (const [key, n] of taken) pending.set(key, (pending.get(key) ?? 0) + n)
          }).pipe(Effect.zipRight(Effect.logWarning(`live meter counts not written: ${e.message}`)))
        )
      )
    })

    yield* Effect.addFinalizer(() => flush)
    // the flush interval is wall-clock time: a test that moves a TestClock by days must not replay
    // thousands of flushes (the day a count belongs to is still the service's clock)
    yield* flush.pipe(Effect.repeat(Schedule.spaced(Duration.millis(FLUSH_MS))), Effect.withClock(Clock.make()), Effect.forkScoped)

    const daily: LiveCountsService["daily"] = (developerId, meter, start, end) =>
      sql<{ day: string; n: string | number }>`
        SELECT to_char(day, 'YYYY-MM-DD') AS day, n FROM live_meter_counts
         WHERE developer_id = ${developerId} AND meter = ${meter} AND day >= ${dayOf(start.getTime())}::date AND day < ${dayOf(end.getTime() + DAY_MS - 1)}::date`.pipe(
        Effect.map((rows) => {
          const out = new Map<string, number>(rows.map((r) => [r.day, Number(r.n)]))
          for (const [key, n] of pending) {
            const [dev, m, day] = key.split("|") as [string, string, string]
            if (dev !== developerId || m !== meter || day < dayOf(start.getTime()) || day >= dayOf(end.getTime() + DAY_MS - 1)) continue
            out.set(day, (out.get(day) ?? 0) + n)
          }
          return out
        }),
        Effect.orDie
      )

    return {
      add: (developerId, meter) => {
        const key = `${developerId}|${meter}|${dayOf(clock.unsafeCurrentTimeMillis())}`
        pending.set(key, (pending.get(key) ?? 0) + 1)
      },
      daily,
      flush
    }
  })
)
