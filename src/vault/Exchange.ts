/**
 * The grant-token exchange (interface: Credential vault; decisions §9): the token's claims and online
 * status, the body, the scope, the policy, then the credential, decrypted (or refreshed) only after
 * every check passed, and the audited event committed before the token is handed out. Separate from
 * Service.ts, which stores and lists credentials: this is the hot path agents call.
 */
import { Cause, Effect } from "effect"
import type { AnomalyCoreService } from "../anomalies/Core.ts"
import { agentIdOf, suspendedAgentToken, tokenStatusOf } from "../grants/Service.ts"
import type { AuditedEvent, AuditedEventsService } from "../platform/AuditedEvents.ts"
import { BadRequest, Forbidden, NotFound, Unauthorized } from "../platform/Errors.ts"
import type { MetricsService } from "../platform/Metrics.ts"
import { iso, nowMillis } from "../platform/Time.ts"
import type { GateService } from "../gate/Gate.ts"
import { makeCoalescer } from "../platform/Coalesce.ts"
import type { makeRefresh } from "./Refresh.ts"
import type { ExchangeKey, makeRepo } from "./Repo.ts"
import type { VaultService } from "./Types.ts"

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

/** The scopes that let a grant token exchange the credential of `service`, any one of them (interface rule 2: exactly these). */
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

/** The exchange, built once per service from its dependencies and the refresher (its batches and coalescers live in it). */
export const makeExchange = (deps: {
  readonly repo: ReturnType<typeof makeRepo>
  readonly metrics: MetricsService
  readonly anomalies: AnomalyCoreService
  readonly audited: AuditedEventsService
  readonly gate: GateService
} & ReturnType<typeof makeRefresh>): VaultService["exchange"] => {
  const { repo, metrics, anomalies, audited, gate, decrypt, isExpired, isRefreshable, refreshOnce } = deps

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
        Effect.sync(() => metrics.inc("vault_exchanges_total", { outcome: exit._tag === "Success" ? "exchanged" : exchangeFailure(exit.cause) }))
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
      // decisions §14: a suspended agent's token (AD-008) is an alert (the gate's step 1 is this online status, §20)
      if (status === "revoked" && suspendedAgentToken(claims, found.token)) {
        yield* anomalies.suspendedAgentUse(claims.dev, agentIdOf(claims.agt) ?? "", claims.grnt, "vault exchange")
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
      // decisions §20: the principal active, policies (§13 revised: whenever one could apply, a deny → 403
      // FORBIDDEN), the network sighting (AD-003); developers with neither rules nor a Cedar set pay an in-memory lookup
      yield* gate.checkUse("vault.exchange", {
        developerId: claims.dev,
        agentId: agentIdOf(claims.agt) ?? "",
        principalId: claims.sub,
        scopes: claims.scp,
        grant: { id: claims.grnt, delegationDepth: claims.delegationDepth ?? 0, parentGrantId: claims.parentGrnt ?? null },
        principalInactive: found.principalInactive
      }).pipe(Effect.catchTag("PolicyDenied", (denied) => Effect.fail(new Forbidden({ message: denied.message }))))
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

  return exchange
}
