/**
 * What webhook endpoints and anomaly channels share (both are rows of webhook_endpoints, told apart
 * by `kind`): the delivery history page, and retiring an endpoint so nothing more is sent to it.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { BadRequest } from "../platform/Errors.ts"
import { decodeCursor, encodeCursor } from "../platform/Pagination.ts"

/** webhook_endpoints.kind: a /v1/webhooks endpoint, or an anomaly channel (sql/0027) */
export type EndpointKind = "endpoint" | "anomaly_webhook" | "anomaly_slack"

export interface DeliveryRow {
  readonly id: string
  readonly eventId: string
  readonly eventType: string
  readonly status: "pending" | "held" | "delivered" | "failed"
  readonly attempts: number
  readonly maxAttempts: number
  readonly lastError: string | null
  readonly lastResponseStatus: number | null
  readonly nextAttemptAt: Date
  readonly createdAt: Date
  readonly deliveredAt: Date | null
}

export const deliveryView = (d: DeliveryRow) => ({
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

export type DeliveryView = ReturnType<typeof deliveryView>

export interface DeliveryQuery {
  readonly status?: string | undefined
  readonly cursor?: string | undefined
  readonly limit: number
}

/** One page of an endpoint's deliveries, newest first (the caller has checked the endpoint is the developer's). */
export const deliveryPage = (sql: SqlClient.SqlClient, endpointId: string, query: DeliveryQuery) =>
  Effect.gen(function*() {
    const cursor = decodeCursor(query.cursor)
    if (cursor === null) return yield* Effect.fail(new BadRequest({ message: "cursor is not valid" }))
    const params: Array<unknown> = [endpointId]
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
  })

/**
 * Soft-deletes the developer's endpoint of these kinds and fails its pending and held deliveries, in one
 * transaction; false when there is no such live endpoint.
 */
export const retireEndpoint = (sql: SqlClient.SqlClient, developerId: string, id: string, kinds: ReadonlyArray<EndpointKind>, at: Date) =>
  sql.withTransaction(Effect.gen(function*() {
      const rows = yield* sql`UPDATE webhook_endpoints SET deleted_at = ${at}
                              WHERE id = ${id} AND developer_id = ${developerId} AND kind IN ${sql.in(kinds)} AND deleted_at IS NULL
                              RETURNING id`
      if (rows.length === 0) return false
      // nothing more is sent to a deleted endpoint (nor kept for it while it was disabled)
      yield* sql`UPDATE webhook_deliveries SET status = 'failed', last_error = 'endpoint deleted', updated_at = ${at}
                 WHERE endpoint_id = ${id} AND status IN ('pending', 'held')`
      return true
  })).pipe(Effect.orDie)
