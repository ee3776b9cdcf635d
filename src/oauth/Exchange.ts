/**
 * RFC 8693 token exchange (decisions §22.6): a confidential API agent allowed to (`tokenExchange`)
 * trades an active access token of this issuer for one of its own, for the same person, as a child
 * grant of the subject's (section 3 delegation: depth, expiry no later than the parent's, cascade on
 * revocation), for a resource server of the same developer and at most the subject's scopes. The
 * token carries `act`: the calling agent outermost, the subject token's agent (and its own `act`) inside.
 * A token alone never mints a token for another client: `actor_token` is refused.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AnomalyCoreService } from "../anomalies/Core.ts"
import type { AppConfig } from "../Config.ts"
import type { GateService } from "../gate/Gate.ts"
import type { GrantRecord, GrantsService } from "../grants/Service.ts"
import type { AuditChainService } from "../platform/AuditChain.ts"
import type { GrantTokenClaims } from "../platform/Keys.ts"
import { nowMillis } from "../platform/Time.ts"
import type { AccessTokenClaims, AccessTokenSigner } from "../platform/AccessTokens.ts"
import type { OAuthClient } from "./Clients.ts"
import { OAuthInvalidGrant, OAuthInvalidRequest, OAuthInvalidScope, OAuthInvalidTarget, OAuthUnauthorizedClient } from "./Errors.ts"
import type { ResourceServersService } from "./ResourceServers.ts"
import { canonicalResource, issuerOf } from "./Rules.ts"
import type { Form, OAuthGrantFacts, TokenAnswer } from "./TokenTypes.ts"

export const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
export const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"

export const makeExchange = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly config: AppConfig
  readonly grants: GrantsService
  readonly gate: GateService
  readonly anomalies: AnomalyCoreService
  readonly resourceServers: ResourceServersService
  readonly signer: AccessTokenSigner
  readonly audit: AuditChainService
  readonly issue: (
    grant: GrantRecord, facts: OAuthGrantFacts, client: OAuthClient, scopes: ReadonlyArray<string>, grantType: string, ms: number,
    extra: { readonly claims?: Partial<AccessTokenClaims>; readonly refresh?: boolean }
  ) => Effect.Effect<TokenAnswer, OAuthInvalidGrant>
}) =>
(developerId: string, client: OAuthClient, form: Form) =>
  Effect.gen(function*() {
    const { sql, config, grants, gate, anomalies, resourceServers, signer, audit, issue } = deps
    if (client.origin !== "api" || client.clientType !== "confidential" || !client.tokenExchange) {
      return yield* Effect.fail(new OAuthUnauthorizedClient({ message: "token exchange is open only to confidential API agents allowed to use it" }))
    }
    if (client.agentStatus !== "active") return yield* Effect.fail(new OAuthUnauthorizedClient({ message: "the client is suspended" }))
    if (form.actor_token !== undefined) return yield* Effect.fail(new OAuthInvalidRequest({ message: "actor_token is not accepted: the actor is the authenticated client" }))
    if (form.subject_token === undefined || form.subject_token_type !== ACCESS_TOKEN_TYPE) {
      return yield* Effect.fail(new OAuthInvalidRequest({ message: `subject_token of type ${ACCESS_TOKEN_TYPE} is required` }))
    }
    if (form.requested_token_type !== undefined && form.requested_token_type !== ACCESS_TOKEN_TYPE) {
      return yield* Effect.fail(new OAuthInvalidRequest({ message: "only access tokens are issued" }))
    }
    const ms = yield* nowMillis
    const subject = yield* signer.verify(form.subject_token, Math.floor(ms / 1000))
    if (subject === undefined || subject.iss !== issuerOf(config.oauth.issuerBase, developerId) || subject.dev !== developerId) {
      return yield* Effect.fail(new OAuthInvalidGrant({ message: "subject_token is not an access token of this issuer" }))
    }
    if ((yield* grants.tokenStatus(subject as unknown as GrantTokenClaims)) !== "active") {
      return yield* Effect.fail(new OAuthInvalidGrant({ message: "subject_token is not active" }))
    }
    // the resource: the subject's audience unless another of the developer's servers is named
    const servers = yield* resourceServers.ofDeveloper(developerId)
    const wanted = form.resource === undefined ? { ok: subject.aud } : canonicalResource(form.resource, config.production)
    const rs = "ok" in wanted ? servers.find((s) => s.identifier === wanted.ok) : undefined
    if (rs === undefined) return yield* Effect.fail(new OAuthInvalidTarget({ message: "resource is not a resource server of this issuer" }))
    const subjectScopes = subject.scope.split(" ").filter((s) => s !== "")
    const scopes = form.scope === undefined ? subjectScopes : form.scope.split(" ").filter((s) => s !== "")
    const names = rs.scopes.map((s) => s.name)
    if (scopes.length === 0 || scopes.some((s) => !subjectScopes.includes(s) || !names.includes(s))) {
      yield* anomalies.scopeRefused(developerId, client.agentId, "SCOPE_ESCALATION")
      return yield* Effect.fail(new OAuthInvalidScope({ message: "scope may only narrow the subject token's scopes, within the resource's" }))
    }
    const answer = yield* gate.transaction(Effect.gen(function*() {
      const parent = yield* grants.find(developerId, subject.grnt)
      if (parent === undefined || parent.status !== "active" || parent.expiresAt.getTime() <= ms) {
        return yield* Effect.fail(new OAuthInvalidGrant({ message: "the subject token's grant is no longer active" }))
      }
      const depth = parent.delegationDepth + 1
      if (depth > config.maxDelegationDepth) return yield* Effect.fail(new OAuthInvalidRequest({ message: "delegation depth exceeded" }))
      const allowed = yield* gate.check("delegate", {
        developerId, agentId: client.agentId, principalId: parent.principalId, scopes, cap: "activeGrants",
        grant: { id: parent.id, delegationDepth: parent.delegationDepth, parentGrantId: parent.parentGrantId },
        oauth: { resourceServerId: rs.id, resource: rs.identifier, clientOrigin: client.origin }
      }).pipe(Effect.catchTags({
        AgentSuspended: (e) => Effect.fail(new OAuthUnauthorizedClient({ message: e.message })),
        PrincipalInactive: (e) => Effect.fail(new OAuthInvalidGrant({ message: e.message })),
        PolicyDenied: (e) => Effect.fail(new OAuthInvalidGrant({ message: e.message })),
        PlanLimitExceeded: (e) => Effect.fail(new OAuthInvalidRequest({ message: e.message }))
      }))
      const grant = yield* grants.create({
        developerId, agentId: client.agentId, principalId: parent.principalId, scopes,
        expiresAt: new Date(Math.min(parent.expiresAt.getTime(), ms + rs.grantTtlSeconds * 1000)),
        audience: rs.identifier, parentGrantId: parent.id, delegationDepth: depth, approvalMethod: "developer", policyId: allowed.policyId
      })
      yield* sql`UPDATE grants SET resource_server_id = ${rs.id}, resource = ${rs.identifier}, client_id = ${client.clientId} WHERE id = ${grant.id}`.pipe(Effect.orDie)
      const act = {
        sub: grants.agentDid(client.agentId),
        client_id: client.clientId,
        act: { sub: subject.agt, client_id: subject.client_id, ...(subject.act !== undefined ? { act: subject.act } : {}) }
      }
      const tokens = yield* issue(grant, { resourceServerId: rs.id, resource: rs.identifier, clientId: client.clientId, authTime: null }, client, scopes, TOKEN_EXCHANGE, ms, {
        claims: { act, parentAgt: subject.agt, parentGrnt: parent.id, delegationDepth: depth } as Partial<AccessTokenClaims>,
        refresh: false
      })
      yield* audit.append({
        developerId, action: "service.oauth.token_exchanged", agentId: client.agentId, grantId: grant.id, principalId: parent.principalId,
        metadata: { parentGrantId: parent.id, resourceServerId: rs.id, scopes }
      })
      return tokens
    })).pipe(Effect.catchTag("GrantNoLongerActive" as any, () => Effect.fail(new OAuthInvalidGrant({ message: "the subject token's grant is no longer active" }))))
    return {
      access_token: answer.access_token, issued_token_type: ACCESS_TOKEN_TYPE, token_type: "Bearer" as const, expires_in: answer.expires_in, scope: answer.scope
    }
  })
