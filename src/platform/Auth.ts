/**
 * API-key authentication (decisions §2). A developer holds several keys (table api_keys), each
 * `full` or `read`, stored only as SHA-256; a lookup is by hash. Resolved keys are cached for a few
 * seconds so the hot path does not pay a query per request. A change to a developer or one of its
 * keys (created, deleted, rotated; plan, settings) drops that developer's entries at once on this
 * instance and, through the notification triggers on `developers` and `api_keys` send when the
 * change commits (sql/0011, sql/0037), on every other instance (LISTEN on DEVELOPER_CHANGES;
 * embedded mode is a single process). CACHE_MS bounds what a lost notification (a listener
 * reconnecting) can leave behind. A rotated key's end of grace is in its cache entry and checked
 * on every request against the service's Clock, so it is refused at that instant everywhere.
 */
import { HttpApiMiddleware, HttpApiSecurity, HttpRouter, HttpServerRequest } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Context, Deferred, Effect, FiberRef, Layer, Option, Redacted, Schedule, Schema, Stream } from "effect"
import { Config } from "../Config.ts"
import { isEmbeddedDatabase } from "./Database.ts"
import { InsufficientKeyScope, Unauthorized } from "./Errors.ts"
import { sha256Hex } from "./Hash.ts"
import type { GrantTokenClaims } from "./Keys.ts"

export interface Developer {
  readonly id: string
  readonly name: string
  readonly email: string | null
  readonly mode: "live" | "sandbox"
  readonly plan: "free" | "pro" | "enterprise"
  readonly fidoRequired: boolean
  readonly createdAt: Date
}

/** The developer whose API key authenticated this request. */
export class CurrentDeveloper extends Context.Tag("agent-auth/CurrentDeveloper")<CurrentDeveloper, Developer>() {}

export const hashApiKey = (apiKey: string): string => sha256Hex(apiKey)

export type KeyScope = "full" | "read"
/** The API key that authenticated a request: its id (`key_…`) and scope. */
export interface CallingKey {
  readonly id: string
  readonly scope: KeyScope
}
export interface ResolvedKey {
  readonly developer: Developer
  readonly key: CallingKey
}

/** The POSTs a `read` key may call besides every GET (decisions §2): verifying a token, and rotating itself. */
const READ_KEY_POSTS: ReadonlySet<string> = new Set(["/v1/tokens/verify", "/v1/keys/rotate"])
/** Whether a `read` key may call the operation `method path` (path as the endpoint declares it). */
export const readKeyMayCall = (method: string, path: string): boolean =>
  method === "GET" || method === "HEAD" || (method === "POST" && READ_KEY_POSTS.has(path))
export const readKeyRefusal = "This API key is read-only (scope read): it may call GET operations and POST /v1/tokens/verify; use a full key"

const CACHE_MS = 5_000
/** lastUsedAt is written when a key's stored value is at least this old, so never once per request */
const LAST_USED_EVERY_MS = 60_000
/** a key's prefix as lists show it */
export const KEY_PREFIX_LENGTH = 12

/** notified with a developer's id when the developer row or one of its keys changes (sql/0011, sql/0037) */
export const DEVELOPER_CHANGES = "developer_changes"
const CACHE_MAX = 10_000
/** sent on DEVELOPER_CHANGES to learn that the listener is in place (no developer id looks like it) */
const LISTENING_PROBE = "listening"

export interface ApiKeyService {
  readonly resolve: (apiKey: string) => Effect.Effect<ResolvedKey | undefined>
  /**
   * What `resolve` would answer without a query, when it can: a malformed key or one in the cache
   * (the lean path's fiberless admission); undefined when only the database can tell.
   */
  readonly known: (apiKey: string) => { readonly resolved: ResolvedKey | undefined } | undefined
  readonly forget: (developerId: string) => void
}

export class ApiKeys extends Context.Tag("agent-auth/ApiKeys")<ApiKeys, ApiKeyService>() {}

interface KeyRow extends Developer {
  readonly keyId: string
  readonly scope: KeyScope
  readonly prefix: string
  readonly expiresAt: Date | null
  readonly lastUsedAt: Date | null
}

