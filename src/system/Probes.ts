/**
 * GET /health's probes, shared by the API handler (src/system/Http.ts) and the lean path
 * (src/system/Lean.ts), so both answer from the same checks.
 */
import { Effect } from "effect"
import { Counters } from "../platform/Counters.ts"
import { PgPool } from "../platform/PgPool.ts"

const PROBE_TIMEOUT = "1 second"

export interface ProbeResult {
  readonly db: boolean
  readonly redis: boolean
}

/**
 * Both probes under one deadline: the SELECT 1 is sent first and answers as a promise while the
 * PING runs, so a probe costs no fiber and no timer of its own (two of each per probe before);
 * a probe that has not answered by the deadline counts as failing.
 */
export const makeProbes = Effect.gen(function*() {
  const pool = yield* PgPool
  const counters = yield* Counters
  return Effect.suspend(() => {
    const ok = { db: false, redis: false }
    const db = pool.query("SELECT 1").then(() => (ok.db = true), () => false)
    return counters.ping.pipe(
      Effect.match({ onFailure: () => false, onSuccess: () => (ok.redis = true) }),
      Effect.zipRight(Effect.promise(() => db)),
      Effect.timeout(PROBE_TIMEOUT),
      Effect.ignore,
      Effect.as(ok as ProbeResult)
    )
  })
})

/** The body and status GET /health answers for a probe result. */
export const healthAnswer = ({ db, redis }: ProbeResult) =>
  db && redis
    ? { status: 200, body: { status: "ok" as const } }
    : {
      status: 503,
      body: { status: "degraded" as const, failing: [...(db ? [] : ["db" as const]), ...(redis ? [] : ["redis" as const])] }
    }
