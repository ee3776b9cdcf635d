/**
 * API-key authentication (decisions §2). Keys are stored only as SHA-256; a lookup is by hash.
 * Resolved keys are cached for a few seconds so the hot path does not pay a query per request.
 * A change to a developer (key rotation, plan, settings) drops its entries at once on this instance
 * and, through the notification a trigger on `developers` sends when the change commits
 * (sql/0011), on every other instance (LISTEN on DEVELOPER_CHANGES; embedded mode is a single
 * process). CACHE_MS bounds what a lost notification (a listener reconnecting) can leave behind.
 */
import { HttpApiMiddleware, HttpApiSecurity } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Context, Deferred, Effect, FiberRef, Layer, Option, Redacted, Schedule, Stream } from "effect"
import { Config } from "../Config.ts"
import { isEmbeddedDatabase } from "./Database.ts"
import { Unauthorized } from "./Errors.ts"
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

const CACHE_MS = 5_000

/** notified with a developer's id when the developer row changes (by the trigger of sql/0011) */
export const DEVELOPER_CHANGES = "developer_changes"
const CACHE_MAX = 10_000
/** sent on DEVELOPER_CHANGES to learn that the listener is in place (no developer id looks like it) */
const LISTENING_PROBE = "listening"

export interface ApiKeyService {
  readonly resolve: (apiKey: string) => Effect.Effect<Developer | undefined>
  /**
   * What `resolve` would answer without a query, when it can: a malformed key or one in the cache
   * (the lean path's fiberless admission); undefined when only the database can tell.
   */
  readonly known: (apiKey: string) => { readonly developer: Developer | undefined } | undefined
  readonly forget: (developerId: string) => void
}

export class ApiKeys extends Context.Tag("agent-auth/ApiKeys")<ApiKeys, ApiKeyService>() {}

export const ApiKeysLive = Layer.scoped(
  ApiKeys,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const cache = new Map<string, { developer: Developer | undefined; until: number }>()
    const KEY_FORMAT = /^sk_(live|test)_[A-Za-z0-9_-]{20,100}$/
    const cached = (hash: string) => {
      const hit = cache.get(hash)
      return hit !== undefined && hit.until > Date.now() ? hit : undefined
    }
    const NOT_A_KEY = { developer: undefined }
    const known = (apiKey: string) => (KEY_FORMAT.test(apiKey) ? cached(hashApiKey(apiKey)) : NOT_A_KEY)
    const resolve = (apiKey: string) => {
      if (!KEY_FORMAT.test(apiKey)) return Effect.succeed(undefined)
      const hash = hashApiKey(apiKey)
      const hit = cached(hash)
      if (hit !== undefined) return Effect.succeed(hit.developer)
      return sql<Developer>`SELECT id, name, email, mode, plan, fido_required, created_at FROM developers WHERE api_key_hash = ${hash}`.pipe(
        Effect.map((rows) => rows[0]),
        Effect.tap((developer) =>
          Effect.sync(() => {
            if (cache.size >= CACHE_MAX) cache.clear()
            cache.set(hash, { developer, until: Date.now() + CACHE_MS })
          })
        ),
        Effect.orDie
      )
    }
    const forget = (developerId: string) => {
      for (const [hash, entry] of cache) if (entry.developer?.id === developerId) cache.delete(hash)
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
  failure: Unauthorized,
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
          if (gate?.developer !== undefined) return Effect.succeed(gate.developer)
          return Effect.flatMap(keys.resolve(Redacted.value(token)), (developer) =>
            developer === undefined ? Effect.fail(new Unauthorized({ message: "Invalid or missing API key" })) : Effect.succeed(developer))
        })
    }
  })
)

/** The bearer credential of a request, if any. */
export const bearerOf = (authorization: string | undefined): string | undefined => {
  if (authorization === undefined) return undefined
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization)
  return match?.[1]
}

export const optionalDeveloper = Effect.map(FiberRef.get(CurrentGate), (g) => Option.fromNullable(g?.developer))
