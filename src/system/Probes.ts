/**
 * GET /health's probes, shared by the API handler (src/system/Http.ts) and the lean path
 * (src/system/Lean.ts), so both answer from the same checks.
 */
import { Effect } from "effect"
import { Counters } from "../platform/Counters.ts"
import { DataDirectory } from "../platform/DataDirectory.ts"
import { PgPool } from "../platform/PgPool.ts"

const PROBE_TIMEOUT_MS = 1_000

export interface ProbeResult {
  readonly db: boolean
  readonly redis: boolean
}

export interface Probes {
  /** both probes as a promise: what the lean path awaits, with no fiber per probe */
  readonly run: () => Promise<ProbeResult>
  /** the same, for the API's handler */
  readonly effect: Effect.Effect<ProbeResult>
}

/**
 * Both probes under one real-time deadline: SELECT 1 and PING are sent at once, each promise marks
 * its own success, and one timer settles the answer if either is late (a probe that has not
 * answered by then counts as failing). No fiber, no race and no Clock sleep per probe: issue 27
 * measured Effect.timeout's race at about a third of a health probe's CPU. Real time, not the
 * service's Clock, as the dependency monitor: a probe is about a live connection, and a test
 * holding a TestClock still must not hang /health.
 */
export const makeProbes = Effect.gen(function*() {
  const pool = yield* PgPool
  const counters = yield* Counters
  const dataDirectory = yield* DataDirectory
  const run = (): Promise<ProbeResult> =>
    new Promise((resolve) => {
      const ok = { db: false, redis: false }
      let pending = 2
      const done = () => {
        clearTimeout(timer)
        resolve({ db: ok.db, redis: ok.redis })
      }
      const settle = () => --pending === 0 && done()
      const timer = setTimeout(done, PROBE_TIMEOUT_MS)
      // embedded: a data directory removed or read-only fails the database probe
      pool.query("SELECT 1").then(() => (ok.db = dataDirectory.check() === undefined), () => false).then(settle)
      counters.pingNow().then(() => (ok.redis = true), () => false).then(settle)
    })
  return { run, effect: Effect.promise(run) } satisfies Probes
})

/** The body and status GET /health answers for a probe result. */
export const healthAnswer = ({ db, redis }: ProbeResult) =>
  db && redis
    ? { status: 200, body: { status: "ok" as const } }
    : {
      status: 503,
      body: { status: "degraded" as const, failing: [...(db ? [] : ["db" as const]), ...(redis ? [] : ["redis" as const])] }
    }
