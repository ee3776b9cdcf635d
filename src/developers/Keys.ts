/**
 * A developer's API keys (decisions §2, revised): several named keys, `full` or `read`, at most
 * KEY_LIMIT live ones; rotation with a grace period during which the old key still answers. Keys
 * are stored only as SHA-256; a key is shown once, when made. Every change is on the developer's
 * audit chain with the key's id, and drops the developer's cached keys (platform/Auth.ts) once it
 * has committed: at once here, by the api_keys trigger's notification elsewhere (sql/0037).
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { AuditChain } from "../platform/AuditChain.ts"
import { ApiKeys, type CallingKey, type Developer, hashApiKey, KEY_PREFIX_LENGTH, type KeyScope } from "../platform/Auth.ts"
import { Conflict, NotFound, Unauthorized } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"

/** live keys (not deleted, not past a grace period) a developer may hold */
export const KEY_LIMIT = 10
/** the name of the key sign-up (and the operator's `developers create`) makes */
export const FIRST_KEY_NAME = "Default"

export const newApiKey = (mode: "live" | "sandbox") =>
  `${mode === "live" ? "sk_live_" : "sk_test_"}${randomBytes(32).toString("base64url")}`

/** Stores a new key for a developer (in the caller's transaction); answers its id. */
export const insertApiKey = (
  sql: SqlClient.SqlClient,
  input: { readonly developerId: string; readonly name: string; readonly scope: KeyScope; readonly apiKey: string; readonly at: Date }
) =>
  Effect.gen(function*() {
    const id = newId("key", input.at.getTime())
    yield* sql`INSERT INTO api_keys (id, developer_id, name, scope, key_hash, prefix, created_at)
      VALUES (${id}, ${input.developerId}, ${input.name}, ${input.scope}, ${hashApiKey(input.apiKey)},
              ${input.apiKey.slice(0, KEY_PREFIX_LENGTH)}, ${input.at})`
    return id
  })

export interface KeyView {
  readonly id: string
  readonly name: string
  readonly scope: KeyScope
  readonly prefix: string
  readonly createdAt: string
  readonly lastUsedAt: string | null
}

interface KeyRow {
  readonly id: string
  readonly name: string
  readonly scope: KeyScope
  readonly prefix: string
  readonly createdAt: Date
  readonly lastUsedAt: Date | null
  readonly expiresAt: Date | null
}

const isoOf = (d: Date | string) => new Date(d).toISOString()
const viewOf = (row: KeyRow): KeyView => ({
  id: row.id,
  name: row.name,
  scope: row.scope,
  prefix: row.prefix,
  createdAt: isoOf(row.createdAt),
  lastUsedAt: row.lastUsedAt === null ? null : isoOf(row.lastUsedAt)
})

export class DeveloperKeys extends Context.Tag("agent-auth/DeveloperKeys")<DeveloperKeys, {
  readonly create: (developer: Developer, input: { name: string; scope: KeyScope }) => Effect.Effect<Omit<KeyView, "lastUsedAt"> & { apiKey: string }, Conflict>
  readonly list: (developer: Developer) => Effect.Effect<{ keys: Array<KeyView> }>
  readonly remove: (developer: Developer, keyId: string) => Effect.Effect<void, NotFound | Conflict>
  /** replaces the calling key (same name and scope); the old one answers for `gracePeriodSeconds` more */
  readonly rotate: (developer: Developer, calling: CallingKey, gracePeriodSeconds: number) => Effect.Effect<{ apiKey: string; rotatedAt: string }, Conflict | Unauthorized>
}>() {}

