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
import { AnomalyCore } from "../anomalies/Core.ts"
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import { Agents } from "../agents/Service.ts"
import { Entitlements } from "../billing/Entitlements.ts"
import { Config } from "../Config.ts"
import { DirectoryPrincipals, DirectoryPrincipalsLive } from "../directory/Principals.ts"
import { redirectUriProblem } from "../agents/RedirectUri.ts"
import { Credentials } from "../credentials/Service.ts"
import { Grants, MAX_GRANT_TTL_SECONDS } from "../grants/Service.ts"
import type { Developer } from "../platform/Auth.ts"
import {
  AgentNotFound, AgentSuspended, BadRequest, FidoRequired, Forbidden, Gone, type InvalidGrant, InvalidRedirectUri, InvalidScopes, NotFound, type PolicyDenied,
  type PlanLimitExceeded, type PrincipalInactive, type PrincipalMismatch, type QuotaExceeded
} from "../platform/Errors.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { Metrics } from "../platform/Metrics.ts"
import { nowMillis, parseDuration } from "../platform/Time.ts"
import { type Allowed, Gate } from "../gate/Gate.ts"
import { DpdpApproval } from "../dpdp/ApprovalConsent.ts"
import { ANSWER_IN_ITS_BROWSER, interactionCookieOk } from "./OAuthRequests.ts"
import { agentSuspended, type AuthRequestRecord, makeLookups, REQUEST_COLUMNS, secret } from "./Lookups.ts"
import { describeScope } from "./Scopes.ts"
import { ssoBinding, type SsoApproval } from "./SsoBinding.ts"
import { makeTokens } from "./Tokens.ts"
import type { AuthorizationService } from "./Types.ts"
import { sha256Hex } from "../platform/Hash.ts"

export type { SsoApproval } from "./SsoBinding.ts"
export type { Approval, AuthorizationService, AuthorizeInput, ConsentView, TokenResponse } from "./Types.ts"
export type { AuthRequestRecord } from "./Lookups.ts"
export { ACCESS_TOKEN_TTL_MS } from "./Tokens.ts"

/** An authorization request waits this long for the person. */
export const REQUEST_TTL_MS = 10 * 60 * 1000
/** A code must be exchanged within this time. */
export const CODE_TTL_MS = 10 * 60 * 1000

export class Authorization extends Context.Tag("agent-auth/Authorization")<Authorization, AuthorizationService>() {}

const invalidRedirect = (message: string) => new InvalidRedirectUri({ message: message })

