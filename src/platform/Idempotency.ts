/**
 * Idempotent retries (decisions §2, revised; Stripe's semantics, the IETF Idempotency-Key draft):
 * a POST with an API key and an `Idempotency-Key` header (1-255 printable characters) runs once per
 * developer and key. Its answer (status, body, the headers that matter) is kept 24 h; a retry with
 * the same key and body gets it again with `Idempotent-Replayed: true` and nothing else happens; the
 * same key with another body is 422 IDEMPOTENCY_KEY_REUSED; a retry while the first runs is 409
 * IDEMPOTENCY_KEY_IN_USE. A 5xx answer is not kept (the retry runs).
 *
 * Crash safety: while a keyed request runs, every outermost transaction it opens marks the key
 * `committed` before it commits (IdempotencyMark.ts, applied to the database client), so the
 * marker and the operation's changes commit together. A key left `running` by a crash is taken over
 * by a retry after LEASE_MS only when nothing of it committed; one whose changes committed but whose
 * answer was lost answers 409 until it expires, and never runs twice.
 */
import { HttpServerResponse } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Exit } from "effect"
import { errorResponse, validationCode } from "./HttpEnvelope.ts"
import { sha256Hex } from "./Hash.ts"
import { CurrentIdempotency } from "./IdempotencyMark.ts"

const KEEP_MS = 24 * 3_600_000
const LEASE_MS = 120_000
/** answers larger than this are not kept (no keyed POST answers anything near it) */
const MAX_KEPT_BYTES = 1024 * 1024
/** the headers a replay repeats besides the body's type */
const KEPT_HEADERS = ["location", "etag"]

const KEY = /^[\x20-\x7e]{1,255}$/

interface Row {
  readonly requestHash: string
  readonly status: "running" | "done"
  readonly committed: boolean
  readonly responseStatus: number | null
  readonly responseHeaders: Record<string, string> | string | null
  readonly responseBody: string | null
}

const replay = (row: Row) => {
  const headers = typeof row.responseHeaders === "string" ? JSON.parse(row.responseHeaders) : row.responseHeaders ?? {}
  const { "content-type": contentType, ...rest } = headers as Record<string, string>
  return HttpServerResponse.text(row.responseBody ?? "", {
    status: row.responseStatus ?? 200,
    contentType: contentType ?? "application/json",
    headers: { ...rest, "idempotent-replayed": "true" }
  })
}

/**
 * Runs `app` at most once for the developer's key (see the header). `body` is the request's text as
 * read; the method and path are part of what must match.
 */
export const idempotent = <E, R>(
  request: { readonly developerId: string; readonly key: string; readonly method: string; readonly path: string; readonly body: string },
  requestId: string,
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | SqlClient.SqlClient> =>
  Effect.gen(function*() {
    if (!KEY.test(request.key)) {
      return errorResponse(400, validationCode(request.path), "Idempotency-Key must be 1 to 255 printable characters", requestId)
    }
    const sql = yield* SqlClient.SqlClient
    const now = new Date(yield* Clock.currentTimeMillis)
    const hash = sha256Hex(`${request.method} ${request.path}\n${request.body}`)
    const { developerId, key } = request
    // expired keys go, a few at a time, whenever a key is claimed
    yield* sql`DELETE FROM idempotency_keys WHERE (developer_id, key) IN
                 (SELECT developer_id, key FROM idempotency_keys WHERE expires_at <= ${now} LIMIT 100)`.pipe(Effect.orDie)
    const claimed = yield* sql<{ developerId: string }>`
      INSERT INTO idempotency_keys (developer_id, key, request_hash, status, locked_until, created_at, expires_at)
      VALUES (${developerId}, ${key}, ${hash}, 'running', ${new Date(now.getTime() + LEASE_MS)}, ${now}, ${new Date(now.getTime() + KEEP_MS)})
      ON CONFLICT (developer_id, key) DO UPDATE SET locked_until = excluded.locked_until
        WHERE idempotency_keys.status = 'running' AND NOT idempotency_keys.committed
          AND idempotency_keys.locked_until <= ${now} AND idempotency_keys.request_hash = excluded.request_hash
      RETURNING developer_id`.pipe(Effect.orDie)
    if (claimed.length === 0) {
      const [row] = yield* sql<Row>`SELECT request_hash, status, committed, response_status, response_headers, response_body
                                     FROM idempotency_keys WHERE developer_id = ${developerId} AND key = ${key}`.pipe(Effect.orDie)
      if (row === undefined) return errorResponse(409, "IDEMPOTENCY_KEY_IN_USE", "A request with this Idempotency-Key is running; retry shortly", requestId, { "retry-after": "1" })
      if (row.requestHash !== hash) {
        return errorResponse(422, "IDEMPOTENCY_KEY_REUSED", "This Idempotency-Key was used with another request; use a new key for a new request", requestId)
      }
      if (row.status === "done") return replay(row)
      const message = row.committed
        ? "The request with this Idempotency-Key was carried out but its answer was lost; read the result instead of retrying"
        : "A request with this Idempotency-Key is running; retry shortly"
      return errorResponse(409, "IDEMPOTENCY_KEY_IN_USE", message, requestId, row.committed ? {} : { "retry-after": "1" })
    }
    const release = sql`DELETE FROM idempotency_keys WHERE developer_id = ${developerId} AND key = ${key} AND NOT committed`.pipe(Effect.orDie)
    const response = yield* Effect.locally(app, CurrentIdempotency, { developerId, key }).pipe(
      Effect.onExit((exit) => Exit.isFailure(exit) ? release : Effect.void)
    )
    const body = response.body
    const text = body._tag === "Uint8Array" && body.body.byteLength <= MAX_KEPT_BYTES
      ? new TextDecoder().decode(body.body)
      : body._tag === "Empty" ? "" : undefined
    if (response.status >= 500 || text === undefined) {
      // not kept: a failure runs again on retry (a streamed answer cannot be replayed)
      yield* release
      return response
    }
    const headers: Record<string, string> = { "content-type": body._tag === "Uint8Array" ? body.contentType : "application/json" }
    for (const name of KEPT_HEADERS) if (response.headers[name] !== undefined) headers[name] = response.headers[name]!
    yield* sql`UPDATE idempotency_keys SET status = 'done', response_status = ${response.status}, response_headers = ${JSON.stringify(headers)}::jsonb,
                 response_body = ${text} WHERE developer_id = ${developerId} AND key = ${key}`.pipe(Effect.orDie)
    return response
  })
