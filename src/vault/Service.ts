/**
 * The credential vault: store (upsert per developer, principal and service), list, get, delete, and
 * the grant-token exchange that returns a decrypted upstream access token (interface: Credential
 * vault; decisions §9). Tokens and secrets never leave this module except in the exchange answer,
 * and are never logged.
 */
import { optionalCore } from "../anomalies/Core.ts"
import { SqlClient } from "@effect/sql"
import { Cause, Context, Deferred, Effect, FiberId, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { isIP } from "node:net"
import { Config } from "../Config.ts"
import { agentIdOf, suspendedAgentToken, tokenStatusOf } from "../grants/Service.ts"
import { type AuditedEvent, AuditedEvents } from "../platform/AuditedEvents.ts"
import { BadRequest, CredentialUnreadable, Forbidden, NotFound, Unauthorized, UpstreamRefreshFailed } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import { Metrics } from "../platform/Metrics.ts"
import type { GrantTokenClaims } from "../platform/Keys.ts"
import { decodeCursor, pageLimit, toPage } from "../platform/Pagination.ts"
import { iso, nowMillis } from "../platform/Time.ts"
import { PolicyEngine } from "../policies/Service.ts"
import { type StoreCredential } from "./Api.ts"
import { type Keyring, openSecrets, type SealContext, sealSecrets, type Secrets, VaultKeys, VaultKeysLive } from "./Crypto.ts"
import { requestPinned, resolvePublic } from "../platform/Outbound.ts"
import { makeCoalescer } from "./Coalesce.ts"
import { type CredentialRow, type ExchangeKey, makeRepo } from "./Repo.ts"

export const credentialView = (row: CredentialRow) => ({
  id: row.id,
  principalId: row.principalId,
  service: row.service,
  credentialType: row.credentialType,
  tokenExpiresAt: iso(row.tokenExpiresAt),
  metadata: row.metadata ?? {},
  hasRefreshToken: row.hasRefreshToken,
  tokenEndpoint: row.tokenEndpoint,
  refreshedAt: iso(row.refreshedAt),
  createdAt: iso(row.createdAt)!,
  updatedAt: iso(row.updatedAt)!
})
export type CredentialView = ReturnType<typeof credentialView>

export interface VaultCredentialOut {
  readonly accessToken: string
  readonly service: string
  readonly credentialType: string
  readonly tokenExpiresAt: string | null
  readonly metadata: Record<string, unknown>
}

/** Interface rule 2: the accepted credential scopes for a service, exactly. */
/** An exchange's failed outcome, as the label of agent_auth_vault_exchanges_total (a fixed small set). */
const exchangeFailure = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  const tag = failure._tag === "Some" ? (failure.value as { _tag?: string })._tag : undefined
  switch (tag) {
    case "Unauthorized": return "unauthorized"
    case "Forbidden": return "forbidden"
    case "NotFound": return "not_found"
    case "BadRequest": return "bad_request"
    default: return "error"
  }
}

/** The scopes that let a grant token exchange the credential of `service`, any one of them. */
export const acceptedScopes = (service: string): ReadonlyArray<string> => [
  `${service}:read`, `${service}:credentials:read`, `${service}:*`, `vault:${service}:read`, `vault:${service}:*`,
  "vault:credentials:exchange", "*"
]

export const scopeAllows = (scopes: ReadonlyArray<string>, service: string): boolean => {
  const accepted = acceptedScopes(service)
  return scopes.some((s) => accepted.includes(s))
}

/** The 403 of an exchange: which scope forms would have allowed it (a long name is not echoed). */
const noScopeMessage = (service: string) => {
  const name = service.length <= 100 ? service : "<service>"
  return `The grant token has no credential scope for service ${JSON.stringify(name)}; ` +
    `a grant with any one of these scopes may exchange it: ${acceptedScopes(name).join(", ")}`
}

