/**
 * One lease mechanism for scheduled work (anomaly passes, export jobs, the billing close; decisions
 * §14, §15, §16). A lease is a row of `leases` (sql/0033) per (kind, key):
 *
 * - claim: one INSERT ... ON CONFLICT DO UPDATE that succeeds only when the lease is free or has
 *   run out, with a fresh holder token, counting one more attempt; so across instances one holder
 *   at a time, and a holder that died is replaced once its lease runs out;
 * - renew: while the work runs, every third of the lease on the Effect Clock, only by its holder;
 *   a renewal that finds another holder interrupts the work (the lease was lost);
 * - guard: inside the work's own transaction, locks the row and fails unless the caller still holds
 *   it, so a final write commits only under a lease that is still its own;
 * - release: success frees the lease; a failure records its error and frees it for a retry, unless
 *   the attempts cap is reached: then the lease is `failed` and never claimed again.
 *
 * Never run `withLease` inside a transaction: the renewals must commit on their own.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Data, Duration, Effect, Exit } from "effect"
import { randomUUID } from "node:crypto"
import { nowMillis } from "./Time.ts"

export interface LeaseOptions {
  readonly leaseMs: number
  /** claims after which a failing (or never finishing) job is given up; none: retried forever */
  readonly maxAttempts?: number
  /** recurring work (a pass, a close) starts counting attempts again after a success */
  readonly recurring?: boolean
}

export interface Claim {
  readonly kind: string
  readonly key: string
  readonly holder: string
  /** this claim's attempt number, 1 for the first */
  readonly attempts: number
}

export type ClaimOutcome =
  | { readonly _tag: "Claimed"; readonly claim: Claim }
  | { readonly _tag: "Busy" }
  | { readonly _tag: "Exhausted"; readonly attempts: number; readonly lastError: string | null }

export type LeaseOutcome<A> =
  | { readonly _tag: "Done"; readonly value: A; readonly attempts: number }
  | { readonly _tag: "Busy" }
  /** the work failed; the lease is free for another attempt */
  | { readonly _tag: "Failed"; readonly error: string; readonly attempts: number }
  /** the attempts cap is reached: by this attempt's failure (ran) or by earlier ones (not run now) */
  | { readonly _tag: "Exhausted"; readonly error: string; readonly attempts: number; readonly ran: boolean }
  /** another holder took the lease (ours had run out): the work was interrupted, the result is theirs */
  | { readonly _tag: "Lost" }

export class LeaseLost extends Data.TaggedError("LeaseLost")<{ readonly kind: string; readonly key: string }> {}

/** what an attempt that did not finish leaves as its error */
export const UNFINISHED_ERROR = "the attempt did not finish before its lease ran out"

export const claimLease = (kind: string, key: string, options: LeaseOptions) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ms = yield* nowMillis
    const now = new Date(ms)
    const holder = randomUUID()
    const cap = options.maxAttempts ?? null
    const claimed = yield* sql<{ attempts: number }>`
      INSERT INTO leases (kind, key, holder, lease_until, attempts, state, updated_at)
      VALUES (${kind}, ${key}, ${holder}, ${new Date(ms + options.leaseMs)}, 1, 'open', ${now})
      ON CONFLICT (kind, key) DO UPDATE SET holder = EXCLUDED.holder, lease_until = EXCLUDED.lease_until,
        attempts = leases.attempts + 1, updated_at = EXCLUDED.updated_at,
        last_error = CASE WHEN leases.holder IS NOT NULL THEN ${UNFINISHED_ERROR} ELSE leases.last_error END
      WHERE leases.state = 'open' AND (leases.lease_until IS NULL OR leases.lease_until < ${now})
        AND (${cap}::int IS NULL OR leases.attempts < ${cap}::int)
      RETURNING attempts`
    if (claimed.length === 1) return { _tag: "Claimed", claim: { kind, key, holder, attempts: claimed[0]!.attempts } } as ClaimOutcome
    if (cap === null) return { _tag: "Busy" } as ClaimOutcome
    // free (or run out) but at its cap: given up, and said so to every later claimer too
    const exhausted = yield* sql<{ attempts: number; lastError: string | null }>`
      UPDATE leases SET state = 'failed', holder = NULL, lease_until = NULL, updated_at = ${now},
        last_error = CASE WHEN holder IS NOT NULL THEN ${UNFINISHED_ERROR} ELSE last_error END
      WHERE kind = ${kind} AND key = ${key} AND attempts >= ${cap}::int AND (lease_until IS NULL OR lease_until < ${now})
      RETURNING attempts, last_error`
    if (exhausted.length === 0) return { _tag: "Busy" } as ClaimOutcome
    return { _tag: "Exhausted", attempts: exhausted[0]!.attempts, lastError: exhausted[0]!.lastError } as ClaimOutcome
  })

