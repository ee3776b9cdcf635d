/**
 * SCIM bearer tokens (decisions §11): `scim_` + 32 random bytes, stored as SHA-256. Resolution is
 * one statement on the unique hash index, so a token deleted on any instance stops at once; it
 * stamps `last_used_at` at most once a minute per token (a re-sync of thousands of users writes it
 * a handful of times, not once per request).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { type Developer, ScimTokenResolver } from "../platform/Auth.ts"
import { nowMillis } from "../platform/Time.ts"
import { sha256Hex } from "../platform/Hash.ts"

const TOKEN = /^scim_[A-Za-z0-9_-]{43}$/

export const ScimTokensLive = Layer.effect(
  ScimTokenResolver,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const resolve = (token: string) => {
      if (!TOKEN.test(token)) return Effect.succeed(undefined)
      const hash = sha256Hex(token)
      return Effect.flatMap(nowMillis, (ms) =>
        sql.unsafe<Developer & { tokenId: string }>(
          `WITH t AS (
             SELECT id, developer_id, last_used_at FROM scim_tokens
             WHERE token_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)
           ), used AS (
             UPDATE scim_tokens s SET last_used_at = $2 FROM t
             WHERE s.id = t.id AND (t.last_used_at IS NULL OR t.last_used_at < $3)
           )
           SELECT t.id AS token_id, d.id, d.name, d.email, d.mode, d.plan, d.fido_required, d.created_at
           FROM t JOIN developers d ON d.id = t.developer_id`,
          [hash, new Date(ms), new Date(ms - 60_000)]
        )).pipe(
          Effect.map((rows) => {
            const row = rows[0]
            if (row === undefined) return undefined
            const { tokenId, ...developer } = row
            return { tokenId, developer: developer as Developer }
          }),
          Effect.orDie
        )
    }
    return { resolve }
  })
)
