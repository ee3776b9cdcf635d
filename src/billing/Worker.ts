/**
 * The period-close fiber (decisions §16): on the Effect Clock, at start and every
 * CLOSE_INTERVAL, it closes the month before the current one. closePeriod claims the month's row
 * with FOR UPDATE SKIP LOCKED in one transaction, so however many instances run this, each month
 * is invoiced once, and a close cut short by a crash is redone by the next round. Once this instance
 * has seen a month closed it makes no query for it again (a clock jump replays many rounds).
 */
import { Duration, Effect, Layer, Schedule } from "effect"
import { nowMillis } from "../platform/Time.ts"
import { closePeriod, previousPeriodStart } from "./Invoices.ts"

export const CLOSE_INTERVAL = Duration.minutes(10)

export const closeDue = Effect.gen(function*() {
  const ms = yield* nowMillis
  return yield* closePeriod(previousPeriodStart(ms))
})

export const WorkerLive = Layer.scopedDiscard(Effect.gen(function*() {
  let seenClosed: number | undefined
  const round = Effect.gen(function*() {
    const start = previousPeriodStart(yield* nowMillis).getTime()
    if (seenClosed === start) return
    const outcome = yield* closeDue
    if (outcome.status === "closed" || outcome.status === "already-closed") seenClosed = start
    if (outcome.status === "closed") yield* Effect.logInfo("billing period closed", outcome)
  })
  yield* round.pipe(
    Effect.catchAllCause((cause) => Effect.logWarning("billing period close failed; retrying next round", cause)),
    Effect.repeat(Schedule.spaced(CLOSE_INTERVAL)),
    Effect.forkScoped
  )
}))
