/**
 * SSO sessions (decisions §12): made by a completed login, `ssosess_…`, SSO_SESSION_TTL (8 h,
 * at most 24 h). The browser carries a random token in a `__Host-` cookie (HttpOnly, Secure,
 * SameSite=Lax) that is stored only as its SHA-256; the id is what the API lists and deletes.
 * The consent page and the policies read a live session through `current` and `verified`.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { Config } from "../Config.ts"
import { NotFound } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import { type CursorPosition, toPage } from "../platform/Pagination.ts"
import { nowMillis } from "../platform/Time.ts"
import { sha256Hex } from "../platform/Hash.ts"

export const SESSION_COOKIE = "__Host-aas_sso"

export interface SsoSession {
  readonly sessionId: string
  readonly developerId: string
  readonly connectionId: string
  readonly principalId: string
  readonly groups: ReadonlyArray<string>
  readonly mappedScopes: ReadonlyArray<string>
  readonly createdAt: Date
  readonly expiresAt: Date
}

export interface SessionView {
  readonly sessionId: string
  readonly connectionId: string
  readonly principalId: string
  readonly groups: ReadonlyArray<string>
  readonly createdAt: string
  readonly expiresAt: string
}

export interface SsoSessionsService {
  /** a new session and the token its cookie carries, in the caller's transaction */
  readonly create: (input: {
    developerId: string; connectionId: string; principalId: string; identityId: string
    groups: ReadonlyArray<string>; mappedScopes: ReadonlyArray<string>
  }) => Effect.Effect<{ session: SsoSession; token: string }>
  /** the live session a cookie token names (any developer); undefined when unknown, expired or deleted */
  readonly current: (token: string | undefined) => Effect.Effect<SsoSession | undefined>
  /** the principal has a live SSO session with this developer (policies' `principal.ssoVerified`) */
  readonly verified: (developerId: string, principalId: string) => Effect.Effect<boolean>
  readonly list: (developerId: string, page: { limit: number; cursor: CursorPosition | undefined }) => Effect.Effect<{ sessions: Array<SessionView>; nextCursor: string | null }>
  readonly remove: (developerId: string, sessionId: string) => Effect.Effect<void, NotFound>
  /** ends every live session of a principal (deprovisioning), in the caller's transaction; how many */
  readonly endForPrincipal: (developerId: string, principalId: string) => Effect.Effect<number>
}

export class SsoSessions extends Context.Tag("agent-auth/SsoSessions")<SsoSessions, SsoSessionsService>() {}


/** a session as stored: its id column is `id` */
interface Row extends Omit<SsoSession, "sessionId"> {
  readonly id: string
}

const toSession = (r: Row): SsoSession => ({
  sessionId: r.id,
  developerId: r.developerId,
  connectionId: r.connectionId,
  principalId: r.principalId,
  groups: [...r.groups],
  mappedScopes: [...r.mappedScopes],
  createdAt: r.createdAt,
  expiresAt: r.expiresAt
})

export const viewOf = (s: SsoSession): SessionView => ({
  sessionId: s.sessionId,
  connectionId: s.connectionId,
  principalId: s.principalId,
  groups: [...s.groups],
  createdAt: s.createdAt.toISOString(),
  expiresAt: s.expiresAt.toISOString()
})

const COLUMNS = "id, developer_id, connection_id, principal_id, groups, mapped_scopes, created_at, expires_at"

