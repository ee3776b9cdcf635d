/**
 * A disabled endpoint's deliveries (decisions §7, revised): `held`, never claimed by the worker,
 * kept 7 days. Disabling holds what is waiting to be sent; enabling turns the held deliveries back
 * into `pending`, due at once and in the order they were made (the worker claims by
 * next_attempt_at, so oldest first), with their attempts and backoff rules unchanged. A delivery
 * held longer than 7 days is given up: `failed` with HELD_TOO_LONG, still listed, and sent again
 * only if the developer asks (retry, replay). A delivery retried or replayed while the endpoint is
 * disabled stays `pending` (the developer asked for it, so it does not expire) and is sent once the
 * endpoint is enabled: the worker claims no delivery of a disabled endpoint.
 */
import type { SqlClient } from "@effect/sql"

export const HELD_FOR_MS = 7 * 24 * 3600 * 1000
export const HELD_TOO_LONG = "held longer than 7 days while the endpoint was disabled; not sent"

/** held deliveries past their 7 days become failed (run before listing or releasing them) */
export const expireHeld = (sql: SqlClient.SqlClient, endpointId: string, at: Date) =>
  sql`UPDATE webhook_deliveries SET status = 'failed', last_error = ${HELD_TOO_LONG}, next_attempt_at = ${at}, updated_at = ${at}
      WHERE endpoint_id = ${endpointId} AND status = 'held' AND created_at < ${new Date(at.getTime() - HELD_FOR_MS)}`

/**
 * On disable: pending deliveries not being sent right now are held. One in flight (a live lease)
 * finishes its attempt; if that fails it stays pending, and the worker claims no delivery of a
 * disabled endpoint, so it waits for the endpoint like the held ones.
 */
export const holdPending = (sql: SqlClient.SqlClient, endpointId: string, at: Date) =>
  sql`UPDATE webhook_deliveries SET status = 'held', lease_until = NULL, updated_at = ${at}
      WHERE endpoint_id = ${endpointId} AND status = 'pending' AND (lease_until IS NULL OR lease_until < ${at})`

/** On enable: the held deliveries of the last 7 days are due now, oldest first; answers how many. */
export const releaseHeld = (sql: SqlClient.SqlClient, endpointId: string, at: Date) =>
  sql<{ id: string }>`UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = created_at, lease_until = NULL, updated_at = ${at}
      WHERE endpoint_id = ${endpointId} AND status = 'held' RETURNING id`