/** extends the lease if the claim still holds it; false when another holder has it */
export const renewLease = (claim: Claim, leaseMs: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ms = yield* nowMillis
    const rows = yield* sql`
      UPDATE leases SET lease_until = ${new Date(ms + leaseMs)}, updated_at = ${new Date(ms)}
      WHERE kind = ${claim.kind} AND key = ${claim.key} AND holder = ${claim.holder} AND state = 'open' RETURNING 1`
    return rows.length === 1
  })

/** in the caller's transaction: locks the lease until commit, or fails with LeaseLost */
export const guardLease = (claim: Claim) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql`
      SELECT 1 FROM leases WHERE kind = ${claim.kind} AND key = ${claim.key} AND holder = ${claim.holder} FOR UPDATE`
    if (rows.length === 0) return yield* Effect.fail(new LeaseLost({ kind: claim.kind, key: claim.key }))
  })

const releaseDone = (claim: Claim, recurring: boolean) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = new Date(yield* nowMillis)
    yield* sql`
      UPDATE leases SET holder = NULL, lease_until = NULL, last_error = NULL, updated_at = ${now},
        attempts = CASE WHEN ${recurring} THEN 0 ELSE attempts END
      WHERE kind = ${claim.kind} AND key = ${claim.key} AND holder = ${claim.holder}`
  })

/** frees the lease with the attempt's error; true when the cap is reached (the lease is failed) */
const releaseFailed = (claim: Claim, error: string, maxAttempts: number | undefined) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = new Date(yield* nowMillis)
    const cap = maxAttempts ?? null
    const rows = yield* sql<{ state: string }>`
      UPDATE leases SET holder = NULL, lease_until = NULL, last_error = ${error}, updated_at = ${now},
        state = CASE WHEN ${cap}::int IS NOT NULL AND attempts >= ${cap}::int THEN 'failed' ELSE 'open' END
      WHERE kind = ${claim.kind} AND key = ${claim.key} AND holder = ${claim.holder}
      RETURNING state`
    return rows[0]?.state === "failed"
  })

/** the first line of a failure, for the lease row and logs (never for an API answer) */
const describe = (cause: Cause.Cause<unknown>) => Cause.pretty(cause).split("\n")[0]!.slice(0, 500)

/**
 * Claims (kind, key), runs `work` while renewing the lease, and releases it with the outcome. The
 * work is interrupted if the lease is lost; a failure or defect of the work is an outcome, not an
 * error of this effect (only the lease's own SQL fails it).
 */
export const withLease = <A, E, R>(kind: string, key: string, options: LeaseOptions, work: (claim: Claim) => Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const outcome = yield* claimLease(kind, key, options)
    if (outcome._tag === "Busy") return outcome as LeaseOutcome<A>
    if (outcome._tag === "Exhausted") {
      return { _tag: "Exhausted", error: outcome.lastError ?? UNFINISHED_ERROR, attempts: outcome.attempts, ran: false } as LeaseOutcome<A>
    }
    const claim = outcome.claim
    const every = Duration.millis(Math.max(1, Math.floor(options.leaseMs / 3)))
    // a renewal the database could not answer is tried again at the next beat; only another holder ends the work
    const heartbeat: Effect.Effect<never, LeaseLost, SqlClient.SqlClient> = Effect.sleep(every).pipe(
      Effect.zipRight(renewLease(claim, options.leaseMs).pipe(Effect.catchAll(() => Effect.succeed(true)))),
      Effect.flatMap((held) => held ? Effect.void : Effect.fail(new LeaseLost({ kind, key }))),
      Effect.forever
    )
    const exit = yield* Effect.exit(Effect.raceFirst(work(claim), heartbeat))
    if (Exit.isSuccess(exit)) {
      yield* releaseDone(claim, options.recurring ?? false)
      return { _tag: "Done", value: exit.value, attempts: claim.attempts } as LeaseOutcome<A>
    }
    const failure = Cause.failureOption(exit.cause)
    const defect = Cause.dieOption(exit.cause)
    if ((failure._tag === "Some" && failure.value instanceof LeaseLost) || (defect._tag === "Some" && defect.value instanceof LeaseLost)) {
      return { _tag: "Lost" } as LeaseOutcome<A>
    }
    const error = describe(exit.cause)
    const exhausted = yield* releaseFailed(claim, error, options.maxAttempts)
    return (exhausted
      ? { _tag: "Exhausted", error, attempts: claim.attempts, ran: true }
      : { _tag: "Failed", error, attempts: claim.attempts }) as LeaseOutcome<A>
  })

/** SQL: true when (kind, key) is held by a live lease at $now; for filtering candidates before claiming */
export const heldSql = (kindParam: string, keyColumn: string, nowParam: string) =>
  `EXISTS (SELECT 1 FROM leases l WHERE l.kind = ${kindParam} AND l.key = ${keyColumn} AND l.lease_until >= ${nowParam})`
