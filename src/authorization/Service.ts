/**
 * Authorization (decisions §3): an agent's backend asks for a person's consent (POST /v1/authorize),
 * the person approves or denies on the consent page (or with a passkey), approval creates the grant
 * and a single-use code, and the code (then refresh tokens) are exchanged for grant tokens.
 *
 * Codes and refresh tokens are random 32-byte secrets stored only as SHA-256. Presenting a used
 * code or refresh token again revokes the grant: whoever holds a copy loses it too.
 *
 * This file holds the service's shape and the request side (authorize, consent, approve, deny); the
 * code and refresh exchanges are Tokens.ts, the shared row and lookups Lookups.ts.
 */
import { optionalCore } from "../anomalies/Core.ts"
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import { Agents, AgentsLive } from "../agents/Service.ts"
import { Entitlements } from "../billing/Entitlements.ts"
import { Config } from "../Config.ts"
import { DirectoryPrincipals, DirectoryPrincipalsLive } from "../directory/Principals.ts"
import { redirectUriProblem } from "../agents/RedirectUri.ts"
import { Credentials } from "../credentials/Service.ts"
import { Grants, GrantsLive, MAX_GRANT_TTL_SECONDS } from "../grants/Service.ts"
import type { Developer } from "../platform/Auth.ts"
import {
  AgentNotFound, AgentSuspended, BadRequest, FidoRequired, type Forbidden, Gone, type InvalidGrant, InvalidRedirectUri, InvalidScopes, NotFound, type PolicyDenied,
  type PlanLimitExceeded, type PrincipalInactive, type PrincipalMismatch, type QuotaExceeded
} from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { Metrics } from "../platform/Metrics.ts"
import { nowMillis, parseDuration } from "../platform/Time.ts"
import { PolicyEngine } from "../policies/Service.ts"
import { agentSuspended, type AuthRequestRecord, makeLookups, REQUEST_COLUMNS, secret } from "./Lookups.ts"
import { describeScope } from "./Scopes.ts"
import { ssoBinding, type SsoApproval } from "./SsoBinding.ts"
import { makeTokens } from "./Tokens.ts"
import { sha256Hex } from "../platform/Hash.ts"

export type { SsoApproval } from "./SsoBinding.ts"
export type { AuthRequestRecord } from "./Lookups.ts"
export { ACCESS_TOKEN_TTL_MS } from "./Tokens.ts"

/** An authorization request waits this long for the person. */
export const REQUEST_TTL_MS = 10 * 60 * 1000
/** A code must be exchanged within this time. */
export const CODE_TTL_MS = 10 * 60 * 1000

export interface AuthorizeInput {
  readonly agentId: string
  readonly principalId: string
  readonly scopes: ReadonlyArray<string>
  readonly expiresIn?: string
  readonly redirectUri?: string
  readonly state?: string
  readonly audience?: string
  readonly codeChallenge?: string
  readonly codeChallengeMethod?: string
}

export interface ConsentView {
  readonly id: string
  readonly agentName: string
  readonly agentDid: string
  readonly agentDescription: string | null
  readonly scopes: ReadonlyArray<string>
  readonly scopeDescriptions: Record<string, string>
  readonly expiresAt: string
  readonly status: "pending" | "approved" | "denied" | "expired"
  readonly fidoRequired: boolean
  readonly redirectUri: string | null
  readonly principalId: string
  readonly developerId: string
  /** who asks: the developer's account name (the consent page names them) */
  readonly developerName: string
  /** how long access lasts once approved */
  readonly grantTtlSeconds: number
}

export interface Approval {
  readonly code: string
  readonly grantId: string
  readonly redirectUri: string | null
  readonly state: string | null
}

export interface TokenResponse {
  readonly grantToken: string
  readonly expiresAt: string
  readonly scopes: ReadonlyArray<string>
  readonly refreshToken: string
  readonly grantId: string
  readonly verifiableCredential?: string
  readonly sdJwtCredential?: string
}