export const DeveloperKeysLive = Layer.effect(
  DeveloperKeys,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const apiKeys = yield* ApiKeys
    const audit = yield* AuditChain
    /** one change to a developer's keys at a time: the count and the last-full-key rule hold under concurrency */
    const lockDeveloper = (developerId: string) => sql`SELECT id FROM developers WHERE id = ${developerId} FOR UPDATE`
    /** the developer's live keys, newest first (a rotated key is live until its grace ends) */
    const liveKeys = (developerId: string, at: Date) =>
      sql<KeyRow>`SELECT id, name, scope, prefix, created_at, last_used_at, expires_at FROM api_keys
        WHERE developer_id = ${developerId} AND (expires_at IS NULL OR expires_at > ${at})
        ORDER BY created_at DESC, id DESC`
    /** a change committed: this instance's cache drops the developer's keys now */
    const committed = <A, E>(developerId: string, change: Effect.Effect<A, E, never>) =>
      sql.withTransaction(change).pipe(
        Effect.catchTag("SqlError", Effect.die),
        Effect.tap(() => Effect.sync(() => apiKeys.forget(developerId)))
      )

    return {
      create: (developer, input) =>
        Effect.gen(function*() {
          const at = new Date(yield* nowMillis)
          yield* lockDeveloper(developer.id)
          const live = yield* liveKeys(developer.id, at)
          if (live.length >= KEY_LIMIT) {
            return yield* Effect.fail(new Conflict({ message: `A developer holds at most ${KEY_LIMIT} API keys; delete one first` }))
          }
          const apiKey = newApiKey(developer.mode)
          const id = yield* insertApiKey(sql, { developerId: developer.id, name: input.name, scope: input.scope, apiKey, at })
          yield* audit.append({ developerId: developer.id, action: "service.key.created", metadata: { keyId: id } })
          const view = viewOf({ id, name: input.name, scope: input.scope, prefix: apiKey.slice(0, KEY_PREFIX_LENGTH), createdAt: at, lastUsedAt: null, expiresAt: null })
          return { id: view.id, name: view.name, scope: view.scope, apiKey, prefix: view.prefix, createdAt: view.createdAt }
        }).pipe((change) => committed(developer.id, change)),

      list: (developer) =>
        Effect.gen(function*() {
          const at = new Date(yield* nowMillis)
          return { keys: (yield* liveKeys(developer.id, at)).map(viewOf) }
        }).pipe(Effect.orDie),

      remove: (developer, keyId) =>
        Effect.gen(function*() {
          const at = new Date(yield* nowMillis)
          yield* lockDeveloper(developer.id)
          const live = yield* liveKeys(developer.id, at)
          const key = live.find((k) => k.id === keyId)
          // another developer's key, a deleted one and one past its grace are alike: not found
          if (key === undefined) return yield* Effect.fail(new NotFound({ message: "No such API key" }))
          // a key in its grace period is on its way out: it never counts as the key that remains
          const fullAfter = live.filter((k) => k.id !== keyId && k.scope === "full" && k.expiresAt === null)
          if (key.scope === "full" && key.expiresAt === null && fullAfter.length === 0) {
            return yield* Effect.fail(new Conflict({ message: "This is your last full API key; create another full key before deleting it" }))
          }
          yield* sql`DELETE FROM api_keys WHERE id = ${keyId} AND developer_id = ${developer.id}`
          yield* audit.append({ developerId: developer.id, action: "service.key.deleted", metadata: { keyId } })
        }).pipe((change) => committed(developer.id, change)),

      rotate: (developer, calling, gracePeriodSeconds) =>
        Effect.gen(function*() {
          const at = new Date(yield* nowMillis)
          yield* lockDeveloper(developer.id)
          const [old] = yield* sql<KeyRow>`SELECT id, name, scope, prefix, created_at, last_used_at, expires_at FROM api_keys
            WHERE id = ${calling.id} AND developer_id = ${developer.id}`
          // deleted since the gate let the request in
          if (old === undefined) return yield* Effect.fail(new Unauthorized({ message: "Invalid or missing API key" }))
          // a second rotation of the same key (e.g. two deploy steps at once) would leave two replacements
          if (old.expiresAt !== null) {
            return yield* Effect.fail(new Conflict({ message: "This API key has already been rotated; use the key that replaced it" }))
          }
          const apiKey = newApiKey(developer.mode)
          const newKeyId = yield* insertApiKey(sql, { developerId: developer.id, name: old.name, scope: old.scope, apiKey, at })
          yield* sql`UPDATE api_keys SET expires_at = ${new Date(at.getTime() + gracePeriodSeconds * 1000)} WHERE id = ${old.id}`
          yield* audit.append({
            developerId: developer.id,
            action: "service.key.rotated",
            metadata: { keyId: old.id, newKeyId, gracePeriodSeconds }
          })
          return { apiKey, rotatedAt: at.toISOString() }
        }).pipe((change) => committed(developer.id, change))
    }
  })
)
