/**
 * The delivery fiber (decisions §7). Each round claims due deliveries with FOR UPDATE SKIP LOCKED
 * and a lease, so instances never send one attempt twice and a crashed instance's claims come back
 * when the lease runs out; sends them; records the outcome and the next attempt:
 * after the n-th failed send the next waits WEBHOOK_RETRY_BASE_SECONDS·2^(n-1), and the
 * WEBHOOK_MAX_ATTEMPTS-th failure makes the delivery `failed`.
 *
 * It wakes on the `webhook_deliveries` notification (sent by PostgreSQL when an emitting
 * transaction commits), when one of its sends ends, and every WEBHOOK_POLL_INTERVAL_SECONDS on
 * the Effect Clock. Claims are fair across developers and capped per endpoint (see claimDue).
 */
import { PgClient } from "@effect/sql-pg"
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer, Queue, Schedule, Stream } from "effect"
import { Config } from "../Config.ts"
import { isEmbeddedDatabase } from "../platform/Database.ts"
import { DELIVERY_CHANNEL, onDeliveriesQueued } from "../platform/Events.ts"
import { Metrics } from "../platform/Metrics.ts"
import { PLAN_EACH_TIME } from "../platform/PgPool.ts"
import { nowMillis } from "../platform/Time.ts"
import { slackMessage } from "../anomalies/SlackMessage.ts"
import { envelopeBody, send, signDelivery, USER_AGENT } from "./Delivery.ts"
import type { EndpointKind } from "./History.ts"
import { Webhooks } from "./Service.ts"

/**
 * How long a claim is ours: longer than any attempt can take (the send timeout, which bounds name
 * resolution and the request together, plus a margin for recording the outcome). Every claimed row
 * is sent at once, so no send starts late in its lease.
 */
const LEASE_MARGIN_MS = 5_000
const leaseMs = (timeoutSeconds: number) => timeoutSeconds * 1000 + LEASE_MARGIN_MS
/** the largest claim of one round when tests drive `deliverDue` (the instance's concurrency) */
export const BATCH = 50
/** claims are made one at a time across instances, so the in-flight caps below hold exactly */
const CLAIM_LOCK = 727274002

export interface RoundResult {
  readonly claimed: number
  readonly delivered: number
  readonly failedAttempts: number
}

interface Claimed {
  readonly id: string
  readonly attempts: number
  readonly maxAttempts: number
  readonly url: string
  readonly kind: EndpointKind
  readonly endpointId: string
  readonly developerId: string
  readonly secretCiphertext: string
  readonly previousSecretCiphertext: string | null
  readonly previousSecretExpiresAt: Date | null
  readonly eventId: string
  readonly type: string
  readonly data: unknown
  readonly eventCreatedAt: Date
  readonly leaseUntil: Date
}

/**
 * The claim (parameters: now, lease end, endpoint concurrency, developer concurrency, slots).
 * Bounded work whatever the backlog: the developers with pending rows are found by skipping through
 * an index (one probe each), each live endpoint of theirs offers at most its share of due rows (an
 * index range), and what is in flight is read from the leased rows. Planned on each execution
 * (`PLAN_EACH_TIME`): a generic plan read the whole backlog.
 */
