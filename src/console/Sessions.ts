/**
 * Console sessions (decisions §23): an API key exchanged for a session cookie bound to it. The
 * cookie's token is random; the table keeps its SHA-256, the CSRF token of the session's forms, and
 * the API key encrypted (AES-256-GCM) under a key derived from the token, so only the browser that
 * holds the cookie can make the session act. 12 hours, on the service's Clock. A session resolves only
 * while its key exists and is within any rotation grace; otherwise it is deleted when next presented.
 */
import { SqlClient } from "@effect/sql"
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto"
import { Context, Effect, Layer } from "effect"
import { ApiKeys, type KeyScope } from "../platform/Auth.ts"
import { sha256Hex } from "../platform/Hash.ts"
import { nowMillis } from "../platform/Time.ts"

export const SESSION_COOKIE = "__Host-console"
/** the sign-in form's double-submit cookie (there is no session yet to hold its CSRF token) */
export const SIGN_IN_COOKIE = "__Host-console-signin"
export const SESSION_HOURS = 12

export interface ConsoleSession {
  readonly developerId: string
  readonly developerName: string
  readonly keyId: string
  readonly scope: KeyScope
  readonly apiKey: string
  readonly csrf: string
  readonly expiresAt: Date
}

export interface ConsoleSessionsService {
  /** a session for a valid key: the cookie's token, or undefined when the key does not authenticate */
  readonly create: (apiKey: string) => Effect.Effect<{ readonly token: string; readonly expiresAt: Date } | undefined>
  readonly resolve: (token: string) => Effect.Effect<ConsoleSession | undefined>
  readonly end: (token: string) => Effect.Effect<void>
}

export class ConsoleSessions extends Context.Tag("agent-auth/ConsoleSessions")<ConsoleSessions, ConsoleSessionsService>() {}

const keyFor = (token: string) => Buffer.from(hkdfSync("sha256", Buffer.from(token, "utf8"), Buffer.alloc(0), "agent-auth console session", 32))

const seal = (token: string, apiKey: string): string => {
  const iv = randomBytes(12)
  const cipher = createCipheriv("aes-256-gcm", keyFor(token), iv)
  const body = Buffer.concat([cipher.update(apiKey, "utf8"), cipher.final()])
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")
}

const open = (token: string, sealed: string): string | undefined => {
  try {
    const raw = Buffer.from(sealed, "base64")
    const decipher = createDecipheriv("aes-256-gcm", keyFor(token), raw.subarray(0, 12))
    decipher.setAuthTag(raw.subarray(12, 28))
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8")
  } catch {
    return undefined
  }
}

export const sameToken = (a: string, b: string): boolean => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

export const TOKEN_FORMAT = /^[A-Za-z0-9_-]{43}$/

export const ConsoleSessionsLive = Layer.effect(
  ConsoleSessions,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const keys = yield* ApiKeys
    const create: ConsoleSessionsService["create"] = (apiKey) =>
      Effect.gen(function*() {
        const resolved = yield* keys.resolve(apiKey)
        if (resolved === undefined) return undefined
        const token = randomBytes(32).toString("base64url")
        const at = yield* nowMillis
        const expiresAt = new Date(at + SESSION_HOURS * 3600_000)
        yield* sql`DELETE FROM console_sessions WHERE expires_at < ${new Date(at)}`
        yield* sql`INSERT INTO console_sessions (id_hash, developer_id, key_id, key_ciphertext, csrf_token, created_at, expires_at)
          VALUES (${sha256Hex(token)}, ${resolved.developer.id}, ${resolved.key.id}, ${seal(token, apiKey)},
                  ${randomBytes(24).toString("base64url")}, ${new Date(at)}, ${expiresAt})`
        return { token, expiresAt }
      }).pipe(Effect.orDie)
    const resolve: ConsoleSessionsService["resolve"] = (token) =>
      Effect.gen(function*() {
        if (!TOKEN_FORMAT.test(token)) return undefined
        const at = new Date(yield* nowMillis)
        const hash = sha256Hex(token)
        const [row] = yield* sql<{ developerId: string; developerName: string; keyId: string; scope: KeyScope | null; keyExpiresAt: Date | null; keyCiphertext: string; csrfToken: string; expiresAt: Date }>`
          SELECT s.developer_id, d.name AS developer_name, s.key_id, k.scope, k.expires_at AS key_expires_at, s.key_ciphertext, s.csrf_token, s.expires_at
          FROM console_sessions s JOIN developers d ON d.id = s.developer_id LEFT JOIN api_keys k ON k.id = s.key_id
          WHERE s.id_hash = ${hash} AND s.expires_at > ${at}`
        if (row === undefined) return undefined
        // the key was deleted, or its rotation grace is over: the session ends with it
        if (row.scope === null || (row.keyExpiresAt !== null && new Date(row.keyExpiresAt) <= at)) {
          yield* sql`DELETE FROM console_sessions WHERE id_hash = ${hash}`
          return undefined
        }
        const apiKey = open(token, row.keyCiphertext)
        if (apiKey === undefined) return undefined
        return {
          developerId: row.developerId, developerName: row.developerName, keyId: row.keyId, scope: row.scope, apiKey,
          csrf: row.csrfToken, expiresAt: new Date(row.expiresAt)
        }
      }).pipe(Effect.orDie)
    const end: ConsoleSessionsService["end"] = (token) =>
      sql`DELETE FROM console_sessions WHERE id_hash = ${sha256Hex(token)}`.pipe(Effect.asVoid, Effect.orDie)
    return { create, resolve, end }
  })
)
