/**
 * Webhook endpoints and their delivery history (decisions §7). The secret (`whsec_` + base64 of 32
 * random bytes, issue 17) is shown once and stored encrypted with the vault's keys (AES-256-GCM,
 * bound to the endpoint). Rotation keeps the replaced secret valid for ROTATION_OVERLAP_MS.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { planOf } from "../billing/Plans.ts"
import { Config } from "../Config.ts"
import { BadRequest, Conflict, NotFound, PlanLimitExceeded } from "../platform/Errors.ts"
import { EVENT_TYPES, nudgeDeliveryWorkers } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { openSync, seal, type Sealed, VaultKeys, VaultKeysLive } from "../vault/Crypto.ts"
import { SECRET_PREFIX } from "./Delivery.ts"
import { type DeliveryQuery, deliveryPage, type DeliveryRow, deliveryView, type DeliveryView, retireEndpoint } from "./History.ts"
import { checkReceiverUrl } from "../platform/Outbound.ts"

export interface EndpointRow {
  readonly id: string
  readonly developerId: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  readonly secretCiphertext: string
  readonly createdAt: Date
}

const endpointView = (e: EndpointRow) => ({ id: e.id, url: e.url, events: [...e.events], createdAt: e.createdAt.toISOString() })

/** the row a webhook secret belongs to: a ciphertext moved to another endpoint does not decrypt */
export const secretContext = (id: string, developerId: string) => ({ id, developerId, principalId: "webhook", service: "webhook-secret" })

export const newSecret = () => `${SECRET_PREFIX}${randomBytes(32).toString("base64")}`

/** the stored form of an endpoint's secret (an anomaly Slack channel's URL too), bound to its row */
export const sealEndpointSecret = (ring: VaultKeys["Type"], id: string, developerId: string, secret: string) =>
  JSON.stringify(seal(ring, secretContext(id, developerId), secret))

/** how long a rotated-out secret still signs deliveries (as Svix does) */
export const ROTATION_OVERLAP_MS = 24 * 3600 * 1000
/** the most deliveries one replay call re-queues; the answer's `nextSince` continues */
export const REPLAY_MAX = 1000

export interface ReplayInput {
  readonly since: string
  readonly until?: string | undefined
  readonly status?: "delivered" | "failed" | undefined
}

export interface WebhooksService {
  readonly create: (developerId: string, input: { url: string; events: ReadonlyArray<string> }) => Effect.Effect<
    ReturnType<typeof endpointView> & { secret: string },
    BadRequest | PlanLimitExceeded
  >
  readonly list: (developerId: string) => Effect.Effect<{ webhooks: Array<ReturnType<typeof endpointView>> }>
  readonly remove: (developerId: string, id: string) => Effect.Effect<void, NotFound>
  readonly deliveries: (developerId: string, id: string, query: DeliveryQuery) => Effect.Effect<
    { deliveries: Array<DeliveryView>; nextCursor: string | null },
    NotFound | BadRequest
  >
  readonly retry: (developerId: string, id: string, deliveryId: string) => Effect.Effect<DeliveryView, NotFound | Conflict>
  readonly rotateSecret: (developerId: string, id: string) => Effect.Effect<{ id: string; secret: string; previousSecretExpiresAt: string }, NotFound>
  readonly replay: (developerId: string, id: string, input: ReplayInput) => Effect.Effect<{ requeued: number; nextSince: string | null }, NotFound | BadRequest>
  /** the decrypted secret of an endpoint (delivery worker) */
  readonly secretOf: (row: { id: string; developerId: string; secretCiphertext: string }) => string | undefined
}

export class Webhooks extends Context.Tag("agent-auth/Webhooks")<Webhooks, WebhooksService>() {}