export const CLAIM_DUE_SQL = `WITH RECURSIVE devs(developer_id) AS (
           (SELECT developer_id FROM webhook_deliveries WHERE status = 'pending' ORDER BY developer_id LIMIT 1)
           UNION ALL
           SELECT (SELECT w.developer_id FROM webhook_deliveries w
                   WHERE w.status = 'pending' AND w.developer_id > devs.developer_id ORDER BY w.developer_id LIMIT 1)
           FROM devs WHERE devs.developer_id IS NOT NULL
         ), busy AS (
           SELECT endpoint_id, developer_id FROM webhook_deliveries
           WHERE status = 'pending' AND lease_until IS NOT NULL AND lease_until >= $1
         ), endpoint_busy AS (
           SELECT endpoint_id, count(*)::int AS n FROM busy GROUP BY endpoint_id
         ), developer_busy AS (
           SELECT developer_id, count(*)::int AS n FROM busy GROUP BY developer_id
         ), due AS (
           SELECT c.id, c.developer_id, c.next_attempt_at,
                  row_number() OVER (PARTITION BY c.endpoint_id ORDER BY c.next_attempt_at, c.id) + coalesce(eb.n, 0) AS endpoint_rank
           FROM devs
           JOIN webhook_endpoints e ON e.developer_id = devs.developer_id AND e.deleted_at IS NULL AND e.enabled
           CROSS JOIN LATERAL (
             SELECT d.id, d.developer_id, d.endpoint_id, d.next_attempt_at FROM webhook_deliveries d
             WHERE d.endpoint_id = e.id AND d.status = 'pending' AND d.next_attempt_at <= $1
               AND (d.lease_until IS NULL OR d.lease_until < $1)
             ORDER BY d.next_attempt_at, d.id LIMIT $3
           ) c
           LEFT JOIN endpoint_busy eb ON eb.endpoint_id = c.endpoint_id
         ), ranked AS (
           SELECT due.id, due.next_attempt_at,
                  row_number() OVER (PARTITION BY due.developer_id ORDER BY due.next_attempt_at, due.id) + coalesce(db.n, 0) AS developer_rank
           FROM due LEFT JOIN developer_busy db ON db.developer_id = due.developer_id
           WHERE due.endpoint_rank <= $3
         ), picked AS (
           SELECT id FROM ranked WHERE developer_rank <= $4 ORDER BY developer_rank, next_attempt_at, id LIMIT $5
         ), locked AS (
           SELECT d.id FROM webhook_deliveries d
           WHERE d.id IN (SELECT id FROM picked) AND d.status = 'pending' AND (d.lease_until IS NULL OR d.lease_until < $1)
           FOR UPDATE SKIP LOCKED
         ), claimed AS (
           UPDATE webhook_deliveries d SET lease_until = $2, updated_at = $1
           FROM locked WHERE d.id = locked.id
           RETURNING d.id, d.attempts, d.max_attempts, d.endpoint_id, d.event_id
         )
         SELECT c.id, c.attempts, c.max_attempts, e.url, e.kind, e.id AS endpoint_id, e.developer_id, e.secret_ciphertext,
                e.previous_secret_ciphertext, e.previous_secret_expires_at,
                ev.id AS event_id, ev.type, ev.data, ev.created_at AS event_created_at
         FROM claimed c JOIN webhook_endpoints e ON e.id = c.endpoint_id JOIN events ev ON ev.id = c.event_id`

/**
 * Claims up to `slots` due deliveries, fairly (decisions §19): round-robin across developers (each
 * developer's first due row, then each one's second, ...), counting what each developer and each
 * endpoint already has in flight (a live lease, on any instance); never more than
 * `endpointConcurrency` in flight per endpoint nor `developerConcurrency` per developer. So a dead
 * receiver holds at most its developer's share of the sends, and another developer's delivery is
 * claimed as soon as a slot is free.
 */
export const claimDue = (slots: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const ms = yield* nowMillis
    const now = new Date(ms)
    const leaseUntil = new Date(ms + leaseMs(config.webhooks.timeoutSeconds))
    if (slots <= 0) return [] as Array<Claimed>
    const rows = yield* sql.withTransaction(Effect.zipRight(
      sql`SELECT pg_advisory_xact_lock(${CLAIM_LOCK})`,
      sql.unsafe<Omit<Claimed, "leaseUntil">>(
        PLAN_EACH_TIME + CLAIM_DUE_SQL,
        [now, leaseUntil, config.webhooks.endpointConcurrency, config.webhooks.developerConcurrency, slots] as any
      )
    )).pipe(Effect.orDie)
    return rows.map((r) => ({ ...r, leaseUntil }))
  })

/**
 * What one attempt sends. An endpoint or an anomaly webhook channel: the event envelope signed with
 * the endpoint's secret (and, during a rotation, the previous one). An anomaly Slack channel: Slack's
 * incoming-webhook body to the URL sealed as its secret (Slack checks no signature; the URL is the secret).
 */
const requestOf = (
  d: Claimed,
  secret: string,
  sentAt: number,
  publicBaseUrl: string,
  secretOf: (row: { id: string; developerId: string; secretCiphertext: string }) => string | undefined
): { url: string; body: string; headers: Readonly<Record<string, string>> } => {
  if (d.kind === "anomaly_slack") {
    const body = JSON.stringify(slackMessage(d.data as Record<string, unknown>, publicBaseUrl))
    return { url: secret, body, headers: { "content-type": "application/json", "user-agent": USER_AGENT } }
  }
  const body = envelopeBody(d.eventId, d.type, d.eventCreatedAt, d.data)
  // a rotated-out secret signs too until it expires (issue 17)
  const previous = d.previousSecretCiphertext !== null && d.previousSecretExpiresAt !== null && d.previousSecretExpiresAt.getTime() > sentAt
    ? secretOf({ id: d.endpointId, developerId: d.developerId, secretCiphertext: d.previousSecretCiphertext })
    : undefined
  return { url: d.url, body, headers: signDelivery(secret, d.eventId, body, Math.floor(sentAt / 1000), previous) }
}

