/**
 * Authorization (decisions §3): an agent's backend asks for a person's consent (POST /v1/authorize),
 * the person approves or denies on the consent page (or with a passkey), approval creates the grant
 * and a single-use code, and the code (then refresh tokens) are exchanged for grant tokens.
 *
 * Codes and refresh tokens are random 32-byte secrets stored only as SHA-256. Presenting a used
 * code or refresh token again revokes the grant: whoever holds a copy loses it too.
 */
import { optionalCore } from "../anomalies/Core.ts"
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import { Agents, AgentsLive } from "../agents/Service.ts"
import { Entitlements } from "../billing/Entitlements.ts"
import { Config } from "../Config.ts"
import { DirectoryPrincipals, DirectoryPrincipalsLive } from "../directory/Principals.ts"
import { redirectUriProblem } from "../agents/RedirectUri.ts"
import { Credentials } from "../credentials/Service.ts"
import { Grants, type GrantRecord, GrantsLive, MAX_GRANT_TTL_SECONDS } from "../grants/Service.ts"
import type { Developer } from "../platform/Auth.ts"
import {
  AgentNotFound, AgentSuspended, BadRequest, FidoRequired, type Forbidden, Gone, InvalidGrant, InvalidRedirectUri, InvalidScopes, NotFound, PolicyDenied,
  type PlanLimitExceeded, type PrincipalInactive, type PrincipalMismatch, type QuotaExceeded
} from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { Metrics } from "../platform/Metrics.ts"
import { nowMillis, parseDuration } from "../platform/Time.ts"
import { PolicyEngine } from "../policies/Service.ts"
import { describeScope } from "./Scopes.ts"
import { ssoBinding, type SsoApproval } from "./SsoBinding.ts"
import { sha256Hex } from "../platform/Hash.ts"

export type { SsoApproval } from "./SsoBinding.ts"

/** An authorization request waits this long for the person. */
export const REQUEST_TTL_MS = 10 * 60 * 1000
/** A code must be exchanged within this time. */
export const CODE_TTL_MS = 10 * 60 * 1000
/** Grant tokens from /v1/token and refresh live at most this long (never past the grant). */
export const ACCESS_TOKEN_TTL_MS = 60 * 60 * 1000

const secret = () => randomBytes(32).toString("base64url")

export interface AuthRequestRecord {
  readonly id: string
  readonly developerId: string
  readonly agentId: string
  readonly principalId: string
  readonly scopes: ReadonlyArray<string>
  readonly grantTtlSeconds: number
  readonly redirectUri: string | null
  readonly state: string | null
  readonly audience: string | null
  readonly codeChallenge: string | null
  readonly codeChallengeMethod: string | null
  readonly status: "pending" | "approved" | "denied"
  readonly expiresAt: Date
  readonly createdAt: Date
  readonly grantId: string | null
  readonly fidoVerifiedAt: Date | null
}

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

const REQUEST_COLUMNS = `id, developer_id, agent_id, principal_id, scopes, grant_ttl_seconds, redirect_uri, state, audience,
  code_challenge, code_challenge_method, status, expires_at, created_at, grant_id, fido_verified_at`