export const SsoSessionsLive = Layer.effect(
  SsoSessions,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config

    const create: SsoSessionsService["create"] = (input) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const token = randomBytes(32).toString("base64url")
        const [row] = yield* sql.unsafe<Row>(
          `INSERT INTO sso_sessions (id, developer_id, connection_id, principal_id, identity_id, token_hash, groups, mapped_scopes, created_at, expires_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ${COLUMNS}`,
          [newId("ssosess", ms), input.developerId, input.connectionId, input.principalId, input.identityId, sha256Hex(token),
            [...input.groups] as any, [...input.mappedScopes] as any, new Date(ms), new Date(ms + config.sso.sessionTtlSeconds * 1000)]
        )
        return { session: toSession(row!), token }
      }).pipe(Effect.orDie)

    const current: SsoSessionsService["current"] = (token) =>
      Effect.gen(function*() {
        if (token === undefined || !/^[A-Za-z0-9_-]{43}$/.test(token)) return undefined
        const ms = yield* nowMillis
        const [row] = yield* sql.unsafe<Row>(
          `SELECT ${COLUMNS} FROM sso_sessions s WHERE token_hash = $1 AND revoked_at IS NULL AND expires_at > $2
             AND EXISTS (SELECT 1 FROM sso_connections c WHERE c.id = s.connection_id AND c.deleted_at IS NULL AND c.status = 'active')`,
          [sha256Hex(token), new Date(ms)]
        )
        return row === undefined ? undefined : toSession(row)
      }).pipe(Effect.orDie)

    const verified: SsoSessionsService["verified"] = (developerId, principalId) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const rows = yield* sql`SELECT 1 FROM sso_sessions WHERE developer_id = ${developerId} AND principal_id = ${principalId}
                                AND revoked_at IS NULL AND expires_at > ${new Date(ms)} LIMIT 1`
        return rows.length > 0
      }).pipe(Effect.orDie)

    const list: SsoSessionsService["list"] = (developerId, page) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const params: Array<unknown> = [developerId, new Date(ms)]
        let after = ""
        if (page.cursor) {
          params.push(new Date(page.cursor.createdAt), page.cursor.id)
          after = " AND (created_at, id) < ($3, $4)"
        }
        params.push(page.limit + 1)
        const rows = yield* sql.unsafe<Row>(
          `SELECT ${COLUMNS} FROM sso_sessions WHERE developer_id = $1 AND revoked_at IS NULL AND expires_at > $2${after}
           ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
          params as any
        )
        const { page: shown, nextCursor } = toPage(rows, page.limit)
        return { sessions: shown.map((r) => viewOf(toSession(r))), nextCursor }
      }).pipe(Effect.orDie)

    const remove: SsoSessionsService["remove"] = (developerId, sessionId) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const rows = yield* sql`UPDATE sso_sessions SET revoked_at = ${new Date(ms)}
                                WHERE id = ${sessionId} AND developer_id = ${developerId} AND revoked_at IS NULL
                                  AND expires_at > ${new Date(ms)} RETURNING id`.pipe(Effect.orDie)
        if (rows.length === 0) return yield* Effect.fail(new NotFound({ message: "SSO session not found" }))
      })

    const endForPrincipal: SsoSessionsService["endForPrincipal"] = (developerId, principalId) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const rows = yield* sql`UPDATE sso_sessions SET revoked_at = ${new Date(ms)}
                                WHERE developer_id = ${developerId} AND principal_id = ${principalId}
                                  AND revoked_at IS NULL AND expires_at > ${new Date(ms)} RETURNING id`
        return rows.length
      }).pipe(Effect.orDie)

    return { create, current, verified, list, remove, endForPrincipal }
  })
)

/** The Set-Cookie value of a new session (the cookie lives as long as the session). */
export const sessionCookie = (token: string, expiresAt: Date, nowMs: number) =>
  `${SESSION_COOKIE}=${token}; Path=/; Max-Age=${Math.max(0, Math.ceil((expiresAt.getTime() - nowMs) / 1000))}; HttpOnly; Secure; SameSite=Lax`

/** The session token a request's Cookie header carries, if any. */
export const sessionTokenOf = (cookieHeader: string | undefined): string | undefined => {
  if (cookieHeader === undefined) return undefined
  for (const part of cookieHeader.split(";")) {
    const [name, ...value] = part.trim().split("=")
    if (name === SESSION_COOKIE) return value.join("=")
  }
  return undefined
}