export const ApiKeysLive = Layer.scoped(
  ApiKeys,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    // the service's clock (TestClock in tests): a rotated key's grace ends on it
    const clock = yield* Effect.clock
    const cache = new Map<string, { resolved: ResolvedKey | undefined; expiresAt: number | null; until: number }>()
    const KEY_FORMAT = /^sk_(live|test)_[A-Za-z0-9_-]{20,100}$/
    const NOT_A_KEY = { resolved: undefined }
    const cached = (hash: string) => {
      const hit = cache.get(hash)
      if (hit === undefined || hit.until <= Date.now()) return undefined
      return hit.expiresAt !== null && hit.expiresAt <= clock.unsafeCurrentTimeMillis() ? NOT_A_KEY : hit
    }
    const known = (apiKey: string) => (KEY_FORMAT.test(apiKey) ? cached(hashApiKey(apiKey)) : NOT_A_KEY)
    /** lastUsedAt at most once a minute per key, and the full prefix of a key moved from developers (sql/0037) */
    const noteUse = (apiKey: string, row: KeyRow, at: number) =>
      row.prefix.length >= KEY_PREFIX_LENGTH && row.lastUsedAt !== null && at - new Date(row.lastUsedAt).getTime() < LAST_USED_EVERY_MS
        ? Effect.void
        : sql`UPDATE api_keys SET last_used_at = ${new Date(at)}, prefix = ${apiKey.slice(0, KEY_PREFIX_LENGTH)}
              WHERE id = ${row.keyId} AND (last_used_at IS NULL OR last_used_at < ${new Date(at - LAST_USED_EVERY_MS)}
                OR length(prefix) < ${KEY_PREFIX_LENGTH})`.pipe(
            // a lost lastUsedAt is no reason to refuse the request it would record
            Effect.catchAll((e) => Effect.logWarning("API key lastUsedAt not written").pipe(Effect.annotateLogs({ error: e.message })))
          )
    const resolve = (apiKey: string): Effect.Effect<ResolvedKey | undefined> => {
      if (!KEY_FORMAT.test(apiKey)) return Effect.succeed(undefined)
      const hash = hashApiKey(apiKey)
      const hit = cached(hash)
      if (hit !== undefined) return Effect.succeed(hit.resolved)
      return Effect.gen(function*() {
        const [row] = yield* sql<KeyRow>`
          SELECT d.id, d.name, d.email, d.mode, d.plan, d.fido_required, d.created_at,
                 k.id AS key_id, k.scope, k.prefix, k.expires_at, k.last_used_at
          FROM api_keys k JOIN developers d ON d.id = k.developer_id WHERE k.key_hash = ${hash}`
        const at = clock.unsafeCurrentTimeMillis()
        const expiresAt = row?.expiresAt == null ? null : new Date(row.expiresAt).getTime()
        const resolved = row === undefined ? undefined : {
          developer: { id: row.id, name: row.name, email: row.email, mode: row.mode, plan: row.plan, fidoRequired: row.fidoRequired, createdAt: row.createdAt },
          key: { id: row.keyId, scope: row.scope }
        }
        if (cache.size >= CACHE_MAX) cache.clear()
        cache.set(hash, { resolved, expiresAt, until: Date.now() + CACHE_MS })
        if (row === undefined || (expiresAt !== null && expiresAt <= at)) return undefined
        yield* noteUse(apiKey, row, at)
        return resolved
      }).pipe(Effect.orDie)
    }
    const forget = (developerId: string) => {
      for (const [hash, entry] of cache) if (entry.resolved?.developer.id === developerId) cache.delete(hash)
    }
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    if (pg._tag === "Some" && !isEmbeddedDatabase(config.databaseUrl)) {
      const listening = yield* Deferred.make<void>()
      yield* pg.value.listen(DEVELOPER_CHANGES).pipe(
        Stream.runForEach((payload) =>
          payload === LISTENING_PROBE ? Deferred.succeed(listening, undefined) : Effect.sync(() => forget(payload))),
        // while the listener reconnects, entries fall back to expiring after CACHE_MS
        Effect.retry({ schedule: Schedule.spaced("1 second") }),
        Effect.catchAllCause(() => Effect.void),
        Effect.forkScoped
      )
      // The listener starts in its own fiber; the service serves (and caches keys) only once it
      // hears its own probe, so no key cached at start-up outlives a change made meanwhile. A
      // listener that cannot start within 5 s leaves the cache to its expiry, as a reconnect does.
      // (Real time here, not the service's Clock: tests hold that still while the service starts.)
      const realSleep = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))
      for (let probe = 0; probe < 50 && !(yield* Deferred.isDone(listening)); probe++) {
        yield* sql`SELECT pg_notify(${DEVELOPER_CHANGES}, ${LISTENING_PROBE})`.pipe(Effect.ignore)
        yield* Effect.raceFirst(Deferred.await(listening), realSleep(100))
      }
    }
    return { resolve, known, forget }
  })
)