export interface AuthorizationService {
  readonly authorize: (developer: Developer, input: AuthorizeInput) => Effect.Effect<
    {
      authRequestId: string; consentUrl: string; expiresAt: string; sandbox?: true; code?: string
      policyEnforced?: true; effect?: "allow"; policyId?: string
    },
    BadRequest | InvalidRedirectUri | AgentNotFound | InvalidScopes | AgentSuspended | PrincipalInactive | PolicyDenied | QuotaExceeded | PlanLimitExceeded
  >
  /** the consent page's view of a request; NotFound when unknown */
  readonly consent: (authRequestId: string) => Effect.Effect<ConsentView, NotFound>
  readonly getPendingRequest: (authRequestId: string) => Effect.Effect<
    { id: string; developerId: string; agentId: string; principalId: string; scopes: ReadonlyArray<string>; expiresAt: Date } | undefined
  >
  /** approve a pending request: the grant, its grant.created event and a single-use code, in one transaction */
  readonly approveRequest: (
    authRequestId: string,
    options: { readonly fidoVerified: boolean; readonly sso?: SsoApproval | undefined }
  ) => Effect.Effect<Approval, Gone | NotFound | AgentSuspended | FidoRequired | PrincipalInactive | PrincipalMismatch | Forbidden>
  readonly denyRequest: (authRequestId: string) => Effect.Effect<{ redirectUri: string | null; state: string | null }, Gone | NotFound>
  readonly exchangeCode: (
    developer: Developer,
    input: { code: string; agentId: string; codeVerifier?: string; credentialFormat?: string; holderKey?: unknown }
  ) => Effect.Effect<TokenResponse, InvalidGrant | AgentSuspended | BadRequest | QuotaExceeded>
  readonly refresh: (developer: Developer, input: { refreshToken: string; agentId: string }) => Effect.Effect<TokenResponse, InvalidGrant | AgentSuspended>
  /** denies every pending request of a principal (SCIM deprovisioning), in the caller's transaction; their ids */
  readonly denyPendingForPrincipal: (developerId: string, principalId: string) => Effect.Effect<ReadonlyArray<string>>
}

export class Authorization extends Context.Tag("agent-auth/Authorization")<Authorization, AuthorizationService>() {}

const invalidRedirect = (message: string) => new InvalidRedirectUri({ message: message })