export const WebhooksServiceLive = Layer.effect(
  Webhooks,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const ring = yield* VaultKeys
    const notFound = () => new NotFound({ message: "Webhook not found" })

    const own = (developerId: string, id: string) =>
      sql<{ id: string }>`SELECT id FROM webhook_endpoints WHERE id = ${id} AND developer_id = ${developerId} AND kind = 'endpoint' AND deleted_at IS NULL`.pipe(
        Effect.orDie,
        Effect.flatMap((rows) => rows.length === 0 ? Effect.fail(notFound()) : Effect.void)
      )

    const sealSecret = (id: string, developerId: string, secret: string) => sealEndpointSecret(ring, id, developerId, secret)

    return {
      create: (developerId, input) =>
        Effect.gen(function*() {
          const check = checkReceiverUrl(input.url, config.webhooks.allowPrivateHosts)
          if (!check.ok) return yield* Effect.fail(new BadRequest({ message: check.reason }))
          if (input.events.length === 0) return yield* Effect.fail(new BadRequest({ message: "events must name at least one event type" }))
          const unknown = input.events.filter((e) => !(EVENT_TYPES as ReadonlyArray<string>).includes(e))
          if (unknown.length > 0) {
            return yield* Effect.fail(new BadRequest({
              message: `Unknown event types: ${unknown.map((e) => JSON.stringify(e.slice(0, 100))).join(", ")}; the event types are ${EVENT_TYPES.join(", ")}`
            }))
          }
          const ms = yield* nowMillis
          const id = newId("wh", ms)
          const secret = newSecret()
          const row = yield* sql.withTransaction(Effect.gen(function*() {
            // the developer's row lock makes concurrent registrations count one after another
            const [developer] = yield* sql<{ plan: string }>`SELECT plan FROM developers WHERE id = ${developerId} FOR UPDATE`
            // decisions §16: the cap is the plan's `webhooks` limit (PLANS_FILE, or WEBHOOK_ENDPOINTS_*)
            const limit = planOf(config.plans, developer?.plan ?? "free").limits.webhooks
            if (limit !== null) {
              const [{ n }] = (yield* sql<{ n: number }>`
                SELECT count(*)::int AS n FROM webhook_endpoints WHERE developer_id = ${developerId} AND kind = 'endpoint' AND deleted_at IS NULL`) as unknown as [{ n: number }]
              if (n >= limit) {
                return yield* Effect.fail(new PlanLimitExceeded({ message: `The ${developer?.plan ?? "free"} plan allows ${limit} webhook endpoints` }))
              }
            }
            const [row] = yield* sql<EndpointRow>`
              INSERT INTO webhook_endpoints (id, developer_id, url, events, secret_ciphertext, created_at)
              VALUES (${id}, ${developerId}, ${input.url}, ${[...new Set(input.events)] as any}, ${sealSecret(id, developerId, secret)}, ${new Date(ms)})
              RETURNING id, developer_id, url, events, secret_ciphertext, created_at`
            return row!
          })).pipe(Effect.catchTag("SqlError", Effect.die))
          return { ...endpointView(row), secret }
        }),
      list: (developerId) =>
        sql<EndpointRow>`SELECT id, developer_id, url, events, secret_ciphertext, created_at FROM webhook_endpoints
                         WHERE developer_id = ${developerId} AND kind = 'endpoint' AND deleted_at IS NULL ORDER BY created_at DESC, id DESC`.pipe(
          Effect.orDie,
          Effect.map((rows) => ({ webhooks: rows.map(endpointView) }))
        ),
      remove: (developerId, id) =>
        Effect.gen(function*() {
          const ms = yield* nowMillis
          if (!(yield* retireEndpoint(sql, developerId, id, ["endpoint"], new Date(ms)))) return yield* Effect.fail(notFound())
        }),
      deliveries: (developerId, id, query) => Effect.zipRight(own(developerId, id), deliveryPage(sql, id, query)),
      retry: (developerId, id, deliveryId) =>
        Effect.gen(function*() {
          yield* own(developerId, id)
          const ms = yield* nowMillis
          const [current] = yield* sql<{ status: string }>`SELECT status FROM webhook_deliveries WHERE id = ${deliveryId} AND endpoint_id = ${id}`.pipe(Effect.orDie)
          if (current === undefined) return yield* Effect.fail(new NotFound({ message: "Delivery not found" }))
          if (current.status !== "failed") return yield* Effect.fail(new Conflict({ message: `Only a failed delivery can be retried; this one is ${current.status}` }))
          // a retried delivery gets a fresh set of attempts
          const [row] = yield* sql<DeliveryRow>`
            UPDATE webhook_deliveries d SET status = 'pending', attempts = 0, next_attempt_at = ${new Date(ms)}, lease_until = NULL,
              updated_at = ${new Date(ms)}
            FROM events ev WHERE d.id = ${deliveryId} AND ev.id = d.event_id AND d.status = 'failed'
            RETURNING d.id, d.event_id, ev.type AS event_type, d.status, d.attempts, d.max_attempts, d.last_error,
                      d.last_response_status, d.next_attempt_at, d.created_at, d.delivered_at`.pipe(Effect.orDie)
          if (row === undefined) return yield* Effect.fail(new Conflict({ message: "Delivery is no longer failed" }))
          yield* sql`SELECT pg_notify('webhook_deliveries', ${developerId})`.pipe(Effect.orDie)
          return deliveryView(row)
        }),
      rotateSecret: (developerId, id) =>
        Effect.gen(function*() {
          const secret = newSecret()
          const ms = yield* nowMillis
          const expiresAt = new Date(ms + ROTATION_OVERLAP_MS)
          // the replaced secret keeps signing for a day, so receivers can switch without a gap
          const rows = yield* sql`UPDATE webhook_endpoints SET secret_ciphertext = ${sealSecret(id, developerId, secret)},
                                    previous_secret_ciphertext = secret_ciphertext, previous_secret_expires_at = ${expiresAt}
                                  WHERE id = ${id} AND developer_id = ${developerId} AND kind = 'endpoint' AND deleted_at IS NULL RETURNING id`.pipe(Effect.orDie)
          if (rows.length === 0) return yield* Effect.fail(notFound())
          return { id, secret, previousSecretExpiresAt: expiresAt.toISOString() }
        }),
      replay: (developerId, id, input) =>
        Effect.gen(function*() {
          const since = parseInstant(input.since)
          if (since === undefined) return yield* Effect.fail(new BadRequest({ message: "since must be an ISO 8601 date-time, e.g. 2026-11-24T00:00:00Z" }))
          const until = input.until === undefined ? undefined : parseInstant(input.until)
          if (until === undefined && input.until !== undefined) {
            return yield* Effect.fail(new BadRequest({ message: "until must be an ISO 8601 date-time, e.g. 2026-11-24T01:00:00Z" }))
          }
          if (until !== undefined && until <= since) return yield* Effect.fail(new BadRequest({ message: "until must be later than since" }))
          yield* own(developerId, id)
          const ms = yield* nowMillis
          const at = new Date(ms)
          const statuses = input.status === undefined ? ["failed"] : [input.status]
          // Oldest first, at most REPLAY_MAX; pending rows are not touched, so a repeated call
          // re-queues nothing twice while the first call's rows wait to be sent.
          const answer = yield* sql.withTransaction(Effect.gen(function*() {
            const picked = yield* sql<{ id: string; createdAt: Date }>`
              SELECT id, created_at FROM webhook_deliveries
              WHERE endpoint_id = ${id} AND developer_id = ${developerId} AND status IN ${sql.in(statuses)}
                AND created_at >= ${since} AND created_at < ${until ?? new Date(ms + 1)}
              ORDER BY created_at, id LIMIT ${REPLAY_MAX + 1} FOR UPDATE`
            const batch = picked.slice(0, REPLAY_MAX)
            if (batch.length > 0) {
              yield* sql`UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = ${at}, lease_until = NULL,
                           delivered_at = NULL, updated_at = ${at}
                         WHERE id IN ${sql.in(batch.map((r) => r.id))}`
              yield* sql`SELECT pg_notify('webhook_deliveries', ${developerId})`
            }
            const next = picked[REPLAY_MAX]
            return { requeued: batch.length, nextSince: next === undefined ? null : next.createdAt.toISOString() }
          })).pipe(Effect.orDie)
          if (answer.requeued > 0) nudgeDeliveryWorkers()
          return answer
        }),
      secretOf: (row) => {
        try {
          const opened = openSync(ring, secretContext(row.id, row.developerId), JSON.parse(row.secretCiphertext) as Sealed)
          return typeof opened === "string" ? opened : undefined
        } catch {
          return undefined
        }
      }
    }
  })
)

/** an ISO 8601 date-time with a zone (Z or ±hh:mm); undefined otherwise */
const parseInstant = (text: string): Date | undefined => {
  const match = /^(\d{4}-\d{2}-\d{2})(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/.exec(text)
  if (match === null) return undefined
  const date = new Date(text)
  if (Number.isNaN(date.getTime())) return undefined
  // a day that does not exist (2026-02-31) is refused rather than rolled over
  const day = new Date(`${match[1]}T00:00:00Z`)
  return Number.isNaN(day.getTime()) || day.toISOString().slice(0, 10) !== match[1] ? undefined : date
}

export const WebhooksLive = WebhooksServiceLive.pipe(Layer.provide(VaultKeysLive))