const invalidGrant = (message: string) => new InvalidGrant({ message: message })

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

    const loadRequest = (id: string, lock = false) =>
      sql.unsafe<AuthRequestRecord>(
        `SELECT ${REQUEST_COLUMNS} FROM auth_requests WHERE id = $1${lock ? " FOR UPDATE" : ""}`,
        [id]
      ).pipe(Effect.map((rows) => rows[0]), Effect.orDie)

    /** issues a grant token (≤ 1 h, never past the grant) and a fresh refresh token */
    const issueTokens = (grant: GrantRecord, ms: number, bdg?: number) =>
      Effect.gen(function*() {
        const expiresAt = new Date(Math.min(grant.expiresAt.getTime(), ms + ACCESS_TOKEN_TTL_MS))
        const token = yield* grants.issueToken(grant, { expiresAt, ...(bdg !== undefined ? { bdg } : {}) })
        const refreshToken = `rt_${secret()}`
        yield* sql`INSERT INTO refresh_tokens (id, token_hash, grant_id, developer_id, agent_id, created_at, expires_at)
                   VALUES (${newId("ref", ms)}, ${sha256Hex(refreshToken)}, ${grant.id}, ${grant.developerId}, ${grant.agentId},
                           ${new Date(ms)}, ${grant.expiresAt})`
        return {
          grantToken: token.grantToken,
          expiresAt: token.expiresAt.toISOString(),
          scopes: [...grant.scopes],
          refreshToken,
          grantId: grant.id
        }
      }).pipe(Effect.orDie)

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
          if (byPolicy !== undefined) {
            const approval = yield* approveInTransaction(request!, ms, false, byPolicy)
            yield* policy.recordApproval(approval.grantId)
            return { ...base, code: approval.code, policyEnforced: true as const, effect: "allow" as const, policyId: byPolicy }
          }
          if (developer.mode !== "sandbox") return base
          // Sandbox developers test without a person in the loop: the request is approved at once.
          const approval = yield* approveInTransaction(request!, ms, false)
          return { ...base, sandbox: true as const, code: approval.code }
        })).pipe(Effect.orDie)
      })

    const consent: AuthorizationService["consent"] = (id) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const rows = yield* sql<AuthRequestRecord & { agentName: string; agentDescription: string | null; fidoRequired: boolean }>`
          SELECT r.id, r.developer_id, r.scopes, r.status, r.expires_at, r.agent_id, r.redirect_uri, r.principal_id,
                 a.name AS agent_name, a.description AS agent_description, d.fido_required
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
          developerId: row.developerId
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

    /** whether the agent is active (not suspended, not deleted): it alone gets consent and tokens */
    const agentIsActive = (developerId: string, agentId: string) =>
      Effect.map(
        sql<{ status: string }>`SELECT status FROM agents WHERE id = ${agentId} AND developer_id = ${developerId} AND deleted_at IS NULL`,
        (rows) => rows[0]?.status === "active"
      )
    const agentSuspended = () => new AgentSuspended({ message: "Agent is suspended" })

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

    const remainingBudget = (grantId: string) =>
      Effect.gen(function*() {
        const [exists] = yield* sql<{ table: string | null }>`SELECT to_regclass('budget_allocations')::text AS table`
        if (!exists?.table) return undefined
        const rows = yield* sql<{ remainingBudget: string }>`SELECT remaining_budget FROM budget_allocations WHERE grant_id = ${grantId}`
        return rows[0] === undefined ? undefined : Number(rows[0].remainingBudget)
      }).pipe(Effect.orDie)

    /** after the revoking transaction committed: a replay is what an operator must see (someone else may hold the secret) */
    const reportReplay = (developerId: string, replay: { kind: string; grantId: string; agentId: string; revoked: number }) => {
      metrics?.inc("replays_total", { kind: replay.kind })
      return Effect.logWarning(replay.kind === "code" ? "authorization code replayed; grant revoked" : "refresh token replayed; grant revoked").pipe(
        Effect.annotateLogs({ developerId, agentId: replay.agentId, grantId: replay.grantId, grantsRevoked: replay.revoked })
      )
    }

    const exchangeCode: AuthorizationService["exchangeCode"] = (developer, input) =>
      Effect.gen(function*() {
        // RFC 7636: a verifier is 43-128 characters; anything else is refused before the code is looked at
        if (input.codeVerifier !== undefined && (input.codeVerifier.length < 43 || input.codeVerifier.length > 128)) {
          return yield* Effect.fail(invalidGrant("codeVerifier must be 43 to 128 characters"))
        }
        // decisions §18: the credential asked for is checked before the code is spent
        const wanted = yield* credentials.parseRequest(input)
        // decisions §16: the monthly token-exchange quota (refresh is never checked)
        yield* entitlements.admit(developer, "token_exchanges")
        // A replay revokes the grant and must commit even though the request fails.
        const outcome = yield* sql.withTransaction(Effect.gen(function*() {
          const ms = yield* nowMillis
          const rows = yield* sql<{ authRequestId: string; grantId: string; developerId: string; agentId: string; expiresAt: Date; usedAt: Date | null }>`
            SELECT auth_request_id, grant_id, developer_id, agent_id, expires_at, used_at FROM auth_codes
            WHERE code_hash = ${sha256Hex(input.code)} FOR UPDATE`
          const code = rows[0]
          if (code === undefined || code.developerId !== developer.id) return { error: "Unknown authorization code" } as const
          if (code.usedAt !== null) {
            // A replayed code means someone else may hold it: the grant issued from it is revoked.
            const revoked = yield* grants.revoke(developer.id, code.grantId)
            if (anomalies !== undefined) yield* anomalies.replay(developer.id, code.agentId, code.grantId, "code", revoked?.length ?? 0)
            return { error: "Authorization code already used; the grant issued from it has been revoked", replay: { kind: "code", grantId: code.grantId, agentId: code.agentId, revoked: revoked?.length ?? 0 } } as const
          }
          if (code.expiresAt.getTime() <= ms) return { error: "Authorization code expired" } as const
          if (code.agentId !== input.agentId) return { error: "Authorization code was issued to another agent" } as const
          // a suspended (or deleted) agent gets no tokens; the code stays unused for when it is active again
          if (!(yield* agentIsActive(developer.id, code.agentId))) return { suspended: true } as const
          const request = (yield* loadRequest(code.authRequestId))!
          if (request.codeChallenge !== null) {
            if (input.codeVerifier === undefined) return { error: "codeVerifier is required" } as const
            const expected = Buffer.from(request.codeChallenge)
            const given = Buffer.from(createHash("sha256").update(input.codeVerifier).digest("base64url"))
            if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
              return { error: "codeVerifier does not match the code challenge" } as const
            }
          }
          yield* sql`UPDATE auth_codes SET used_at = ${new Date(ms)} WHERE code_hash = ${sha256Hex(input.code)}`
          const grant = yield* grants.find(developer.id, code.grantId)
          if (grant === undefined || grant.status !== "active" || grant.expiresAt.getTime() <= ms) {
            return { error: "The grant is no longer active" } as const
          }
          const tokens = yield* issueTokens(grant, ms)
          // decisions §18: issued in the token's transaction; a failure issues nothing
          const issued = yield* credentials.issueFor(grant, { ...wanted, fidoVerifiedAt: request.fidoVerifiedAt })
          return { tokens: { ...tokens, ...issued } } as const
        })).pipe(Effect.catchTag("GrantNoLongerActive", () => Effect.succeed({ error: "The grant is no longer active" } as const)), Effect.orDie)
        if ("suspended" in outcome) return yield* Effect.fail(agentSuspended())
        if ("replay" in outcome && outcome.replay !== undefined) yield* reportReplay(developer.id, outcome.replay)
        if ("error" in outcome) return yield* Effect.fail(invalidGrant(outcome.error!))
        return outcome.tokens
      })

    const refresh: AuthorizationService["refresh"] = (developer, input) =>
      Effect.gen(function*() {
        // A reuse revokes the grant and must commit even though the request fails.
        const outcome = yield* sql.withTransaction(Effect.gen(function*() {
          const ms = yield* nowMillis
          const rows = yield* sql<{ id: string; grantId: string; developerId: string; agentId: string; expiresAt: Date; usedAt: Date | null }>`
            SELECT id, grant_id, developer_id, agent_id, expires_at, used_at FROM refresh_tokens
            WHERE token_hash = ${sha256Hex(input.refreshToken)} FOR UPDATE`
          const token = rows[0]
          if (token === undefined || token.developerId !== developer.id) return { error: "Unknown refresh token" } as const
          if (token.usedAt !== null) {
            const revoked = yield* grants.revoke(developer.id, token.grantId)
            if (anomalies !== undefined) yield* anomalies.replay(developer.id, token.agentId, token.grantId, "refresh_token", revoked?.length ?? 0)
            return { error: "Refresh token already used; the grant has been revoked", replay: { kind: "refresh_token", grantId: token.grantId, agentId: token.agentId, revoked: revoked?.length ?? 0 } } as const
          }
          if (token.agentId !== input.agentId) return { error: "Refresh token was issued to another agent" } as const
          if (token.expiresAt.getTime() <= ms) return { error: "Refresh token expired" } as const
          if (!(yield* agentIsActive(developer.id, token.agentId))) return { suspended: true } as const
          // decisions §13: a policy deny answers INVALID_GRANT and leaves the refresh token unused
          const denied = yield* policyEngine.refreshDenied(developer.id, token.grantId)
          if (denied !== undefined) return { error: denied } as const
          yield* sql`UPDATE refresh_tokens SET used_at = ${new Date(ms)} WHERE id = ${token.id}`
          const grant = yield* grants.find(developer.id, token.grantId)
          if (grant === undefined || grant.status !== "active" || grant.expiresAt.getTime() <= ms) {
            return { error: "The grant is no longer active" } as const
          }
          const bdg = yield* remainingBudget(grant.id)
          return { tokens: yield* issueTokens(grant, ms, bdg) } as const
        })).pipe(Effect.orDie)
        if ("suspended" in outcome) return yield* Effect.fail(agentSuspended())
        if ("replay" in outcome && outcome.replay !== undefined) yield* reportReplay(developer.id, outcome.replay)
        if ("error" in outcome) return yield* Effect.fail(invalidGrant(outcome.error!))
        return outcome.tokens
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