export const AuthorizationServiceLive = Layer.effect(
  Authorization,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const metrics = Option.getOrUndefined(yield* Effect.serviceOption(Metrics))
    const anomalies = yield* optionalCore // decisions §14: inline rules
    const agents = yield* Agents
    const grants = yield* Grants
    const events = yield* Events
    const principals = yield* DirectoryPrincipals
    const credentials = yield* Credentials
    const policyEngine = yield* PolicyEngine
    const entitlements = yield* Entitlements

    const { loadRequest, agentIsActive } = makeLookups(sql)
    const { exchangeCode, refresh } = makeTokens({ sql, metrics, anomalies, grants, credentials, entitlements, policyEngine, loadRequest, agentIsActive })

    const approveInTransaction = (
      request: AuthRequestRecord, ms: number, fidoVerified: boolean, approvedByPolicy?: string,
      sso?: { readonly sessionId: string; readonly scopes: ReadonlyArray<string> }
    ) =>
      Effect.gen(function*() {
        const grant = yield* grants.create({
          developerId: request.developerId,
          agentId: request.agentId,
          principalId: request.principalId,
          scopes: sso?.scopes ?? request.scopes,
          audience: request.audience,
          expiresAt: new Date(ms + request.grantTtlSeconds * 1000),
          ...(approvedByPolicy !== undefined ? { approvedByPolicy } : {}),
          // a passkey approval stays "passkey" (derived from fido_verified_at) even when SSO was also required
          ...(sso !== undefined && !fidoVerified ? { approvedBySso: true } : {})
        })
        const code = secret()
        yield* sql`INSERT INTO auth_codes (code_hash, auth_request_id, grant_id, developer_id, agent_id, expires_at)
                   VALUES (${sha256Hex(code)}, ${request.id}, ${grant.id}, ${request.developerId}, ${request.agentId},
                           ${new Date(ms + CODE_TTL_MS)})`
        yield* sql`UPDATE auth_requests SET status = 'approved', decided_at = ${new Date(ms)}, grant_id = ${grant.id},
                     fido_verified_at = CASE WHEN ${fidoVerified} THEN ${new Date(ms)} ELSE fido_verified_at END,
                     sso_session_id = ${sso?.sessionId ?? null}
                   WHERE id = ${request.id}`
        return { code, grantId: grant.id, redirectUri: request.redirectUri, state: request.state }
      }).pipe(Effect.orDie)

    const authorize: AuthorizationService["authorize"] = (developer, input) =>
      Effect.gen(function*() {
        const ttl = parseDuration(input.expiresIn ?? "24h")
        if (ttl === undefined) return yield* Effect.fail(new BadRequest({ message: "expiresIn must look like 90s, 15m, 24h or 7d" }))
        if (ttl > MAX_GRANT_TTL_SECONDS) return yield* Effect.fail(new BadRequest({ message: "expiresIn may be at most 366 days" }))
        const redirectProblem = input.redirectUri === undefined ? undefined : redirectUriProblem(input.redirectUri)
        if (redirectProblem !== undefined) return yield* Effect.fail(invalidRedirect(redirectProblem))
        const method = input.codeChallengeMethod ?? "S256"
        if (input.codeChallenge !== undefined) {
          if (method !== "S256") return yield* Effect.fail(new BadRequest({ message: "codeChallengeMethod must be S256" }))
          if (!/^[A-Za-z0-9_-]{43,128}$/.test(input.codeChallenge)) {
            return yield* Effect.fail(new BadRequest({ message: "codeChallenge must be base64url, 43 to 128 characters" }))
          }
        } else if (input.codeChallengeMethod !== undefined) {
          return yield* Effect.fail(new BadRequest({ message: "codeChallengeMethod given without codeChallenge" }))
        }
        if (input.scopes.length === 0) return yield* Effect.fail(new BadRequest({ message: "scopes must not be empty" }))
        const agent = yield* agents.find(developer.id, input.agentId)
        if (agent === undefined) return yield* Effect.fail(new AgentNotFound({ message: "Agent not found" }))
        if (agent.status !== "active") return yield* Effect.fail(new AgentSuspended({ message: "Agent is suspended" }))
        // an agent with registered redirect URIs is sent only to one of them, compared as strings
        if (input.redirectUri !== undefined && agent.redirectUris.length > 0 && !agent.redirectUris.includes(input.redirectUri)) {
          return yield* Effect.fail(invalidRedirect("redirectUri is not one of the agent's registered redirectUris"))
        }
        const unregistered = input.scopes.filter((s) => !agent.scopes.includes(s))
        if (unregistered.length > 0) {
          if (anomalies !== undefined) yield* anomalies.scopeRefused(developer.id, agent.id, "INVALID_SCOPES")
          return yield* Effect.fail(new InvalidScopes({ message: `Scopes not registered for the agent: ${unregistered.join(", ")}` }))
        }
        yield* principals.requireActive(developer.id, input.principalId)
        // decisions §13: a deny answers 403 POLICY_DENIED; an allow approves at once, never past a passkey or SSO requirement
        const policy = yield* policyEngine.guard("authorize", { developerId: developer.id, agentId: agent.id, principalId: input.principalId, scopes: input.scopes })
        const byPolicy = policy.autoApprove !== undefined && !developer.fidoRequired && !(yield* policyEngine.ssoEnforced(developer.id))
          ? policy.autoApprove.policyId
          : undefined
        // decisions §16: the plan's active-grant cap (402 PLAN_LIMIT_EXCEEDED), then the monthly
        // authorization quota (402 QUOTA_EXCEEDED on a plan that stops at 100 %)
        yield* entitlements.belowCap(developer, "activeGrants")
        yield* entitlements.admit(developer, "authorizations")
        const ms = yield* nowMillis
        const id = newId("areq", ms)
        const expiresAt = new Date(ms + REQUEST_TTL_MS)
        return yield* sql.withTransaction(Effect.gen(function*() {
          const [request] = yield* sql.unsafe<AuthRequestRecord>(
            `INSERT INTO auth_requests (id, developer_id, agent_id, principal_id, scopes, grant_ttl_seconds, redirect_uri, state,
               audience, code_challenge, code_challenge_method, status, expires_at, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending', $12, $13) RETURNING ${REQUEST_COLUMNS}`,
            [id, developer.id, agent.id, input.principalId, [...new Set(input.scopes)] as any, ttl, input.redirectUri ?? null,
              input.state ?? null, input.audience ?? null, input.codeChallenge ?? null,
              input.codeChallenge !== undefined ? method : null, expiresAt, new Date(ms)]
          )
          const base = { authRequestId: id, consentUrl: `${config.publicBaseUrl}/consent?req=${id}`, expiresAt: expiresAt.toISOString() }
          // a grant made here is made for a principal the directory still has, read under its lock (§20)
          if (byPolicy !== undefined || developer.mode === "sandbox") yield* principals.requireActive(developer.id, input.principalId)
          if (byPolicy !== undefined) {
            const approval = yield* approveInTransaction(request!, ms, false, byPolicy)
            yield* policy.recordApproval(approval.grantId)
            return { ...base, code: approval.code, policyEnforced: true as const, effect: "allow" as const, policyId: byPolicy }
          }
          if (developer.mode !== "sandbox") return base
          // Sandbox developers test without a person in the loop: the request is approved at once.
          const approval = yield* approveInTransaction(request!, ms, false)
          return { ...base, sandbox: true as const, code: approval.code }
        })).pipe(Effect.catchTag("SqlError", Effect.die))
      })

    const consent: AuthorizationService["consent"] = (id) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const rows = yield* sql<AuthRequestRecord & { agentName: string; agentDescription: string | null; fidoRequired: boolean; developerName: string }>`
          SELECT r.id, r.developer_id, r.scopes, r.status, r.expires_at, r.agent_id, r.redirect_uri, r.principal_id, r.grant_ttl_seconds,
                 a.name AS agent_name, a.description AS agent_description, d.fido_required, d.name AS developer_name
          FROM auth_requests r JOIN agents a ON a.id = r.agent_id JOIN developers d ON d.id = r.developer_id
          WHERE r.id = ${id}`.pipe(Effect.orDie)
        const row = rows[0]
        if (row === undefined) return yield* Effect.fail(new NotFound({ message: "Authorization request not found" }))
        const status = row.status === "pending" && row.expiresAt.getTime() <= ms ? "expired" as const : row.status
        return {
          id: row.id,
          agentName: row.agentName,
          agentDid: grants.agentDid(row.agentId),
          agentDescription: row.agentDescription,
          scopes: [...row.scopes],
          scopeDescriptions: Object.fromEntries(row.scopes.map((s) => [s, describeScope(s)])),
          expiresAt: row.expiresAt.toISOString(),
          status,
          fidoRequired: row.fidoRequired,
          redirectUri: row.redirectUri,
          principalId: row.principalId,
          developerId: row.developerId,
          developerName: row.developerName,
          grantTtlSeconds: row.grantTtlSeconds
        }
      })

    const pendingOrGone = (request: AuthRequestRecord | undefined, ms: number) =>
      request === undefined
        ? Effect.fail(new NotFound({ message: "Authorization request not found" }))
        : request.status !== "pending"
        ? Effect.fail(new Gone({ message: `Authorization request already ${request.status}` }))
        : request.expiresAt.getTime() <= ms
        ? Effect.fail(new Gone({ message: "Authorization request expired" }))
        : Effect.succeed(request)

    const approveRequest: AuthorizationService["approveRequest"] = (id, options) =>
      sql.withTransaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        const request = yield* pendingOrGone(yield* loadRequest(id, true), ms)
        // an agent suspended after the request was made gets no grant from it
        if (!(yield* agentIsActive(request.developerId, request.agentId))) return yield* Effect.fail(agentSuspended())
        yield* principals.requireActive(request.developerId, request.principalId)
        if (!options.fidoVerified) {
          const [developer] = yield* sql<{ fidoRequired: boolean }>`SELECT fido_required FROM developers WHERE id = ${request.developerId}`.pipe(Effect.orDie)
          if (developer?.fidoRequired) {
            return yield* Effect.fail(new FidoRequired({ message: "This developer requires approval with a passkey" }))
          }
        }
        const sso = (yield* policyEngine.ssoEnforced(request.developerId)) ? yield* ssoBinding(request, options.sso) : undefined
        return yield* approveInTransaction(request, ms, options.fidoVerified, undefined, sso)
      })).pipe(Effect.catchTag("SqlError", Effect.die))

    const denyRequest: AuthorizationService["denyRequest"] = (id) =>
      sql.withTransaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        const request = yield* pendingOrGone(yield* loadRequest(id, true), ms)
        yield* sql`UPDATE auth_requests SET status = 'denied', decided_at = ${new Date(ms)} WHERE id = ${id}`.pipe(Effect.orDie)
        return { redirectUri: request.redirectUri, state: request.state }
      })).pipe(Effect.catchTag("SqlError", Effect.die))

    const getPendingRequest: AuthorizationService["getPendingRequest"] = (id) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const request = yield* loadRequest(id)
        if (request === undefined || request.status !== "pending" || request.expiresAt.getTime() <= ms) return undefined
        return {
          id: request.id,
          developerId: request.developerId,
          agentId: request.agentId,
          principalId: request.principalId,
          scopes: request.scopes,
          expiresAt: request.expiresAt
        }
      })

    const denyPendingForPrincipal: AuthorizationService["denyPendingForPrincipal"] = (developerId, principalId) =>
      Effect.flatMap(nowMillis, (ms) =>
        sql<{ id: string }>`UPDATE auth_requests SET status = 'denied', decided_at = ${new Date(ms)}
                            WHERE developer_id = ${developerId} AND principal_id = ${principalId} AND status = 'pending'
                            RETURNING id`).pipe(Effect.map((rows) => rows.map((r) => r.id)), Effect.orDie)

    return { authorize, consent, getPendingRequest, approveRequest, denyRequest, exchangeCode, refresh, denyPendingForPrincipal }
  })
)

export const AuthorizationLive = AuthorizationServiceLive.pipe(Layer.provideMerge(Layer.mergeAll(AgentsLive, GrantsLive, DirectoryPrincipalsLive)))