/** The `service` of an exchange body, read leniently: undefined when missing, empty or not a string. */
export const exchangeService = (rawBody: string): string | undefined => {
  try {
    const body = JSON.parse(rawBody)
    const service = body !== null && typeof body === "object" && !Array.isArray(body) ? body.service : undefined
    return typeof service === "string" && service.trim() !== "" ? service : undefined
  } catch {
    return undefined
  }
}

/** the shape of a stored service name (Api.ts ServiceName) */
const STORABLE_SERVICE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/

const sealContext = (row: { id: string; developerId: string; principalId: string; service: string }): SealContext => ({
  id: row.id,
  developerId: row.developerId,
  principalId: row.principalId,
  service: row.service
})

const PRIVATE_V4 = [/^10\./, /^127\./, /^169\.254\./, /^192\.168\./, /^172\.(1[6-9]|2\d|3[01])\./, /^0\./, /^100\.(6[4-9]|[7-9]\d|1[01]\d|12[0-7])\./]
const isPrivateHost = (host: string) => {
  // (a trailing dot names the same host: "localhost." is localhost)
  const h = host.replace(/^\[|\]$/g, "").replace(/\.$/, "").toLowerCase()
  if (h === "localhost" || h.endsWith(".localhost") || h.endsWith(".internal") || h.endsWith(".local")) return true
  const family = isIP(h)
  if (family === 4) return PRIVATE_V4.some((r) => r.test(h))
  if (family === 6) return h === "::1" || h === "::" || h.startsWith("fc") || h.startsWith("fd") || h.startsWith("fe80") || h.startsWith("::ffff:")
  return false
}

/** The upstream token endpoint: https (http and private hosts only with WEBHOOK_ALLOW_PRIVATE_HOSTS). */
const checkTokenEndpoint = (raw: string, allowPrivate: boolean): string | BadRequest => {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return new BadRequest({ message: "tokenEndpoint must be an absolute URL", details: [{ path: "tokenEndpoint", message: "must be an absolute URL" }] })
  }
  if (url.username !== "" || url.password !== "") {
    return new BadRequest({ message: "tokenEndpoint must not carry credentials", details: [{ path: "tokenEndpoint", message: "must not carry credentials" }] })
  }
  if (!(url.protocol === "https:" || (allowPrivate && url.protocol === "http:"))) {
    return new BadRequest({ message: "tokenEndpoint must use https", details: [{ path: "tokenEndpoint", message: "must use https" }] })
  }
  if (!allowPrivate && isPrivateHost(url.hostname)) {
    return new BadRequest({ message: "tokenEndpoint must be a public host", details: [{ path: "tokenEndpoint", message: "must be a public host" }] })
  }
  return url.toString()
}

export const REFRESH_TIMEOUT_MS = 10_000
/** a refresh lease outlives the upstream call's timeout, so only a crashed refresher's lease runs out */
const REFRESH_LEASE_MS = REFRESH_TIMEOUT_MS + 5_000
const LEASE_POLL = "100 millis"

interface RefreshAnswer {
  readonly accessToken: string
  readonly refreshToken: string | undefined
  readonly expiresIn: number | undefined
}

/** the most of an upstream answer read (a token response is a few hundred bytes) */
const MAX_UPSTREAM_ANSWER_BYTES = 64 * 1024

/**
 * POSTs the refresh form. Outside WEBHOOK_ALLOW_PRIVATE_HOSTS the rule of webhook receivers
 * (decisions §7) holds here too: every address the host resolves to must be public, and the
 * connection goes to the address checked, so a host stored while it looked public cannot be made
 * to point into the private network later (or by a second DNS answer).
 */
const postForm = async (
  endpoint: string,
  form: string,
  headers: Record<string, string>,
  allowPrivate: boolean,
  signal: AbortSignal
): Promise<{ status: number; text: string }> => {
  if (allowPrivate) {
    const response = await fetch(endpoint, { method: "POST", headers, body: form, redirect: "error", signal })
    return { status: response.status, text: await response.text() }
  }
  const target = new URL(endpoint)
  if (target.protocol !== "https:") throw new RefreshFailure("token endpoint must use https")
  const timedOut = new Promise<never>((_, reject) =>
    signal.addEventListener("abort", () => reject(Object.assign(new Error("timed out"), { name: "TimeoutError" })), { once: true })
  )
  const resolved = await Promise.race([resolvePublic(target.hostname), timedOut])
  if (!resolved.ok) throw new RefreshFailure(`token endpoint: ${resolved.reason}`)
  return requestPinned(target, resolved.address, form, headers, { timeoutMs: REFRESH_TIMEOUT_MS, signal, maxBodyBytes: MAX_UPSTREAM_ANSWER_BYTES })
}