/** Sends one claimed delivery and records the outcome and the next attempt. */
const sendClaimed = (d: Claimed) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const webhooks = yield* Webhooks
    const leaseUntil = d.leaseUntil
    const secret = webhooks.secretOf({ id: d.endpointId, developerId: d.developerId, secretCiphertext: d.secretCiphertext })
    const sentAt = yield* nowMillis
    if (sentAt + config.webhooks.timeoutSeconds * 1000 + 1_000 > leaseUntil.getTime()) {
      // too little of the lease is left to finish this send (a slow round): hand the row back
      // unsent rather than risk another instance sending it too once the lease runs out
      yield* sql`UPDATE webhook_deliveries SET lease_until = NULL WHERE id = ${d.id} AND lease_until = ${leaseUntil}`
      return "skipped" as const
    }
    const request = secret === undefined ? undefined : requestOf(d, secret, sentAt, config.publicBaseUrl, webhooks.secretOf)
    const outcome = request === undefined
      ? { ok: false as const, status: null, error: "webhook secret cannot be decrypted" }
      : yield* Effect.promise(() =>
        send(request.url, request.body, request.headers, {
          timeoutMs: config.webhooks.timeoutSeconds * 1000,
          allowPrivateHosts: config.webhooks.allowPrivateHosts
        })
      )
    const at = new Date(yield* nowMillis)
    const attempts = d.attempts + 1
    if (outcome.ok) {
      yield* sql`UPDATE webhook_deliveries SET status = 'delivered', attempts = ${attempts}, last_response_status = ${outcome.status},
                   last_error = NULL, delivered_at = ${at}, lease_until = NULL, updated_at = ${at}
                 WHERE id = ${d.id} AND lease_until = ${leaseUntil} AND status = 'pending'`
      yield* countDelivery("delivered")
      return "delivered" as const
    }
    const final = attempts >= d.maxAttempts
    const next = new Date(at.getTime() + config.webhooks.retryBaseSeconds * 1000 * 2 ** (attempts - 1))
    yield* sql`UPDATE webhook_deliveries SET status = ${final ? "failed" : "pending"}, attempts = ${attempts},
                 last_response_status = ${outcome.status}, last_error = ${outcome.error},
                 next_attempt_at = ${final ? at : next}, lease_until = NULL, updated_at = ${at}
               WHERE id = ${d.id} AND lease_until = ${leaseUntil} AND status = 'pending'`
    yield* countDelivery(final ? "failed" : "retrying")
    // an operator must see a delivery given up on (its receiver's developer will ask)
    if (final) {
      yield* Effect.logWarning("webhook delivery failed for good").pipe(Effect.annotateLogs({
        deliveryId: d.id, endpointId: d.endpointId, developerId: d.developerId, eventId: d.eventId, attempts,
        lastStatus: outcome.status ?? undefined, lastError: outcome.error
      }))
    }
    return "failed" as const
  }).pipe(Effect.orDie)

const countDelivery = (outcome: "delivered" | "retrying" | "failed") =>
  Effect.serviceOption(Metrics).pipe(Effect.map((m) => m._tag === "Some" && m.value.inc("webhook_deliveries_total", { outcome })))

/** One round: claim (fairly), send all claimed at once, record. Tests drive it directly. */
export const deliverDue = Effect.gen(function*() {
  const config = yield* Config
  const claimed = yield* claimDue(Math.min(BATCH, config.webhooks.concurrency))
  const outcomes = yield* Effect.forEach(claimed, sendClaimed, { concurrency: "unbounded" })
  return {
    claimed: claimed.length,
    delivered: outcomes.filter((o) => o === "delivered").length,
    failedAttempts: outcomes.filter((o) => o === "failed").length
  } satisfies RoundResult
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
    const warn = (message: string) => (cause: unknown) =>
      Effect.logWarning(message).pipe(Effect.annotateLogs({ cause: String(cause).slice(0, 500) }))
    const scope = yield* Effect.scope
    // Sends run on their own fibers: a slow receiver holds its own slot, never the loop. A send
    // that ends frees its slot (and maybe its endpoint's or developer's share), so it wakes the loop.
    let inFlight = 0
    yield* Effect.gen(function*() {
      for (;;) {
        const free = config.webhooks.concurrency - inFlight
        const claimed = yield* claimDue(free).pipe(Effect.catchAllCause((cause) => Effect.as(warn("webhook claim failed")(cause), [] as Array<Claimed>)))
        for (const d of claimed) {
          inFlight++
          yield* sendClaimed(d).pipe(
            Effect.catchAllCause(warn("webhook delivery failed")),
            Effect.ensuring(Effect.sync(() => {
              inFlight--
              Queue.unsafeOffer(wake, undefined)
            })),
            Effect.forkIn(scope)
          )
        }
        // every free slot filled: more may be due, go again at once (the sends free slots as they end)
        if (claimed.length > 0 && claimed.length >= free) continue
        yield* Effect.race(Queue.take(wake), Effect.sleep(Duration.seconds(config.webhooks.pollIntervalSeconds)))
      }
    }).pipe(Effect.forkScoped)
  })
)
