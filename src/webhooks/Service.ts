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
import { EVENT_TYPES, type EventType, nudgeDeliveryWorkers } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { openSync, seal, type Sealed, VaultKeys, VaultKeysLive } from "../vault/Crypto.ts"
import { SECRET_PREFIX } from "./Delivery.ts"
import { type DeliveryQuery, deliveryPage, type DeliveryRow, deliveryView, type DeliveryView, retireEndpoint } from "./History.ts"
import { checkReceiverName, checkReceiverUrl } from "../platform/Outbound.ts"
import { expireHeld, holdPending, releaseHeld } from "./Pause.ts"
import { sendTest, type TestResult } from "./TestSend.ts"

const isEventType = (type: string): type is EventType => (EVENT_TYPES as ReadonlyArray<string>).includes(type)

export interface EndpointRow {
  readonly id: string
  readonly developerId: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  readonly secretCiphertext: string
  readonly enabled: boolean
  readonly createdAt: Date
}

const endpointView = (e: EndpointRow) => ({ id: e.id, url: e.url, events: [...e.events], enabled: e.enabled, createdAt: e.createdAt.toISOString() })
const ENDPOINT_COLUMNS = "id, developer_id, url, events, secret_ciphertext, enabled, created_at"

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

export interface EndpointChange {
  readonly url?: string | undefined
  readonly events?: ReadonlyArray<string> | undefined
  readonly enabled?: boolean | undefined
}

export interface WebhooksService {
  readonly create: (developerId: string, input: { url: string; events: ReadonlyArray<string> }) => Effect.Effect<
    ReturnType<typeof endpointView> & { secret: string },
    BadRequest | PlanLimitExceeded
  >
  readonly list: (developerId: string) => Effect.Effect<{ webhooks: Array<ReturnType<typeof endpointView>> }>
  readonly remove: (developerId: string, id: string) => Effect.Effect<void, NotFound>
  /** PATCH: url and events checked as on create; `enabled: false` holds deliveries, `true` releases them */
  readonly update: (developerId: string, id: string, change: EndpointChange) => Effect.Effect<ReturnType<typeof endpointView>, NotFound | BadRequest>
  /** a signed sample event sent now, to an enabled or disabled endpoint (TestSend.ts) */
  readonly test: (developerId: string, id: string, eventType: string | undefined) => Effect.Effect<TestResult, NotFound | BadRequest>
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
    const secretOf: WebhooksService["secretOf"] = (row) => {
      try {
        const opened = openSync(ring, secretContext(row.id, row.developerId), JSON.parse(row.secretCiphertext) as Sealed)
        return typeof opened === "string" ? opened : undefined
      } catch {
        return undefined
      }
    }

    const own = (developerId: string, id: string) =>
      sql<{ id: string }>`SELECT id FROM webhook_endpoints WHERE id = ${id} AND developer_id = ${developerId} AND kind = 'endpoint' AND deleted_at IS NULL`.pipe(
        Effect.orDie,
        Effect.flatMap((rows) => rows.length === 0 ? Effect.fail(notFound()) : Effect.void)
      )

    const sealSecret = (id: string, developerId: string, secret: string) => sealEndpointSecret(ring, id, developerId, secret)
    // the same checks and messages on create and PATCH: the address rules, then (decisions §19, revised)
    // a name that resolves to a loopback or private address is refused up front, as for alert channels
    const checkUrl = (url: string) => {
      const check = checkReceiverUrl(url, config.webhooks.allowPrivateHosts)
      if (!check.ok) return Effect.fail(new BadRequest({ message: check.reason }))
      return Effect.flatMap(Effect.promise(() => checkReceiverName(check.url, config.webhooks.allowPrivateHosts)), (named) =>
        named.ok ? Effect.void : Effect.fail(new BadRequest({ message: named.reason })))
    }
    const checkEvents = (events: ReadonlyArray<string>) => {
      if (events.length === 0) return Effect.fail(new BadRequest({ message: "events must name at least one event type" }))
      const unknown = events.filter((e) => !isEventType(e))
      return unknown.length === 0 ? Effect.void : Effect.fail(new BadRequest({
        message: `Unknown event types: ${unknown.map((e) => JSON.stringify(e.slice(0, 100))).join(", ")}; the event types are ${EVENT_TYPES.join(", ")}`
      }))
    }

