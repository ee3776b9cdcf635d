/**
 * The delivery fiber (decisions §7). Each round claims due deliveries with FOR UPDATE SKIP LOCKED
 * and a lease, so instances never send one attempt twice and a crashed instance's claims come back
 * when the lease runs out; sends them; records the outcome and the next attempt:
 * after the n-th failed send the next waits WEBHOOK_RETRY_BASE_SECONDS·2^(n-1), and the
 * WEBHOOK_MAX_ATTEMPTS-th failure makes the delivery `failed`.
 *
 * It wakes on the `webhook_deliveries` notification (sent by PostgreSQL when an emitting
 * transaction commits) and polls every WEBHOOK_POLL_INTERVAL_SECONDS on the Effect Clock.
 */
import { PgClient } from "@effect/sql-pg"
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer, Queue, Schedule, Stream } from "effect"
import { Config } from "../Config.ts"
import { isEmbeddedDatabase } from "../platform/Database.ts"
import { DELIVERY_CHANNEL, onDeliveriesQueued } from "../platform/Events.ts"
import { nowMillis } from "../platform/Time.ts"
import { send, signDelivery } from "./Delivery.ts"
import { Webhooks } from "./Service.ts"

/**
 * How long a claim is ours: longer than any attempt can take (the send timeout, which bounds name
 * resolution and the request together, plus a margin for recording the outcome). Every claimed row
 * is sent at once (BATCH is the bound on concurrent sends), so no send starts late in its lease.
 */
const LEASE_MARGIN_MS = 5_000
const leaseMs = (timeoutSeconds: number) => timeoutSeconds * 1000 + LEASE_MARGIN_MS
export const BATCH = 50

export interface RoundResult {
  readonly claimed: number
  readonly delivered: number
  readonly failedAttempts: number
}

/** One round of the worker: claim, send, record. Tests drive it directly. */
export const deliverDue = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const config = yield* Config
  const webhooks = yield* Webhooks
  const ms = yield* nowMillis
  const now = new Date(ms)
  const leaseUntil = new Date(ms + leaseMs(config.webhooks.timeoutSeconds))
  const claimed = yield* sql<{
    id: string
    attempts: number
    maxAttempts: number
    url: string
    endpointId: string
    developerId: string
    secretCiphertext: string
    eventId: string
    type: string
    data: unknown
    eventCreatedAt: Date
  }>`
    WITH due AS (
      SELECT id FROM webhook_deliveries
      WHERE status = 'pending' AND next_attempt_at <= ${now} AND (lease_until IS NULL OR lease_until < ${now})
      ORDER BY next_attempt_at LIMIT ${BATCH} FOR UPDATE SKIP LOCKED
    ), claimed AS (
      UPDATE webhook_deliveries d SET lease_until = ${leaseUntil}, updated_at = ${now}
      FROM due WHERE d.id = due.id
      RETURNING d.id, d.attempts, d.max_attempts, d.endpoint_id, d.event_id
    )
    SELECT c.id, c.attempts, c.max_attempts, e.url, e.id AS endpoint_id, e.developer_id, e.secret_ciphertext,
           ev.id AS event_id, ev.type, ev.data, ev.created_at AS event_created_at
    FROM claimed c JOIN webhook_endpoints e ON e.id = c.endpoint_id JOIN events ev ON ev.id = c.event_id`.pipe(Effect.orDie)
  let delivered = 0
  let failedAttempts = 0
  yield* Effect.forEach(claimed, (d) =>
    Effect.gen(function*() {
      const body = JSON.stringify({ id: d.eventId, type: d.type, createdAt: d.eventCreatedAt.toISOString(), data: d.data })
      const secret = webhooks.secretOf({ id: d.endpointId, developerId: d.developerId, secretCiphertext: d.secretCiphertext })
      const sentAt = yield* nowMillis
      if (sentAt + config.webhooks.timeoutSeconds * 1000 + 1_000 > leaseUntil.getTime()) {
        // too little of the lease is left to finish this send (a slow round): hand the row back
        // unsent rather than risk another instance sending it too once the lease runs out
        yield* sql`UPDATE webhook_deliveries SET lease_until = NULL WHERE id = ${d.id} AND lease_until = ${leaseUntil}`
        return
      }
      const outcome = secret === undefined
        ? { ok: false as const, status: null, error: "webhook secret cannot be decrypted" }
        : yield* Effect.promise(() =>
          send(d.url, body, signDelivery(secret, d.eventId, body, Math.floor(sentAt / 1000)), {
            timeoutMs: config.webhooks.timeoutSeconds * 1000,
            allowPrivateHosts: config.webhooks.allowPrivateHosts
          })
        )
      const at = new Date(yield* nowMillis)
      const attempts = d.attempts + 1
      if (outcome.ok) {
        delivered++
        yield* sql`UPDATE webhook_deliveries SET status = 'delivered', attempts = ${attempts}, last_response_status = ${outcome.status},
                     last_error = NULL, delivered_at = ${at}, lease_until = NULL, updated_at = ${at}
                   WHERE id = ${d.id} AND lease_until = ${leaseUntil} AND status = 'pending'`
      } else {
        failedAttempts++
        const final = attempts >= d.maxAttempts
        const next = new Date(at.getTime() + config.webhooks.retryBaseSeconds * 1000 * 2 ** (attempts - 1))
        yield* sql`UPDATE webhook_deliveries SET status = ${final ? "failed" : "pending"}, attempts = ${attempts},
                     last_response_status = ${outcome.status}, last_error = ${outcome.error},
                     next_attempt_at = ${final ? at : next}, lease_until = NULL, updated_at = ${at}
                   WHERE id = ${d.id} AND lease_until = ${leaseUntil} AND status = 'pending'`
      }
    }).pipe(Effect.orDie), { concurrency: BATCH, discard: true })
  return { claimed: claimed.length, delivered, failedAttempts } satisfies RoundResult
})

export const WorkerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* Config
    const wake = yield* Queue.sliding<void>(1)
    const unsubscribe = onDeliveriesQueued(() => Queue.unsafeOffer(wake, undefined))
    yield* Effect.addFinalizer(() => Effect.sync(unsubscribe))
    // Wake on commit of an emitting transaction, on any instance (PostgreSQL LISTEN/NOTIFY).
    // (Not in embedded mode: PGlite serves one connection, which LISTEN would hold for good.)
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    if (pg._tag === "Some" && !isEmbeddedDatabase(config.databaseUrl)) {
      yield* pg.value.listen(DELIVERY_CHANNEL).pipe(
        Stream.runForEach(() => Queue.offer(wake, undefined)),
        Effect.retry({ schedule: Schedule.spaced("5 seconds") }),
        Effect.catchAllCause(() => Effect.void),
        Effect.forkScoped
      )
    }
    const round = deliverDue.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("webhook delivery round failed").pipe(Effect.annotateLogs({ cause: String(cause).slice(0, 500) })))
    )
    yield* Effect.gen(function*() {
      for (;;) {
        const result = yield* round
        // a full batch means more may be due: go again at once
        if (typeof result === "object" && result !== null && (result as RoundResult).claimed >= BATCH) continue
        yield* Effect.race(Queue.take(wake), Effect.sleep(Duration.seconds(config.webhooks.pollIntervalSeconds)))
      }
    }).pipe(Effect.forkScoped)
  })
)


