/**
 * The export job fiber (decisions §15): a round every COMPLIANCE_JOB_POLL_SECONDS on the Effect
 * Clock, or at once when a job is created on this instance; claims run once across instances
 * (Jobs.ts: each job under its own lease from platform/Leases.ts, renewed while it runs).
 */
import { Duration, Effect, Layer, Queue } from "effect"
import { Config } from "../Config.ts"
import { runDueJobs } from "./Jobs.ts"
import { Compliance } from "./Service.ts"

export const WorkerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* Config
    const svc = yield* Compliance
    const round = runDueJobs().pipe(
      Effect.catchAllCause((cause) =>
        Effect.as(Effect.logWarning("export job round failed").pipe(Effect.annotateLogs({ cause: String(cause).slice(0, 500) })), undefined))
    )
    yield* Effect.gen(function*() {
      for (;;) {
        const result = yield* round
        if (result !== undefined && result.claimed > 0) continue
        yield* Effect.race(Queue.take(svc.wake), Effect.sleep(Duration.seconds(config.compliance.jobPollSeconds)))
      }
    }).pipe(Effect.forkScoped)
  })
)