/**
 * OAuth 2.0 refresh_token grant (RFC 6749 §6): form POST, client authentication with HTTP Basic
 * when a secret is stored (client_id in the body when only an id is). The failure reason names the
 * status and the OAuth `error` code only, never a body that might echo a secret.
 */
const callTokenEndpoint = (endpoint: string, secrets: Secrets, allowPrivate: boolean): Effect.Effect<RefreshAnswer, UpstreamRefreshFailed> =>
  Effect.tryPromise({
    try: async (signal) => {
      const form = new URLSearchParams({ grant_type: "refresh_token", refresh_token: secrets.refreshToken ?? "" })
      const headers: Record<string, string> = {
        "content-type": "application/x-www-form-urlencoded",
        accept: "application/json"
      }
      if (secrets.clientId && secrets.clientSecret) {
        const enc = (s: string) => encodeURIComponent(s)
        headers.authorization = `Basic ${Buffer.from(`${enc(secrets.clientId)}:${enc(secrets.clientSecret)}`).toString("base64")}`
      } else if (secrets.clientId) {
        form.set("client_id", secrets.clientId)
      }
      const { status, text } = await postForm(
        endpoint,
        form.toString(),
        headers,
        allowPrivate,
        AbortSignal.any([signal, AbortSignal.timeout(REFRESH_TIMEOUT_MS)])
      )
      let body: any
      try {
        body = JSON.parse(text)
      } catch {
        body = undefined
      }
      if (status < 200 || status > 299) {
        const code = typeof body?.error === "string" && /^[A-Za-z0-9_.-]{1,64}$/.test(body.error) ? ` ${body.error}` : ""
        throw new RefreshFailure(`upstream answered HTTP ${status}${code}`)
      }
      if (typeof body?.access_token !== "string" || body.access_token === "") {
        throw new RefreshFailure("upstream answer has no access_token")
      }
      const expiresIn = typeof body.expires_in === "number" ? body.expires_in
        : typeof body.expires_in === "string" && /^\d+$/.test(body.expires_in) ? Number(body.expires_in)
        : undefined
      return {
        accessToken: body.access_token as string,
        refreshToken: typeof body.refresh_token === "string" && body.refresh_token !== "" ? body.refresh_token : undefined,
        expiresIn: expiresIn !== undefined && Number.isFinite(expiresIn) && expiresIn >= 0 ? expiresIn : undefined
      }
    },
    catch: (e) => {
      const reason = e instanceof RefreshFailure
        ? e.message
        : (e as { name?: string })?.name === "TimeoutError"
        ? `upstream did not answer within ${REFRESH_TIMEOUT_MS / 1000} s`
        : "upstream could not be reached"
      return new UpstreamRefreshFailed({ message: `Refreshing the upstream access token failed: ${reason}` })
    }
  })

class RefreshFailure extends Error {}

export interface VaultService {
  readonly store: (developerId: string, input: StoreCredential) => Effect.Effect<CredentialView, BadRequest>
  readonly list: (
    developerId: string,
    query: { principalId?: string; service?: string; cursor?: string; limit?: string }
  ) => Effect.Effect<{ credentials: Array<CredentialView>; nextCursor: string | null }, BadRequest>
  readonly get: (developerId: string, id: string) => Effect.Effect<CredentialView, NotFound>
  readonly remove: (developerId: string, id: string) => Effect.Effect<void, NotFound>
  /** the exchange, given the claims the gate verified and the raw request body */
  readonly exchange: (
    claims: GrantTokenClaims | undefined,
    rawBody: string
  ) => Effect.Effect<VaultCredentialOut, Unauthorized | BadRequest | Forbidden | NotFound | UpstreamRefreshFailed | CredentialUnreadable>
}

