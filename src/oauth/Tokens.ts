/**
 * The token endpoint (decisions §22.6), introspection and revocation (§22.8). Codes and refresh
 * tokens are single use: presenting one again revokes its grant (section 3, AD-009), in a
 * transaction that commits although the request fails. Every exchange asks the gate, in its own
 * transaction, as `/v1/token` does; access tokens are RFC 9068 JWTs (AccessTokens.ts) whose jti
 * is recorded, so one can be revoked and introspection checks it online.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { AnomalyCore } from "../anomalies/Core.ts"
import { Config } from "../Config.ts"
import { Gate } from "../gate/Gate.ts"
import { type GrantRecord, Grants } from "../grants/Service.ts"
import { LiveCounts } from "../billing/LiveCounts.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { ApiKeys, bearerOf } from "../platform/Auth.ts"
import { Events } from "../platform/Events.ts"
import { sha256Hex } from "../platform/Hash.ts"
import { newId } from "../platform/Ids.ts"
import type { GrantTokenClaims } from "../platform/Keys.ts"
import { nowMillis } from "../platform/Time.ts"
import { type AccessTokenClaims, AccessTokens } from "../platform/AccessTokens.ts"
import { Clients, type OAuthClient, type PresentedCredentials } from "./Clients.ts"
import {
  OAuthInvalidClient, OAuthInvalidGrant, OAuthInvalidRequest, OAuthInvalidScope, OAuthInvalidTarget, OAuthUnauthorizedClient, OAuthUnsupportedGrantType,
  type TokenEndpointError
} from "./Errors.ts"
import { makeExchange, TOKEN_EXCHANGE } from "./Exchange.ts"
import type { Form, OAuthGrantFacts, TokenAnswer } from "./TokenTypes.ts"
import { ResourceServers } from "./ResourceServers.ts"
import { canonicalResource, issuerOf, pkceMatches, VERIFIER } from "./Rules.ts"



export interface TokensService {
  readonly token: (developerId: string, form: Form, credentials: PresentedCredentials) => Effect.Effect<TokenAnswer, TokenEndpointError>
  /** RFC 7662: an RS (Basic rs_ : rss_) or the developer's API key (Bearer) */
  readonly introspect: (developerId: string, form: Form, authorization: string | undefined) => Effect.Effect<Record<string, unknown>, OAuthInvalidClient | OAuthInvalidRequest>
  /** RFC 7009: always nothing, once the client is authenticated */
  readonly revoke: (developerId: string, form: Form, credentials: PresentedCredentials) => Effect.Effect<void, OAuthInvalidClient | OAuthInvalidRequest>
}

export class OAuthTokens extends Context.Tag("agent-auth/OAuthTokens")<OAuthTokens, TokensService>() {}


const REFRESH_PREFIX = "ref_"
const invalidGrant = (message: string) => new OAuthInvalidGrant({ message })

