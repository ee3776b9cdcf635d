/**
 * Events (decisions §7): the outbox. `emit` writes the event and one delivery row per subscribed
 * webhook endpoint in the caller's transaction, so a change and its event commit together or not
 * at all. `pg_notify` wakes delivery workers on every instance at commit (notifications are sent
 * only when the transaction commits); the poll catches anything a notification missed.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Config } from "../Config.ts"
import { inTransaction } from "./AuditChain.ts"
import { newId } from "./Ids.ts"
import { nowMillis } from "./Time.ts"

export const EVENT_TYPES = [
  "grant.created",
  "grant.revoked",
  "token.issued",
  "dpdp.breach.recorded",
  "dpdp.breach.updated",
  "dpdp.breach.principal_intimation_due",
  "dpdp.breach.board_report_due",
  // decisions §21
  "dpdp.consent_notice.registered",
  "dpdp.consent_notice.retired",
  "dpdp.consent.created",
  "dpdp.consent.withdrawn",
  "dpdp.grievance.filed",
  "dpdp.grievance.updated",
  "dpdp.grievance.due",
  "dpdp.nomination.updated",
  "dpdp.erasure.scheduled",
  "dpdp.erasure.due",
  "dpdp.erasure.completed",
  "dpdp.erasure.hold_purged",
  "consent_bundle.created",
  "consent_bundle.revoked",
  "vault.credential.exchanged",
  "budget.threshold",
  "budget.exhausted",
  "scim.user.provisioned",
  "scim.user.updated",
  "scim.user.deprovisioned",
  "scim.group.updated",
  // decisions §18
  "vc.issued",
  "vc.revoked",
  "sd-jwt.issued",
  "sd-jwt.presented",
  // principal sessions and passkey management (decisions §12, §17)
  "principal.grant_revoked",
  "fido.registered",
  "fido.assertion",
  "fido.credential.deleted",
  // decisions §13
  "policy.denied",
  // decisions §12 (SSO)
  "sso.login",
  "sso.connection.created",
  "sso.connection.updated",
  "sso.connection.deleted",
  // decisions §16
  "billing.quota.threshold",
  "billing.invoice.created",
  "billing.subscription.updated",
  // decisions §14
  "anomaly.detected",
  "anomaly.auto_revoked",
  // decisions §22 (OAuth)
  "resource_server.created",
  "resource_server.updated",
  "resource_server.deleted",
  "oauth.client.registered"
] as const

/** the event every anomaly alert emits; also delivered to the developer's anomaly channels */
const ANOMALY_DETECTED: EventType = "anomaly.detected"

export type EventType = typeof EVENT_TYPES[number]

export const DELIVERY_CHANNEL = "webhook_deliveries"

/**
 * In-process nudge for the delivery fiber, for where LISTEN/NOTIFY is not available (embedded
 * PGlite). It fires a moment after an emit that created deliveries, by when the emitting
 * transaction has normally committed; the poll catches any it misses.
 */
const deliveryListeners = new Set<() => void>()
export const onDeliveriesQueued = (listener: () => void): (() => void) => {
  deliveryListeners.add(listener)
  return () => deliveryListeners.delete(listener)
}
export const nudgeDeliveryWorkers = () => {
  for (const listener of deliveryListeners) setTimeout(listener, 100)
}

/**
 * In-process nudge for event streams (decisions §23): told the developers of an emit a moment later,
 * by when its transaction has normally committed; streams on other instances poll the outbox.
 */
const emitListeners = new Set<(developerIds: ReadonlySet<string>) => void>()
export const onEventsEmitted = (listener: (developerIds: ReadonlySet<string>) => void): (() => void) => {
  emitListeners.add(listener)
  return () => emitListeners.delete(listener)
}
const nudgeEventStreams = (developerIds: ReadonlyArray<string>) => {
  if (emitListeners.size === 0) return
  const ids = new Set(developerIds)
  for (const listener of emitListeners) setTimeout(() => listener(ids), 50)
}