export class Vault extends Context.Tag("agent-auth/Vault")<Vault, VaultService>() {}

const notFound = () => new NotFound({ message: "Credential not found" })

export const VaultServiceLive = Layer.effect(
  Vault,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const metrics = Option.getOrUndefined(yield* Effect.serviceOption(Metrics))
    const anomalies = yield* optionalCore // decisions §14: inline rules
    const ring: Keyring = yield* VaultKeys
    const audited = yield* AuditedEvents
    const policyEngine = yield* PolicyEngine
    const repo = makeRepo(sql)

    const store: VaultService["store"] = (developerId, input) =>
      Effect.gen(function*() {
        let tokenEndpoint: string | null = null
        if (input.tokenEndpoint !== undefined && input.tokenEndpoint !== null) {
          const checked = checkTokenEndpoint(input.tokenEndpoint, config.webhooks.allowPrivateHosts)
          if (typeof checked !== "string") return yield* Effect.fail(checked)
          tokenEndpoint = checked
        }
        if (input.clientSecret && !input.clientId) {
          return yield* Effect.fail(new BadRequest({ message: "clientSecret needs clientId", details: [{ path: "clientId", message: "is required with clientSecret" }] }))
        }
        const secrets: Secrets = {
          accessToken: input.accessToken,
          refreshToken: input.refreshToken ?? null,
          clientId: input.clientId ?? null,
          clientSecret: input.clientSecret ?? null
        }
        const fields = (id: string) => ({
          credentialType: input.credentialType ?? "oauth2",
          tokenExpiresAt: input.tokenExpiresAt ? new Date(input.tokenExpiresAt) : null,
          metadata: input.metadata ?? {},
          tokenEndpoint,
          hasRefreshToken: !!input.refreshToken,
          sealed: sealSecrets(ring, { id, developerId, principalId: input.principalId, service: input.service }, secrets)
        })
        const row = yield* sql.withTransaction(Effect.gen(function*() {
          // Upsert keeping the row's id (the ciphertext is bound to it): lock the existing row, or
          // insert; a concurrent insert of the same triple makes us retry as an update.
          for (let attempt = 0; attempt < 5; attempt++) {
            const ms = yield* nowMillis
            const at = new Date(ms)
            const existing = yield* repo.findByTriple(developerId, input.principalId, input.service, true)
            if (existing !== undefined) return (yield* repo.replace(existing.id, at, fields(existing.id)))!
            const id = newId("vcred", ms)
            const inserted = yield* repo.insert({ id, developerId, principalId: input.principalId, service: input.service, at, ...fields(id) })
            if (inserted !== undefined) return inserted
          }
          return yield* Effect.dieMessage("vault upsert did not settle")
        })).pipe(Effect.orDie)
        yield* Effect.logDebug("vault credential stored").pipe(
          Effect.annotateLogs({ credentialId: row.id, developerId, service: row.service })
        )
        return credentialView(row)
      })

    const list: VaultService["list"] = (developerId, query) =>
      Effect.gen(function*() {
        const limit = pageLimit(query.limit)
        if (limit === undefined) {
          return yield* Effect.fail(new BadRequest({ message: "limit must be an integer from 1 to 100", details: [{ path: "limit", message: "must be an integer from 1 to 100" }] }))
        }
        const after = decodeCursor(query.cursor)
        if (after === null) {
          return yield* Effect.fail(new BadRequest({ message: "cursor is malformed", details: [{ path: "cursor", message: "is malformed" }] }))
        }
        const rows = yield* repo.list(
          developerId,
          { principalId: query.principalId || undefined, service: query.service || undefined },
          after,
          limit + 1
        ).pipe(Effect.orDie)
        const { page, nextCursor } = toPage(rows, limit)
        return { credentials: page.map(credentialView), nextCursor }
      })

    const get: VaultService["get"] = (developerId, id) =>
      Effect.flatMap(repo.get(developerId, id).pipe(Effect.orDie), (row) =>
        row === undefined ? Effect.fail(notFound()) : Effect.succeed(credentialView(row)))

    const remove: VaultService["remove"] = (developerId, id) =>
      Effect.flatMap(repo.remove(developerId, id).pipe(Effect.orDie), (deleted) =>
        deleted
          ? Effect.logDebug("vault credential deleted").pipe(Effect.annotateLogs({ credentialId: id, developerId }))
          : Effect.fail(notFound()))

    const unreadable = (row: CredentialRow, reason: string) =>
      Effect.logError("vault credential cannot be decrypted").pipe(
        Effect.annotateLogs({ credentialId: row.id, developerId: row.developerId, keyId: row.keyId, reason }),
        Effect.zipRight(Effect.fail(new CredentialUnreadable({
          code: "CREDENTIAL_UNREADABLE",
          message: "The stored credential cannot be decrypted; store it again"
        })))
      )

    const decrypt = (row: CredentialRow) =>
      openSecrets(ring, sealContext(row), row).pipe(Effect.catchTag("VaultDecryptError", (e) => unreadable(row, e.reason)))

    const isExpired = (row: CredentialRow, ms: number) => row.tokenExpiresAt !== null && row.tokenExpiresAt.getTime() <= ms
    const isRefreshable = (row: CredentialRow) => row.hasRefreshToken && row.tokenEndpoint !== null

    /**
     * Refreshes under a lease (decisions §9; sql/0010): the exchange that claims it calls the token
     * endpoint holding no database connection (a slow upstream must not tie up the pool, nor the one
     * embedded connection), then stores the answer while its lease stands; a failure gives the lease
     * back and keeps the old row. An exchange that finds another's live lease (another instance)
     * looks again every LEASE_POLL until that refresh is stored or the lease runs out. So concurrent
     * exchanges on any number of instances cause one upstream call.
     */
    const refreshUnderLease = (developerId: string, id: string): Effect.Effect<
      { row: CredentialRow; secrets: Secrets; refreshed: boolean },
      NotFound | UpstreamRefreshFailed | CredentialUnreadable
    > =>
      Effect.gen(function*() {
        for (;;) {
          const ms = yield* nowMillis
          const lease = randomUUID()
          const claimed = yield* repo.claimRefresh(developerId, id, new Date(ms), lease, new Date(ms + REFRESH_LEASE_MS))
          if (claimed === undefined) {
            const row = yield* repo.get(developerId, id)
            if (row === undefined) return yield* Effect.fail(notFound())
            if (!isExpired(row, ms) || !isRefreshable(row)) return { row, secrets: yield* decrypt(row), refreshed: false }
            yield* Effect.sleep(LEASE_POLL)
            continue
          }
          const secrets = yield* decrypt(claimed).pipe(Effect.tapError(() => repo.releaseRefresh(id, lease)))
          const answer = yield* callTokenEndpoint(claimed.tokenEndpoint!, secrets, config.webhooks.allowPrivateHosts).pipe(
            Effect.tapError((e) =>
              Effect.zipRight(
                repo.releaseRefresh(id, lease),
                Effect.logWarning("vault upstream refresh failed").pipe(
                  Effect.annotateLogs({ credentialId: id, developerId, service: claimed.service, reason: e.message })
                )
              )
            )
          )
          const after = yield* nowMillis
          const fresh: Secrets = { ...secrets, accessToken: answer.accessToken, refreshToken: answer.refreshToken ?? secrets.refreshToken }
          const expiresAt = answer.expiresIn === undefined ? null : new Date(after + answer.expiresIn * 1000)
          const stored = yield* repo.refreshed(id, lease, new Date(after), expiresAt, !!fresh.refreshToken, sealSecrets(ring, sealContext(claimed), fresh))
          if (stored === undefined) {
            // The row was replaced or deleted meanwhile (or the lease ran out): the caller still gets
            // the token it was fetched for; the row keeps what was written after.
            yield* Effect.logWarning("vault upstream refresh not stored: the credential changed meanwhile").pipe(
              Effect.annotateLogs({ credentialId: id, developerId, service: claimed.service })
            )
            const at = new Date(after)
            return { row: { ...claimed, tokenExpiresAt: expiresAt, refreshedAt: at, updatedAt: at }, secrets: fresh, refreshed: true }
          }
          yield* Effect.logInfo("vault upstream token refreshed").pipe(
            Effect.annotateLogs({ credentialId: id, developerId, service: claimed.service })
          )
          return { row: stored, secrets: fresh, refreshed: true }
        }
      }).pipe(Effect.catchTag("SqlError", Effect.die))

    type RefreshResult = Effect.Effect.Success<ReturnType<typeof refreshUnderLease>>
    type RefreshError = Effect.Effect.Error<ReturnType<typeof refreshUnderLease>>
    /** one refresh in flight per credential on this instance; the others wait for its outcome */
    const inflight = new Map<string, Deferred.Deferred<RefreshResult, RefreshError>>()
    const refreshOnce = (developerId: string, id: string) =>
      Effect.suspend(() => {
        const pending = inflight.get(id)
        if (pending !== undefined) return Deferred.await(pending)
        const deferred = Deferred.unsafeMake<RefreshResult, RefreshError>(FiberId.none)
        inflight.set(id, deferred)
        // A daemon, so a caller that goes away does not cancel the refresh the others wait for.
        return Effect.forkDaemon(
          refreshUnderLease(developerId, id).pipe(
            Effect.exit,
            Effect.flatMap((exit) => Deferred.done(deferred, exit)),
            Effect.ensuring(Effect.sync(() => inflight.delete(id)))
          )
        ).pipe(Effect.zipRight(Deferred.await(deferred)))
      })

    /**
     * The event and audit-chain entry of each exchange are committed before the token is handed
     * out. Exchanges that finish while a commit is under way are written together in the next one
     * (group commit): one statement per developer per batch (see AuditedEvents), so a busy
     * developer's exchanges do not queue one commit at a time on the chain head.
     */
    const record = makeCoalescer(
      (batch: ReadonlyArray<AuditedEvent>) => Effect.as(audited.recordMany(batch), batch.map(() => undefined))
    )

    /** the exchange's online token check and credential lookup: one statement, batched with the concurrent ones */
    const read = makeCoalescer((keys: ReadonlyArray<ExchangeKey>) => repo.findForExchange(keys).pipe(Effect.orDie), { parallel: 2 })

    const exchange: VaultService["exchange"] = (claims, rawBody) =>
      exchangeOnce(claims, rawBody).pipe(
        Effect.onExit((exit) =>
          Effect.sync(() => metrics?.inc("vault_exchanges_total", { outcome: exit._tag === "Success" ? "exchanged" : exchangeFailure(exit.cause) }))
        )
      )

    const exchangeOnce: VaultService["exchange"] = (claims, rawBody) =>
      Effect.gen(function*() {
        const startedMs = yield* nowMillis
        // 1. The token: the gate verified signature, iss and exp; enforce the claims, then the grant online.
        if (
          claims === undefined || typeof claims.sub !== "string" || claims.sub === "" || typeof claims.dev !== "string" ||
          claims.dev === "" || !Array.isArray(claims.scp) || typeof claims.grnt !== "string" || typeof claims.jti !== "string"
        ) {
          return yield* Effect.fail(new Unauthorized({ message: "Grant token missing, invalid or expired" }))
        }
        const service = exchangeService(rawBody)
        // The online status and the row are read together; nothing is decided before both checks pass in order.
        const found = yield* read({
          grnt: claims.grnt,
          jti: claims.jti,
          developerId: claims.dev,
          principalId: claims.sub,
          // a service no credential can have (e.g. a NUL character) is never sent to the database, so it
          // cannot fail the batch of lookups it would share with other requests
          service: service === undefined || !STORABLE_SERVICE.test(service) ? null : service
        })
        const status = tokenStatusOf(claims, found.token, startedMs)
        const row = found.credential
        // decisions §14: a suspended agent's token (AD-008) is an alert; a used token marks its network (AD-003)
        if (anomalies !== undefined) {
          if (status === "revoked" && suspendedAgentToken(claims, found.token)) {
            yield* anomalies.suspendedAgentUse(claims.dev, agentIdOf(claims.agt) ?? "", claims.grnt, "vault exchange")
          } else if (status === "active") yield* anomalies.tokenUsed(claims.dev, agentIdOf(claims.agt) ?? "")
        }
        if (status !== "active") {
          return yield* Effect.fail(new Unauthorized({ message: status === "revoked" ? "Grant or grant token has been revoked, or its agent suspended" : "Grant token missing, invalid or expired" }))
        }
        // 2. The body.
        if (service === undefined) {
          return yield* Effect.fail(new BadRequest({ message: "service is required", details: [{ path: "service", message: "is required" }] }))
        }
        // 3. The scope.
        if (!scopeAllows(claims.scp, service)) {
          return yield* Effect.fail(new Forbidden({ message: noScopeMessage(service) }))
        }
        // decisions §13: evaluated only for developers with a policy naming vault.exchange (an in-memory flag), deny → 403
        if (policyEngine.namesAction(claims.dev, "vault.exchange")) {
          yield* policyEngine.guard("vault.exchange", {
            developerId: claims.dev,
            agentId: agentIdOf(claims.agt) ?? "",
            principalId: claims.sub,
            scopes: claims.scp,
            grant: { id: claims.grnt, delegationDepth: claims.delegationDepth ?? 0, parentGrantId: claims.parentGrnt ?? null }
          }).pipe(Effect.mapError((denied) => new Forbidden({ message: denied.message })))
        }
        // 4. The credential.
        if (row === undefined) {
          return yield* Effect.fail(new NotFound({ message: "No credential for this principal and service" }))
        }
        // Only now is anything decrypted (or refreshed upstream).
        const ms = yield* nowMillis
        const outcome = isExpired(row, ms) && isRefreshable(row)
          ? yield* refreshOnce(row.developerId, row.id)
          : { row, secrets: yield* decrypt(row), refreshed: false }
        const { row: current, secrets } = outcome
        // An exchange that waited for another's refresh (on this instance or behind the row lock of
        // another) hands out the token that refresh fetched while it was being served: it reports it.
        const refreshed = outcome.refreshed || (current.refreshedAt !== null && current.refreshedAt.getTime() >= startedMs)
        const agentId = agentIdOf(claims.agt)
        const data = {
          credentialId: current.id,
          service: current.service,
          principalId: current.principalId,
          grantId: claims.grnt,
          agentId,
          tokenId: claims.jti,
          refreshed
        }
        yield* record({
          developerId: claims.dev,
          type: "vault.credential.exchanged",
          data,
          audit: {
            action: "service.vault.credential_exchanged",
            agentId,
            agentDid: claims.agt ?? null,
            grantId: claims.grnt,
            principalId: claims.sub,
            metadata: { credentialId: current.id, service: current.service, tokenId: claims.jti, refreshed }
          }
        })
        // (the level is checked first: annotating costs a fiber-ref update per exchange even when nothing is logged)
        yield* Effect.logDebug("vault credential exchanged").pipe(
          Effect.annotateLogs({ credentialId: current.id, developerId: claims.dev, service: current.service, grantId: claims.grnt, refreshed }),
          Effect.whenLogLevel("Debug")
        )
        return {
          accessToken: secrets.accessToken,
          service: current.service,
          credentialType: current.credentialType,
          tokenExpiresAt: iso(current.tokenExpiresAt),
          metadata: current.metadata ?? {}
        }
      })

    return { store, list, get, remove, exchange }
  })
)

/** The capability's services, provided to its handlers and to other capabilities. */
export const VaultLive = VaultServiceLive.pipe(Layer.provideMerge(VaultKeysLive))