export const TokensLive = Layer.effect(
  OAuthTokens,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const clients = yield* Clients
    const resourceServers = yield* ResourceServers
    const grants = yield* Grants
    const gate = yield* Gate
    const events = yield* Events
    const anomalies = yield* AnomalyCore
    const apiKeys = yield* ApiKeys
    const audit = yield* AuditChain
    const liveCounts = yield* LiveCounts
    const signer = yield* AccessTokens

    const grantFacts = (grantId: string): Effect.Effect<OAuthGrantFacts> =>
      sql<OAuthGrantFacts>`SELECT resource_server_id, resource, client_id, auth_time FROM grants WHERE id = ${grantId}`.pipe(
        Effect.map((rows) => rows[0]!),
        Effect.orDie
      )

    /** an access token (and a rotated refresh token when the client registered the grant) for the grant, in the caller's transaction */
    const issue = (
      grant: GrantRecord, facts: OAuthGrantFacts, client: OAuthClient, scopes: ReadonlyArray<string>, grantType: string, ms: number,
      extra: { readonly claims?: Partial<AccessTokenClaims>; readonly refresh?: boolean } = {}
    ) =>
      Effect.gen(function*() {
        const rs = (yield* resourceServers.ofDeveloper(grant.developerId)).find((s) => s.id === facts.resourceServerId)
        if (rs === undefined || facts.resource === null) return yield* Effect.fail(invalidGrant("the grant's resource server no longer exists"))
        const exp = Math.floor(Math.min(ms + rs.accessTokenTtlSeconds * 1000, grant.expiresAt.getTime()) / 1000)
        const jti = newId("tok", ms)
        const claims: AccessTokenClaims = {
          iss: issuerOf(config.oauth.issuerBase, grant.developerId),
          sub: grant.principalId,
          aud: facts.resource,
          client_id: client.clientId,
          scope: scopes.join(" "),
          scp: [...scopes],
          iat: Math.floor(ms / 1000),
          exp,
          jti,
          ...(facts.authTime !== null ? { auth_time: Math.floor(facts.authTime.getTime() / 1000) } : {}),
          agt: grants.agentDid(grant.agentId),
          dev: grant.developerId,
          grnt: grant.id,
          ...extra.claims
        }
        const accessToken = yield* signer.sign(claims)
        yield* sql`INSERT INTO grant_tokens (jti, grant_id, developer_id, issued_at, expires_at)
                   VALUES (${jti}, ${grant.id}, ${grant.developerId}, ${new Date(ms)}, ${new Date(exp * 1000)})`.pipe(Effect.orDie)
        yield* events.emit(grant.developerId, "token.issued", {
          tokenId: jti, grantId: grant.id, agentId: grant.agentId, principalId: grant.principalId, scopes: [...scopes],
          expiresAt: new Date(exp * 1000).toISOString(), via: "oauth", grantType
        })
        let refreshToken: string | undefined
        if (extra.refresh !== false && client.grantTypes.includes("refresh_token")) {
          refreshToken = `${REFRESH_PREFIX}${randomBytes(32).toString("base64url")}`
          yield* sql`INSERT INTO refresh_tokens (id, token_hash, grant_id, developer_id, agent_id, created_at, expires_at, oauth)
                     VALUES (${newId("ref", ms)}, ${sha256Hex(refreshToken)}, ${grant.id}, ${grant.developerId}, ${grant.agentId},
                             ${new Date(ms)}, ${grant.expiresAt}, true)`.pipe(Effect.orDie)
        }
        return {
          access_token: accessToken, token_type: "Bearer" as const, expires_in: Math.max(0, exp - Math.floor(ms / 1000)), scope: scopes.join(" "),
          ...(refreshToken !== undefined ? { refresh_token: refreshToken } : {})
        }
      })

    /** decisions §22.5: what policies see of an OAuth grant */
    const policyFacts = (facts: OAuthGrantFacts, client: OAuthClient) =>
      facts.resourceServerId !== null && facts.resource !== null
        ? { oauth: { resourceServerId: facts.resourceServerId, resource: facts.resource, clientOrigin: client.origin } }
        : {}

    /** a replay revokes the grant, and that must commit although the request fails: an outcome, not a failure */
    type Outcome = { readonly tokens: TokenAnswer } | { readonly error: string; readonly replay?: true }

    const finish = (outcome: Outcome) => "tokens" in outcome ? Effect.succeed(outcome.tokens) : Effect.fail(invalidGrant(outcome.error))

    const authorizationCode = (developerId: string, client: OAuthClient, form: Form) =>
      Effect.gen(function*() {
        const code = form.code
        const verifier = form.code_verifier
        if (code === undefined || verifier === undefined) return yield* Effect.fail(new OAuthInvalidRequest({ message: "code and code_verifier are required" }))
        if (!VERIFIER.test(verifier)) return yield* Effect.fail(new OAuthInvalidRequest({ message: "code_verifier must be 43-128 characters of [A-Za-z0-9-._~]" }))
        const outcome = yield* gate.transaction(Effect.gen(function*(): Effect.fn.Return<Outcome, any, any> {
          const ms = yield* nowMillis
          const rows = yield* sql<{ grantId: string; developerId: string; agentId: string; expiresAt: Date; usedAt: Date | null; redirectUri: string; codeChallenge: string; audience: string }>`
            SELECT c.grant_id, c.developer_id, c.agent_id, c.expires_at, c.used_at, r.redirect_uri, r.code_challenge, r.audience
            FROM auth_codes c JOIN auth_requests r ON r.id = c.auth_request_id
            WHERE c.code_hash = ${sha256Hex(code)} AND c.oauth FOR UPDATE OF c`
          const row = rows[0]
          if (row === undefined || row.developerId !== developerId) return { error: "unknown authorization code" } as const
          if (row.usedAt !== null) {
            const revoked = yield* grants.revoke(developerId, row.grantId)
            yield* anomalies.replay(developerId, row.agentId, row.grantId, "code", revoked?.length ?? 0)
            return { error: "authorization code already used; the grant issued from it has been revoked", replay: true } as const
          }
          if (row.expiresAt.getTime() <= ms) return { error: "authorization code expired" } as const
          if (row.agentId !== client.agentId) return { error: "authorization code was issued to another client" } as const
          const redirect = form.redirect_uri
          if (redirect === undefined ? client.redirectUris.length !== 1 : redirect !== row.redirectUri) {
            return { error: "redirect_uri does not match the authorization request" } as const
          }
          if (form.resource !== undefined) {
            const canonical = canonicalResource(form.resource, config.production)
            if (!("ok" in canonical) || canonical.ok !== row.audience) return yield* Effect.fail(new OAuthInvalidTarget({ message: "resource differs from the authorization request" }))
          }
          if (!pkceMatches(row.codeChallenge, verifier)) return { error: "code_verifier does not match the code challenge" } as const
          const grant = yield* grants.find(developerId, row.grantId)
          if (grant === undefined || grant.status !== "active" || grant.expiresAt.getTime() <= ms) return { error: "the grant is no longer active" } as const
          const facts = yield* grantFacts(grant.id)
          yield* gate.check("code.exchange", {
            developerId, agentId: grant.agentId, principalId: grant.principalId, scopes: grant.scopes,
            grant: { id: grant.id, delegationDepth: grant.delegationDepth, parentGrantId: grant.parentGrantId }, meter: "token_exchanges",
            ...policyFacts(facts, client)
          }).pipe(Effect.catchTags({
            AgentSuspended: (e) => Effect.fail(new OAuthUnauthorizedClient({ message: e.message })),
            PrincipalInactive: (e) => Effect.fail(invalidGrant(e.message)),
            PolicyDenied: (e) => Effect.fail(invalidGrant(e.message)),
            QuotaExceeded: (e) => Effect.fail(new OAuthInvalidRequest({ message: e.message }))
          }))
          yield* sql`UPDATE auth_codes SET used_at = ${new Date(ms)} WHERE code_hash = ${sha256Hex(code)}`
          yield* sql`UPDATE oauth_clients SET authorized_at = COALESCE(authorized_at, ${new Date(ms)}) WHERE agent_id = ${client.agentId}`
          return { tokens: yield* issue(grant, facts, client, grant.scopes, "authorization_code", ms) } as const
        }).pipe(Effect.catchTag("SqlError", Effect.die))).pipe(
          Effect.catchTag("GrantNoLongerActive" as any, () => Effect.succeed({ error: "the grant is no longer active" } as Outcome))
        ) as unknown as Effect.Effect<Outcome, TokenEndpointError>
        return yield* finish(outcome)
      })

    const refresh = (developerId: string, client: OAuthClient, form: Form) =>
      Effect.gen(function*() {
        const token = form.refresh_token
        if (token === undefined) return yield* Effect.fail(new OAuthInvalidRequest({ message: "refresh_token is required" }))
        const outcome = yield* (gate.transaction(Effect.gen(function*(): Effect.fn.Return<Outcome, any, any> {
          const ms = yield* nowMillis
          const rows = yield* sql<{ id: string; grantId: string; developerId: string; agentId: string; expiresAt: Date; usedAt: Date | null }>`
            SELECT id, grant_id, developer_id, agent_id, expires_at, used_at FROM refresh_tokens
            WHERE token_hash = ${sha256Hex(token)} AND oauth FOR UPDATE`
          const row = rows[0]
          if (row === undefined || row.developerId !== developerId || row.agentId !== client.agentId) return { error: "unknown refresh token" } as const
          if (row.usedAt !== null) {
            const revoked = yield* grants.revoke(developerId, row.grantId)
            yield* anomalies.replay(developerId, row.agentId, row.grantId, "refresh_token", revoked?.length ?? 0)
            return { error: "refresh token already used; the grant has been revoked", replay: true } as const
          }
          if (row.expiresAt.getTime() <= ms) return { error: "refresh token expired" } as const
          const grant = yield* grants.find(developerId, row.grantId)
          if (grant === undefined || grant.status !== "active" || grant.expiresAt.getTime() <= ms) return { error: "the grant is no longer active" } as const
          const facts = yield* grantFacts(grant.id)
          if (form.resource !== undefined) {
            const canonical = canonicalResource(form.resource, config.production)
            if (!("ok" in canonical) || canonical.ok !== facts.resource) return yield* Effect.fail(new OAuthInvalidTarget({ message: "resource differs from the grant's" }))
          }
          const scopes = form.scope === undefined ? grant.scopes : form.scope.split(" ").filter((s) => s !== "")
          if (scopes.length === 0 || scopes.some((s) => !grant.scopes.includes(s))) {
            return yield* Effect.fail(new OAuthInvalidScope({ message: "scope may only narrow the grant's scopes" }))
          }
          // decisions §13: a policy deny is invalid_grant, and the refresh token is not used up (this transaction rolls back)
          yield* gate.check("token.refresh", {
            developerId, agentId: grant.agentId, principalId: grant.principalId, scopes: grant.scopes,
            grant: { id: grant.id, delegationDepth: grant.delegationDepth, parentGrantId: grant.parentGrantId },
            ...policyFacts(facts, client)
          }).pipe(Effect.catchTags({
            AgentSuspended: (e) => Effect.fail(new OAuthUnauthorizedClient({ message: e.message })),
            PrincipalInactive: (e) => Effect.fail(invalidGrant(e.message)),
            PolicyDenied: (e) => Effect.fail(invalidGrant(e.message))
          }))
          yield* sql`UPDATE refresh_tokens SET used_at = ${new Date(ms)} WHERE id = ${row.id}`
          return { tokens: yield* issue(grant, facts, client, scopes, "refresh_token", ms) } as const
        }).pipe(Effect.catchTag("SqlError", Effect.die))) as unknown as Effect.Effect<Outcome, TokenEndpointError>)
        return yield* finish(outcome)
      })

    const exchange = makeExchange({ sql, config, grants, gate, anomalies, resourceServers, signer, issue, audit })

    const token: TokensService["token"] = (developerId, form, credentials) =>
      Effect.gen(function*() {
        const grantType = form.grant_type
        if (grantType === undefined) return yield* Effect.fail(new OAuthInvalidRequest({ message: "grant_type is required" }))
        if (grantType === TOKEN_EXCHANGE) {
          const client = yield* clients.authenticate(developerId, credentials)
          return yield* exchange(developerId, client, form)
        }
        if (grantType !== "authorization_code" && grantType !== "refresh_token") {
          return yield* Effect.fail(new OAuthUnsupportedGrantType({ message: `grant_type ${grantType.slice(0, 100)} is not supported` }))
        }
        const client = yield* clients.authenticate(developerId, credentials)
        if (client.agentStatus !== "active") return yield* Effect.fail(new OAuthUnauthorizedClient({ message: "the client is suspended" }))
        if (!client.grantTypes.includes(grantType)) return yield* Effect.fail(new OAuthUnauthorizedClient({ message: `the client did not register ${grantType}` }))
        return yield* (grantType === "authorization_code" ? authorizationCode(developerId, client, form) : refresh(developerId, client, form))
      })

    const introspect: TokensService["introspect"] = (developerId, form, authorization) =>
      Effect.gen(function*() {
        // who asks: a resource server (sees only tokens for it) or the developer's API key (sees all of theirs)
        let audience: string | undefined
        if (authorization !== undefined && /^basic /i.test(authorization)) {
          const decoded = Buffer.from(authorization.slice(6).trim(), "base64").toString("utf8")
          const colon = decoded.indexOf(":")
          const rs = colon < 0 ? undefined : yield* resourceServers.authenticate(developerId, decodeURIComponent(decoded.slice(0, colon)), decodeURIComponent(decoded.slice(colon + 1)))
          if (rs === undefined) return yield* Effect.fail(new OAuthInvalidClient({ message: "resource server authentication failed" }))
          audience = rs.identifier
        } else {
          const key = bearerOf(authorization)
          const resolved = key === undefined ? undefined : yield* apiKeys.resolve(key)
          if (resolved === undefined || resolved.developer.id !== developerId) return yield* Effect.fail(new OAuthInvalidClient({ message: "authenticate as a resource server (Basic) or with the developer's API key" }))
        }
        const text = form.token
        if (text === undefined) return yield* Effect.fail(new OAuthInvalidRequest({ message: "token is required" }))
        // decisions §22.9: an introspection is a verification (billing meter)
        liveCounts.add(developerId, "verifications")
        const ms = yield* nowMillis
        const claims = yield* signer.verify(text, Math.floor(ms / 1000))
        if (claims === undefined || claims.iss !== issuerOf(config.oauth.issuerBase, developerId) || claims.dev !== developerId) return { active: false }
        if (audience !== undefined && claims.aud !== audience) return { active: false }
        const status = yield* grants.tokenStatus(claims as unknown as GrantTokenClaims)
        if (status !== "active") return { active: false }
        return {
          active: true, scope: claims.scope, client_id: claims.client_id, token_type: "Bearer", exp: claims.exp, iat: claims.iat, sub: claims.sub,
          aud: claims.aud, iss: claims.iss, jti: claims.jti, agt: claims.agt, grnt: claims.grnt, dev: claims.dev, ...(claims.act !== undefined ? { act: claims.act } : {})
        }
      })

    const revoke: TokensService["revoke"] = (developerId, form, credentials) =>
      Effect.gen(function*() {
        const client = yield* clients.authenticate(developerId, credentials)
        const text = form.token
        if (text === undefined) return yield* Effect.fail(new OAuthInvalidRequest({ message: "token is required" }))
        if (text.startsWith(REFRESH_PREFIX)) {
          const rows = yield* sql<{ grantId: string }>`SELECT grant_id FROM refresh_tokens
                                                     WHERE token_hash = ${sha256Hex(text)} AND oauth AND developer_id = ${developerId} AND agent_id = ${client.agentId}`.pipe(Effect.orDie)
          // RFC 7009: a refresh token's grant goes, through the one revocation path (cascade, events, status bits)
          if (rows[0] !== undefined) yield* grants.revoke(developerId, rows[0].grantId)
          return
        }
        const ms = yield* nowMillis
        const claims = yield* signer.verify(text, Math.floor(ms / 1000))
        if (claims !== undefined && claims.dev === developerId && claims.client_id === client.clientId) yield* grants.revokeToken(developerId, claims.jti)
      })

    return { token, introspect, revoke }
  })
)