    return {
      create: (developerId, input) =>
        Effect.gen(function*() {
          yield* checkUrl(input.url)
          yield* checkEvents(input.events)
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
              RETURNING ${sql.unsafe(ENDPOINT_COLUMNS)}`
            return row!
          })).pipe(Effect.catchTag("SqlError", Effect.die))
          return { ...endpointView(row), secret }
        }),
      list: (developerId) =>
        sql<EndpointRow>`SELECT ${sql.unsafe(ENDPOINT_COLUMNS)} FROM webhook_endpoints
                         WHERE developer_id = ${developerId} AND kind = 'endpoint' AND deleted_at IS NULL ORDER BY created_at DESC, id DESC`.pipe(
          Effect.orDie,
          Effect.map((rows) => ({ webhooks: rows.map(endpointView) }))
        ),
      remove: (developerId, id) =>
        Effect.gen(function*() {
          const ms = yield* nowMillis
          if (!(yield* retireEndpoint(sql, developerId, id, ["endpoint"], new Date(ms)))) return yield* Effect.fail(notFound())
        }),
      update: (developerId, id, change) =>
        Effect.gen(function*() {
          if (change.url === undefined && change.events === undefined && change.enabled === undefined) {
            return yield* Effect.fail(new BadRequest({ message: "Nothing to update: give url, events or enabled" }))
          }
          if (change.url !== undefined) yield* checkUrl(change.url)
          if (change.events !== undefined) yield* checkEvents(change.events)
          const at = new Date(yield* nowMillis)
          const { row, released } = yield* sql.withTransaction(Effect.gen(function*() {
            const [before] = yield* sql<{ enabled: boolean }>`SELECT enabled FROM webhook_endpoints
              WHERE id = ${id} AND developer_id = ${developerId} AND kind = 'endpoint' AND deleted_at IS NULL FOR UPDATE`
            if (before === undefined) return yield* Effect.fail(notFound())
            const events = change.events === undefined ? null : [...new Set(change.events)]
            const [row] = yield* sql<EndpointRow>`UPDATE webhook_endpoints SET url = coalesce(${change.url ?? null}, url),
                events = coalesce(${events as any}::text[], events), enabled = coalesce(${change.enabled ?? null}::boolean, enabled)
              WHERE id = ${id} RETURNING ${sql.unsafe(ENDPOINT_COLUMNS)}`
            let released = 0
            if (before.enabled && !row!.enabled) yield* holdPending(sql, id, at)
            if (!before.enabled && row!.enabled) {
              yield* expireHeld(sql, id, at)
              released = (yield* releaseHeld(sql, id, at)).length
              if (released > 0) yield* sql`SELECT pg_notify('webhook_deliveries', ${developerId})`
            }
            return { row: row!, released }
          })).pipe(Effect.catchTag("SqlError", Effect.die))
          if (released > 0) nudgeDeliveryWorkers()
          return endpointView(row)
        }),
      test: (developerId, id, eventType) =>
        Effect.gen(function*() {
          if (eventType !== undefined) yield* checkEvents([eventType])
          const [row] = yield* sql<EndpointRow & { previousSecretCiphertext: string | null; previousSecretExpiresAt: Date | null }>`
            SELECT ${sql.unsafe(ENDPOINT_COLUMNS)}, previous_secret_ciphertext, previous_secret_expires_at FROM webhook_endpoints
            WHERE id = ${id} AND developer_id = ${developerId} AND kind = 'endpoint' AND deleted_at IS NULL`.pipe(Effect.orDie)
          if (row === undefined) return yield* Effect.fail(notFound())
          const open = (secretCiphertext: string) => secretOf({ id, developerId, secretCiphertext })
          return yield* sendTest({
            url: row.url,
            secret: open(row.secretCiphertext),
            previousSecret: row.previousSecretCiphertext === null ? undefined : open(row.previousSecretCiphertext),
            previousSecretExpiresAt: row.previousSecretExpiresAt
          }, (eventType ?? row.events[0]) as EventType).pipe(Effect.provideService(Config, config))
        }),
      deliveries: (developerId, id, query) =>
        Effect.gen(function*() {
          yield* own(developerId, id)
          // held deliveries past their 7 days are listed as what they are now: failed
          yield* expireHeld(sql, id, new Date(yield* nowMillis)).pipe(Effect.orDie)
          return yield* deliveryPage(sql, id, query)
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
      secretOf
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
