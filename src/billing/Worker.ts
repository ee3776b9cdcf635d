/**
 * The period-close fiber (decisions §16, revised): on the Effect Clock, at start and every
 * CLOSE_INTERVAL, it closes the month before the current one, once CLOSE_GRACE has passed since
 * that month ended (meters written late, by an instance whose clock or queue lags, still count).
 * closePeriod holds the month's lease, so however many instances run this, each month is invoiced
 * once. A close that fails (a developer on a plan the plans table lacks, a database error) is
 * logged, counted (`agent_auth_billing_close_failures_total`), kept on the month's row and tried
 * again next round. Once this instance has seen a month closed it makes no query for it again.
 */
import { Duration, Effect, Layer, Schedule } from "effect"
import { Metrics } from "../platform/Metrics.ts"
import { nowMillis } from "../platform/Time.ts"
import { closePeriod, type CloseOutcome, previousPeriodStart } from "./Close.ts"
import { periodOf } from "./Plans.ts"

export const CLOSE_INTERVAL = Duration.minutes(10)
/** how long after a month ends the scheduled close waits (the operator command does not) */
export const CLOSE_GRACE = Duration.hours(1)

/** the scheduled close of the previous month, or "not-due" within the grace after it ended */
export const closeDue = Effect.gen(function*() {
  const ms = yield* nowMillis
  const start = previousPeriodStart(ms)
  if (ms < periodOf(start.getTime()).end.getTime() + Duration.toMillis(CLOSE_GRACE)) {
    return { status: "not-due", period: periodOf(start.getTime()).label } as const
  }
  return yield* closePeriod(start)
})

export const WorkerLive = Layer.scopedDiscard(Effect.gen(function*() {
  const metrics = yield* Metrics
  let seenClosed: number | undefined
  const round = Effect.gen(function*() {
    const start = previousPeriodStart(yield* nowMillis).getTime()
    if (seenClosed === start) return
    const outcome: CloseOutcome | { status: "not-due" } = yield* closeDue
    if (outcome.status === "closed" || outcome.status === "already-closed") seenClosed = start
    if (outcome.status === "closed") yield* Effect.logInfo("billing period closed", outcome)
    if (outcome.status === "failed") {
      metrics.inc("billing_close_failures_total")
      yield* Effect.logError("billing period close failed; retrying next round").pipe(
        Effect.annotateLogs({ period: outcome.period, invoices: outcome.invoices, errors: outcome.errors.join("; ").slice(0, 2000) }))
    }
  })
  yield* round.pipe(
    Effect.catchAllCause((cause) =>
      Effect.zipRight(Effect.sync(() => metrics.inc("billing_close_failures_total")),
        Effect.logError("billing period close failed; retrying next round", cause))),
    Effect.repeat(Schedule.spaced(CLOSE_INTERVAL)),
    Effect.forkScoped
  )
}))
