/**
 * Webhook endpoints and their delivery history (decisions §7). The secret (32 random bytes, hex)
 * is shown once and stored encrypted with the vault's keys (AES-256-GCM, bound to the endpoint).
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { planOf } from "../billing/Plans.ts"
import { Config } from "../Config.ts"
import { BadRequest, Conflict, NotFound, PlanLimitExceeded } from "../platform/Errors.ts"
import { EVENT_TYPES } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { decodeCursor, encodeCursor } from "../platform/Pagination.ts"
import { nowMillis } from "../platform/Time.ts"
import { openSync, seal, type Sealed, VaultKeys, VaultKeysLive } from "../vault/Crypto.ts"
import { checkReceiverUrl } from "./Ssrf.ts"

export interface EndpointRow {
  readonly id: string
  readonly developerId: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  readonly secretCiphertext: string
  readonly createdAt: Date
}

const endpointView = (e: EndpointRow) => ({ id: e.id, url: e.url, events: [...e.events], createdAt: e.createdAt.toISOString() })

export interface DeliveryRow {
  readonly id: string
  readonly eventId: string
  readonly eventType: string
  readonly status: "pending" | "delivered" | "failed"
  readonly attempts: number
  readonly maxAttempts: number
  readonly lastError: string | null
  readonly lastResponseStatus: number | null
  readonly nextAttemptAt: Date
  readonly createdAt: Date
  readonly deliveredAt: Date | null
}

const deliveryView = (d: DeliveryRow) => ({
  id: d.id,
  eventId: d.eventId,
  eventType: d.eventType,
  status: d.status,
  attempts: d.attempts,
  maxAttempts: d.maxAttempts,
  lastError: d.lastError,
  lastResponseStatus: d.lastResponseStatus,
  nextAttemptAt: d.status === "pending" ? d.nextAttemptAt.toISOString() : null,
  createdAt: d.createdAt.toISOString(),
  deliveredAt: d.deliveredAt?.toISOString() ?? null
})

/** the row a webhook secret belongs to: a ciphertext moved to another endpoint does not decrypt */
export const secretContext = (id: string, developerId: string) => ({ id, developerId, principalId: "webhook", service: "webhook-secret" })

const newSecret = () => randomBytes(32).toString("hex")

export interface WebhooksService {
  readonly create: (developerId: string, input: { url: string; events: ReadonlyArray<string> }) => Effect.Effect<
    ReturnType<typeof endpointView> & { secret: string },
    BadRequest | PlanLimitExceeded
  >
  readonly list: (developerId: string) => Effect.Effect<{ webhooks: Array<ReturnType<typeof endpointView>> }>
  readonly remove: (developerId: string, id: string) => Effect.Effect<void, NotFound>
  readonly deliveries: (developerId: string, id: string, query: { status?: string; cursor?: string; limit: number }) => Effect.Effect<
    { deliveries: Array<ReturnType<typeof deliveryView>>; nextCursor: string | null },
    NotFound | BadRequest
  >
  readonly retry: (developerId: string, id: string, deliveryId: string) => Effect.Effect<ReturnType<typeof deliveryView>, NotFound | Conflict>
  readonly rotateSecret: (developerId: string, id: string) => Effect.Effect<{ id: string; secret: string }, NotFound>
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
      sql<{ id: string }>`SELECT id FROM webhook_endpoints WHERE id = ${id} AND developer_id = ${developerId} AND deleted_at IS NULL`.pipe(
        Effect.orDie,
        Effect.flatMap((rows) => rows.length === 0 ? Effect.fail(notFound()) : Effect.void)
      )

    const sealSecret = (id: string, developerId: string, secret: string) => JSON.stringify(seal(ring, secretContext(id, developerId), secret))

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
                SELECT count(*)::int AS n FROM webhook_endpoints WHERE developer_id = ${developerId} AND deleted_at IS NULL`) as unknown as [{ n: number }]
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
                         WHERE developer_id = ${developerId} AND deleted_at IS NULL ORDER BY created_at DESC, id DESC`.pipe(
          Effect.orDie,
          Effect.map((rows) => ({ webhooks: rows.map(endpointView) }))
        ),
      remove: (developerId, id) =>
        sql.withTransaction(Effect.gen(function*() {
          const ms = yield* nowMillis
          const rows = yield* sql`UPDATE webhook_endpoints SET deleted_at = ${new Date(ms)}
                                  WHERE id = ${id} AND developer_id = ${developerId} AND deleted_at IS NULL RETURNING id`
          if (rows.length === 0) return yield* Effect.fail(notFound())
          // nothing more is sent to a deleted endpoint
          yield* sql`UPDATE webhook_deliveries SET status = 'failed', last_error = 'endpoint deleted', updated_at = ${new Date(ms)}
                     WHERE endpoint_id = ${id} AND status = 'pending'`
        })).pipe(Effect.catchTag("SqlError", Effect.die)),
      deliveries: (developerId, id, query) =>
        Effect.gen(function*() {
          yield* own(developerId, id)
          const cursor = decodeCursor(query.cursor)
          if (cursor === null) return yield* Effect.fail(new BadRequest({ message: "cursor is not valid" }))
          const params: Array<unknown> = [id]
          const conditions = ["d.endpoint_id = $1"]
          if (query.status !== undefined) {
            params.push(query.status)
            conditions.push(`d.status = $${params.length}`)
          }
          if (cursor) {
            params.push(new Date(cursor.createdAt), cursor.id)
            conditions.push(`(d.created_at, d.id) < ($${params.length - 1}, $${params.length})`)
          }
          params.push(query.limit + 1)
          const rows = yield* sql.unsafe<DeliveryRow>(
            `SELECT d.id, d.event_id, ev.type AS event_type, d.status, d.attempts, d.max_attempts, d.last_error,
                    d.last_response_status, d.next_attempt_at, d.created_at, d.delivered_at
             FROM webhook_deliveries d JOIN events ev ON ev.id = d.event_id
             WHERE ${conditions.join(" AND ")} ORDER BY d.created_at DESC, d.id DESC LIMIT $${params.length}`,
            params as any
          ).pipe(Effect.orDie)
          const page = rows.slice(0, query.limit)
          return {
            deliveries: page.map(deliveryView),
            nextCursor: rows.length > query.limit ? encodeCursor(page[page.length - 1]!) : null
          }
        }),
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
          const rows = yield* sql`UPDATE webhook_endpoints SET secret_ciphertext = ${sealSecret(id, developerId, secret)}
                                  WHERE id = ${id} AND developer_id = ${developerId} AND deleted_at IS NULL RETURNING id`.pipe(Effect.orDie)
          if (rows.length === 0) return yield* Effect.fail(notFound())
          return { id, secret }
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

export const WebhooksLive = WebhooksServiceLive.pipe(Layer.provide(VaultKeysLive))