/**
 * One request's record, made by the envelope: what the gate (RateLimit) learned about the caller,
 * handed to handlers without a second lookup, and the rate-limit headers the envelope adds to the
 * response. Filled in place, so the gate costs no fiber-ref update.
 */
export interface GateState {
  readonly requestId: string
  developer?: Developer
  /** the API key that authenticated the request (set with `developer`, except for SCIM tokens) */
  apiKey?: CallingKey
  grant?: GrantTokenClaims
  grantToken?: string
  /** the SCIM token that authenticated a /scim/v2 request (its developer is `developer`) */
  scimTokenId?: string
  rateHeaders?: Record<string, string>
  /** the gate found no route for the request (metrics label it `unmatched`) */
  unmatched?: boolean
  /** the matched route's template (`/v1/agents/:agentId`): the access log's and metrics' route label */
  route?: string
  /** the client address as the rate limiter sees it (after TRUST_PROXY), asked only by the access line */
  client?: () => string
}
export const CurrentGate = FiberRef.unsafeMake<GateState | undefined>(undefined)

export const currentRequestId = Effect.map(FiberRef.get(CurrentGate), (g) => g?.requestId ?? "unknown")

/**
 * Resolves a SCIM bearer token (decisions §11) to its token id and developer. Declared here so the
 * gate can authenticate /scim/v2 requests; implemented by the directory (src/directory/Tokens.ts).
 */
export interface ScimTokenResolverService {
  readonly resolve: (token: string) => Effect.Effect<{ readonly tokenId: string; readonly developer: Developer } | undefined>
}
export class ScimTokenResolver extends Context.Tag("agent-auth/ScimTokenResolver")<ScimTokenResolver, ScimTokenResolverService>() {}

/** Declares `Authorization: Bearer <API_KEY>` on an endpoint or group and provides CurrentDeveloper. */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("Authentication", {
  failure: Schema.Union(Unauthorized, InsufficientKeyScope),
  provides: CurrentDeveloper,
  security: { apiKey: HttpApiSecurity.bearer }
}) {}

export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    return {
      apiKey: (token: Redacted.Redacted<string>) =>
        Effect.flatMap(FiberRef.get(CurrentGate), (gate) => {
          // the gate authenticated the request and refused a read key what it may not call
          if (gate?.developer !== undefined) return Effect.succeed(gate.developer)
          // no gate (a benchmark without limits): the same two checks here
          return Effect.flatMap(keys.resolve(Redacted.value(token)), (resolved): Effect.Effect<Developer, Unauthorized | InsufficientKeyScope, HttpRouter.RouteContext> =>
            resolved === undefined
              ? Effect.fail(new Unauthorized({ message: "Invalid or missing API key" }))
              : resolved.key.scope === "full"
              ? Effect.succeed(resolved.developer)
              : Effect.flatMap(HttpRouter.RouteContext, ({ route }) =>
                readKeyMayCall(route.method, route.path)
                  ? Effect.succeed(resolved.developer)
                  : Effect.fail(new InsufficientKeyScope({ message: readKeyRefusal }))))
        })
    }
  })
)

/**
 * The key that authenticated the request (an API-key endpoint's handler): the gate's record, or
 * (without a gate) the request's bearer resolved again.
 */
export const callingKey: Effect.Effect<CallingKey, Unauthorized, ApiKeys | HttpServerRequest.HttpServerRequest> = Effect.gen(function*() {
  const gate = yield* FiberRef.get(CurrentGate)
  if (gate?.apiKey !== undefined) return gate.apiKey
  const request = yield* HttpServerRequest.HttpServerRequest
  const bearer = bearerOf(request.headers["authorization"])
  const resolved = bearer === undefined ? undefined : yield* Effect.flatMap(ApiKeys, (keys) => keys.resolve(bearer))
  if (resolved === undefined) return yield* Effect.fail(new Unauthorized({ message: "Invalid or missing API key" }))
  return resolved.key
})

/** The bearer credential of a request, if any. */
export const bearerOf = (authorization: string | undefined): string | undefined => {
  if (authorization === undefined) return undefined
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization)
  return match?.[1]
}

export const optionalDeveloper = Effect.map(FiberRef.get(CurrentGate), (g) => Option.fromNullable(g?.developer))