/**
 * The delivery rows of freshly inserted events (a CTE named `event` with id, developer_id, type,
 * data): one per live webhook endpoint subscribed to the type (`held` while the endpoint is disabled,
 * decisions §7), and for `anomaly.detected` one per
 * anomaly channel the SQL function `anomaly_alert_channels` names (sql/0027: a channel is an
 * endpoint row of another kind; the function applies severities and a custom rule's alertChannels).
 * The type test comes first, so other events never call the function. `$maxAttempts` and `$at` are
 * parameter references.
 */
export const insertDeliveriesSql = (maxAttempts: string, at: string) =>
  `INSERT INTO webhook_deliveries (id, endpoint_id, event_id, developer_id, status, attempts, max_attempts,
                                   next_attempt_at, created_at, updated_at)
   SELECT 'whd_' || substr(r.event_id, 5, 10) || upper(substr(md5(random()::text || r.endpoint_id || r.event_id), 1, 16)), r.endpoint_id,
          r.event_id, r.developer_id, r.status, 0, ${maxAttempts}, ${at}, ${at}, ${at}
   FROM (
     SELECT ev.id AS event_id, ev.developer_id, e.id AS endpoint_id, CASE WHEN e.enabled THEN 'pending' ELSE 'held' END AS status
       FROM event ev JOIN webhook_endpoints e
       ON e.developer_id = ev.developer_id AND e.deleted_at IS NULL AND e.kind = 'endpoint' AND ev.type = ANY(e.events)
     UNION ALL
     SELECT ev.id, ev.developer_id, channel.id, 'pending' FROM event ev
       CROSS JOIN LATERAL anomaly_alert_channels(ev.developer_id, ev.data) AS channel(id)
     WHERE ev.type = '${ANOMALY_DETECTED}'
   ) r
   RETURNING developer_id`

export interface EmittedEvent {
  readonly id: string
  readonly type: EventType
  readonly createdAt: string
  readonly data: Record<string, unknown>
}

export interface EventsService {
  readonly emit: (developerId: string, type: EventType, data: Record<string, unknown>) => Effect.Effect<EmittedEvent>
  /** many events (any developers) and their deliveries in one statement, in the caller's transaction */
  readonly emitMany: (
    events: ReadonlyArray<{ readonly developerId: string; readonly type: EventType; readonly data: Record<string, unknown> }>
  ) => Effect.Effect<ReadonlyArray<EmittedEvent>>
}

export class Events extends Context.Tag("agent-auth/Events")<Events, EventsService>() {}

export const EventsLive = Layer.effect(
  Events,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const emitMany: EventsService["emitMany"] = (items) =>
      inTransaction(sql, Effect.gen(function*() {
        if (items.length === 0) return []
        const ms = yield* nowMillis
        const at = new Date(ms)
        const ids = items.map(() => newId("evt", ms))
        const rows = yield* sql.unsafe<{ developerId: string }>(
          `WITH event AS (
             INSERT INTO events (id, developer_id, type, data, created_at)
             SELECT u.id, u.developer_id, u.type, u.data::jsonb, $5 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(id, developer_id, type, data)
             RETURNING id, developer_id, type, data
           ), inserted AS (${insertDeliveriesSql("$6", "$5")})
           SELECT DISTINCT developer_id FROM inserted`,
          [ids, items.map((i) => i.developerId), items.map((i) => i.type), items.map((i) => JSON.stringify(i.data)), at,
            config.webhooks.maxAttempts] as any
        )
        for (const row of rows) yield* sql`SELECT pg_notify(${DELIVERY_CHANNEL}, ${row.developerId})`
        if (rows.length > 0) nudgeDeliveryWorkers()
        nudgeEventStreams(items.map((i) => i.developerId))
        return items.map((i, n) => ({ id: ids[n]!, type: i.type, createdAt: at.toISOString(), data: i.data }))
      })).pipe(Effect.orDie)
    // one event: the same statement (in the caller's transaction, or its own)
    const emit: EventsService["emit"] = (developerId, type, data) =>
      Effect.map(emitMany([{ developerId, type, data }]), ([event]) => event!)
    return { emit, emitMany }
  })
)