export const AuthorizationServiceLive = Layer.effect(
  Authorization,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const metrics = yield* Metrics
    const anomalies = yield* AnomalyCore // decisions §14: inline rules
    const agents = yield* Agents
    const grants = yield* Grants
    const events = yield* Events
    const credentials = yield* Credentials
    const gate = yield* Gate
    const audit = yield* AuditChain
    // decisions §21: a person's approval of a request naming a notice makes the consent record in its transaction
    const dpdp = yield* DpdpApproval

    const { loadRequest } = makeLookups(sql)
    const { exchangeCode, refresh } = makeTokens({ sql, metrics, anomalies, grants, credentials, gate })

    /** the grant, its code and the request's approval, in the caller's (gated) transaction */
    const approveInTransaction = (
      request: AuthRequestRecord, ms: number, allowed: Allowed, fidoVerified: boolean,
      sso?: { readonly sessionId: string; readonly scopes: ReadonlyArray<string> }, language?: string
    ) =>
      Effect.gen(function*() {
        const grant = yield* grants.create({
          developerId: request.developerId,
          agentId: request.agentId,
          principalId: request.principalId,
          scopes: sso?.scopes ?? request.scopes,
          audience: request.audience,
          expiresAt: new Date(ms + request.grantTtlSeconds * 1000),
          approvalMethod: allowed.approvalMethod ?? "consent",
          policyId: allowed.policyId,
          ...(request.oauth !== null ? { eventExtra: { resourceServerId: request.oauth.resourceServerId, clientOrigin: request.oauth.clientOrigin } } : {})
        })
        yield* allowed.recordApproval(grant.id)
        yield* dpdp.recordApproval({
          requestId: request.id, binding: request.dpdpConsent, developerId: request.developerId, grantId: grant.id, principalId: request.principalId,
          scopes: grant.scopes, expiresAt: grant.expiresAt, approvalMethod: allowed.approvalMethod ?? "consent", language
        })
        const code = secret()
        // decisions §22.5: an OAuth grant records what it was made for; its code lives 60 s and only /oauth/token redeems it
        const oauth = request.oauth
        if (oauth !== null) {
          yield* audit.append({
            developerId: request.developerId, action: "service.oauth.authorization_approved", agentId: request.agentId, grantId: grant.id,
            principalId: request.principalId, metadata: { resourceServerId: oauth.resourceServerId, clientId: oauth.clientId, approvalMethod: grant.approvalMethod }
          })
          yield* sql`UPDATE grants SET resource_server_id = ${oauth.resourceServerId}, resource = ${oauth.resource}, client_id = ${oauth.clientId},
                       auth_method = ${request.authMethod}, auth_time = ${request.authTime} WHERE id = ${grant.id}`
        }
        // the code and the request's approval in one statement (one round trip fewer for the person)
        yield* sql`WITH code AS (
                     INSERT INTO auth_codes (code_hash, auth_request_id, grant_id, developer_id, agent_id, expires_at, oauth)
                     VALUES (${sha256Hex(code)}, ${request.id}, ${grant.id}, ${request.developerId}, ${request.agentId},
                             ${new Date(ms + (oauth !== null ? config.oauth.codeTtlMs : CODE_TTL_MS))}, ${oauth !== null})
                   )
                   UPDATE auth_requests SET status = 'approved', decided_at = ${new Date(ms)}, grant_id = ${grant.id},
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
          yield* anomalies.scopeRefused(developer.id, agent.id, "INVALID_SCOPES")
          return yield* Effect.fail(new InvalidScopes({ message: `Scopes not registered for the agent: ${unregistered.join(", ")}` }))
        }
        // decisions §21: the notice the request names (or the developer's default), pinned now
        const notice = yield* dpdp.bind(developer.id, input)
        const ms = yield* nowMillis
        const id = newId("areq", ms)
        const expiresAt = new Date(ms + REQUEST_TTL_MS)
        return yield* gate.transaction(Effect.gen(function*() {
          // decisions §20: agent, principal (under the directory row's lock), requirements, policies (a deny
          // answers 403 POLICY_DENIED, an allow approves at once unless a passkey or SSO is required), the
          // active-grant cap and the monthly authorization quota, all in this transaction
          const allowed = yield* gate.check("authorize", {
            developerId: developer.id, agentId: agent.id, principalId: input.principalId, scopes: input.scopes,
            sandbox: developer.mode === "sandbox", cap: "activeGrants", meter: "authorizations"
          })
          // after the gate: the quota's count (seeded from the stored requests) must not include this one
          const [request] = yield* sql.unsafe<AuthRequestRecord>(
            `INSERT INTO auth_requests (id, developer_id, agent_id, principal_id, scopes, grant_ttl_seconds, redirect_uri, state,
               audience, code_challenge, code_challenge_method, status, expires_at, created_at, dpdp_consent)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending', $12, $13, $14::jsonb) RETURNING ${REQUEST_COLUMNS}`,
            [id, developer.id, agent.id, input.principalId, [...new Set(input.scopes)] as any, ttl, input.redirectUri ?? null,
              input.state ?? null, input.audience ?? null, input.codeChallenge ?? null,
              input.codeChallenge !== undefined ? method : null, expiresAt, new Date(ms), notice === null ? null : JSON.stringify(notice)]
          ).pipe(Effect.orDie)
          const base = { authRequestId: id, consentUrl: `${config.publicBaseUrl}/consent?req=${id}`, expiresAt: expiresAt.toISOString() }
          if (allowed.approvalMethod === null) return base
          const approval = yield* approveInTransaction(request!, ms, allowed, false)
          if (allowed.approvalMethod === "policy") {
            return { ...base, code: approval.code, policyEnforced: true as const, effect: "allow" as const, policyId: allowed.policyId! }
          }
          // Sandbox developers test without a person in the loop: the request is approved at once.
          return { ...base, sandbox: true as const, code: approval.code }
        }))
      })

    const consent: AuthorizationService["consent"] = (id, language) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const rows = yield* sql<AuthRequestRecord & { agentName: string; agentDescription: string | null; fidoRequired: boolean; developerName: string }>`
          SELECT r.id, r.developer_id, r.scopes, r.status, r.expires_at, r.agent_id, r.redirect_uri, r.principal_id, r.grant_ttl_seconds,
                 r.oauth, r.interaction_cookie_hash, r.dpdp_consent, r.fido_verified_at,
                 a.name AS agent_name, a.description AS agent_description, d.fido_required, d.name AS developer_name
          FROM auth_requests r JOIN agents a ON a.id = r.agent_id JOIN developers d ON d.id = r.developer_id
          WHERE r.id = ${id}`.pipe(Effect.orDie)
        const row = rows[0]
        if (row === undefined) return yield* Effect.fail(new NotFound({ message: "Authorization request not found" }))
        const status = (row.status === "pending" || row.status === "authenticating") && row.expiresAt.getTime() <= ms ? "expired" as const : row.status
        return {
          id: row.id,
          agentName: row.agentName,
          agentDid: grants.agentDid(row.agentId),
          agentDescription: row.agentDescription,
          scopes: [...row.scopes],
          scopeDescriptions: Object.fromEntries(row.scopes.map((s) => [s, row.oauth?.scopeDescriptions[s] ?? describeScope(s)])),
          expiresAt: row.expiresAt.toISOString(),
          status,
          // an OAuth sign-in that asserted a passkey already met the requirement (decisions §22.5)
          fidoRequired: row.fidoRequired && !(row.oauth !== null && row.fidoVerifiedAt !== null),
          redirectUri: row.redirectUri,
          principalId: row.principalId,
          developerId: row.developerId,
          developerName: row.developerName,
          grantTtlSeconds: row.grantTtlSeconds,
          oauth: row.oauth,
          interactionCookieHash: row.interactionCookieHash,
          // decisions §21: read only for a request that names a notice
          notice: row.dpdpConsent === null ? null : yield* dpdp.noticeForPage(row.developerId, row.dpdpConsent, language)
        }
      })

    const pendingOrGone = (request: AuthRequestRecord | undefined, ms: number) =>
      request === undefined
        ? Effect.fail(new NotFound({ message: "Authorization request not found" }))
        : request.status === "authenticating"
        ? Effect.fail(new Gone({ message: "Authorization request is waiting for the person to sign in" }))
        : request.status !== "pending"
        ? Effect.fail(new Gone({ message: `Authorization request already ${request.status}` }))
        : request.expiresAt.getTime() <= ms
        ? Effect.fail(new Gone({ message: "Authorization request expired" }))
        : Effect.succeed(request)

    const approveRequest: AuthorizationService["approveRequest"] = (id, options) =>
      gate.transaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        const loaded = yield* loadRequest(id, true)
        if (loaded !== undefined && typeof options.browser === "object" && !interactionCookieOk(loaded, options.browser.cookies)) {
          return yield* Effect.fail(new Forbidden({ message: ANSWER_IN_ITS_BROWSER }))
        }
        const request = yield* pendingOrGone(loaded, ms)
        let sso: { readonly sessionId: string; readonly scopes: ReadonlyArray<string> } | undefined
        // decisions §22.5: an OAuth request's passkey may have been asserted at sign-in, in this browser's flow (the
        // interaction cookie binds it); only the sign-in sets fido_verified_at on a request that is still pending
        const signInPasskey = request.oauth !== null && request.fidoVerifiedAt !== null
        // decisions §20: the person's approval meets the developer's requirements (a passkey, the principal signed in through SSO)
        const allowed = yield* gate.check("consent.approve", {
          developerId: request.developerId, agentId: request.agentId, principalId: request.principalId, scopes: request.scopes,
          ...(request.oauth !== null
            ? { oauth: { resourceServerId: request.oauth.resourceServerId, resource: request.oauth.resource, clientOrigin: request.oauth.clientOrigin } }
            : {}),
          approval: (requirement) =>
            Effect.gen(function*() {
              // the sign-in's passkey counts where one is required (then the approval is "passkey"), not otherwise
              const fidoVerified = options.fidoVerified || (requirement.passkey && signInPasskey)
              if (requirement.passkey && !fidoVerified) {
                return yield* Effect.fail(new FidoRequired({ message: "This developer requires approval with a passkey" }))
              }
              if (requirement.sso) sso = yield* ssoBinding(request, yield* options.sso)
              // a passkey approval stays "passkey" even when SSO was also required
              return fidoVerified ? "passkey" as const : sso !== undefined ? "sso" as const : "consent" as const
            })
        })
        return yield* approveInTransaction(request, ms, allowed, options.fidoVerified, sso, options.language)
      }))

    const denyRequest: AuthorizationService["denyRequest"] = (id) =>
      sql.withTransaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        const request = yield* pendingOrGone(yield* loadRequest(id, true), ms)
        yield* sql`UPDATE auth_requests SET status = 'denied', decided_at = ${new Date(ms)} WHERE id = ${id}`.pipe(Effect.orDie)
        if (request.oauth !== null) {
          yield* audit.append({
            developerId: request.developerId, action: "service.oauth.authorization_denied", agentId: request.agentId, principalId: request.principalId,
            metadata: { resourceServerId: request.oauth.resourceServerId, clientId: request.oauth.clientId }
          })
        }
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

    const approveAllowed: AuthorizationService["approveAllowed"] = (id, allowed) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const request = (yield* loadRequest(id, true))!
        return yield* approveInTransaction(request, ms, allowed, false)
      })

    return { authorize, consent, getPendingRequest, approveRequest, approveAllowed, denyRequest, exchangeCode, refresh, denyPendingForPrincipal }
  })
)

export const AuthorizationLive = AuthorizationServiceLive
