/**
 * The browser side of an OAuth authorization (decisions §22.5): `/authorize` checks the client and
 * its redirect URI first (a bad one is a page, never a redirect), then everything else (errors go
 * back to the client), and stores a section-3 request in state `authenticating` bound to this
 * browser by the `__Host-oauth_ix` cookie. The person signs in (the developer login bridge:
 * `/login` → the developer's page → `POST /v1/oauth/interactions/:id/principal` → the single-use
 * resume URL), then the gate decides as for every authorization; the consent page answers the rest.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { AnomalyCore } from "../anomalies/Core.ts"
import { OAUTH_INTERACTION_COOKIE } from "../authorization/OAuthRequests.ts"
import type { OAuthRequestFacts } from "../authorization/Lookups.ts"
import { Authorization } from "../authorization/Service.ts"
import { Config } from "../Config.ts"
import { Gate } from "../gate/Gate.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { NotFound } from "../platform/Errors.ts"
import { sha256Hex } from "../platform/Hash.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { openToCimd } from "./Cimd.ts"
import { Clients } from "./Clients.ts"
import { ResourceServers } from "./ResourceServers.ts"
import { CHALLENGE, canonicalResource, isLoopbackHost, issuerOf, redirectMatches, sameHash } from "./Rules.ts"

/** what a browser step answers: a redirect (with the cookie to set) or a page */
export type BrowserAnswer =
  | { readonly _tag: "Redirect"; readonly location: string; readonly cookie?: string }
  | { readonly _tag: "Page"; readonly status: number; readonly title: string; readonly message: string }

export type Params = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

/** the resume URL is valid this long (decisions §22.5) */
export const RESUME_TTL_MS = 2 * 60 * 1000

const page = (status: number, title: string, message: string): BrowserAnswer => ({ _tag: "Page", status, title, message })

export const errorRedirect = (redirectUri: string, params: Record<string, string | null | undefined>): BrowserAnswer => {
  const url = new URL(redirectUri)
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined) url.searchParams.set(k, v)
  return { _tag: "Redirect", location: url.toString() }
}

interface InteractionRow {
  readonly id: string
  readonly developerId: string
  readonly agentId: string
  readonly principalId: string
  readonly scopes: ReadonlyArray<string>
  readonly status: string
  readonly expiresAt: Date
  readonly redirectUri: string
  readonly state: string | null
  readonly oauth: OAuthRequestFacts
  readonly interactionCookieHash: string | null
  readonly interactionTokenHash: string | null
  readonly interactionTokenExpiresAt: Date | null
  readonly fidoVerifiedAt: Date | null
}

export interface FlowService {
  readonly authorize: (developerId: string, params: Params) => Effect.Effect<BrowserAnswer>
  readonly login: (developerId: string, interactionId: string, cookie: string | undefined) => Effect.Effect<BrowserAnswer>
  readonly interaction: (developerId: string, id: string) => Effect.Effect<Record<string, unknown>, NotFound>
  readonly setPrincipal: (developerId: string, id: string, principalId: string) => Effect.Effect<{ redirectTo: string }, NotFound>
  readonly resume: (developerId: string, id: string, token: string | undefined, cookie: string | undefined) => Effect.Effect<BrowserAnswer>
  /**
   * The person is signed in (principal, method and auth_time stored on the request, which still
   * waits in `authenticating`): the gate decides, then the client gets its code or error, or the
   * browser goes to the consent page. Callers have checked the interaction cookie.
   */
  readonly proceed: (developerId: string, id: string) => Effect.Effect<BrowserAnswer>
}

export class Flow extends Context.Tag("agent-auth/OAuthFlow")<Flow, FlowService>() {}

export const FlowLive = Layer.effect(
  Flow,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const clients = yield* Clients
    const resourceServers = yield* ResourceServers
    const gate = yield* Gate
    const authorization = yield* Authorization
    const anomalies = yield* AnomalyCore
    const audit = yield* AuditChain

    const single = (params: Params, name: string): string | undefined | null => {
      const v = params[name]
      return v === undefined ? undefined : typeof v === "string" ? v : null
    }

    const authorize: FlowService["authorize"] = (developerId, params) =>
      Effect.gen(function*() {
        const issuer = issuerOf(config.oauth.issuerBase, developerId)
        // 1. the client and its redirect URI, before anything: a bad one never redirects
        const clientId = single(params, "client_id")
        if (clientId === undefined || clientId === null || clientId === "") return page(400, "Invalid request", "The application sent no valid client_id.")
        const found = yield* clients.lookup(developerId, clientId).pipe(Effect.either)
        if (found._tag === "Left") {
          const known = found.left.message === "unknown client"
          return page(400, "Unknown application", known ? "The application asking for access is not registered here." : `The application cannot be used: ${found.left.message}.`)
        }
        const client = found.right
        const given = single(params, "redirect_uri")
        if (given === null) return page(400, "Invalid request", "The application sent redirect_uri twice.")
        const redirectUri = given === undefined
          ? (client.redirectUris.length === 1 ? client.redirectUris[0]! : undefined)
          : client.redirectUris.some((r) => redirectMatches(r, given)) ? given : undefined
        if (redirectUri === undefined) return page(400, "Invalid redirect", "The application's redirect_uri is not one it registered.")
        const state = single(params, "state")
        const back = (error: string, description: string) =>
          errorRedirect(redirectUri, { error, error_description: description, state: typeof state === "string" ? state : undefined, iss: issuer })
        // 2. everything else goes back to the client
        const duplicate = Object.entries(params).find(([, v]) => Array.isArray(v))
        if (duplicate !== undefined) return back("invalid_request", `${duplicate[0]} was sent more than once`)
        if (params.request !== undefined || params.request_uri !== undefined) return back("invalid_request", "request and request_uri are not supported")
        if (single(params, "response_type") !== "code") return back("unsupported_response_type", "only response_type=code is supported")
        const challenge = single(params, "code_challenge")
        const method = single(params, "code_challenge_method")
        if (typeof challenge !== "string" || method !== "S256") return back("invalid_request", "PKCE with code_challenge_method=S256 is required")
        if (!CHALLENGE.test(challenge)) return back("invalid_request", "code_challenge must be 43 base64url characters")
        if (client.agentStatus !== "active") return back("unauthorized_client", "the client is suspended")
        if (!client.grantTypes.includes("authorization_code")) return back("unauthorized_client", "the client did not register the authorization_code grant")
        // the resource: one of the developer's servers open to this client (RFC 8707)
        const servers = (yield* resourceServers.ofDeveloper(developerId)).filter((rs) =>
          client.origin === "api" || (client.origin === "dcr" && rs.openDcr) || (client.origin === "cimd" && openToCimd([rs], client.clientId).length > 0))
        const resourceParam = single(params, "resource")
        let rs = servers.length === 1 && resourceParam === undefined ? servers[0] : undefined
        if (typeof resourceParam === "string") {
          const canonical = canonicalResource(resourceParam, config.production)
          rs = "ok" in canonical ? servers.find((s) => s.identifier === canonical.ok) : undefined
        }
        if (rs === undefined) return back("invalid_target", "resource is unknown, missing or not open to this client")
        // the scopes: asked, else the client's registered scope, else the server's defaults; under the ceiling
        const scopeParam = single(params, "scope")
        const asked = (typeof scopeParam === "string" ? scopeParam : client.scope ?? rs.defaultScopes.join(" "))
          .split(" ").filter((s) => s !== "" && s !== "offline_access")
        if (asked.length === 0) return back("invalid_scope", "no scope was asked for and the resource has no default scopes")
        const names = rs.scopes.map((s) => s.name)
        const ceiling = client.verified ? client.agentScopes.filter((s) => names.includes(s)) : names
        const above = asked.filter((s) => !ceiling.includes(s))
        if (above.length > 0) {
          yield* anomalies.scopeRefused(developerId, client.agentId, "INVALID_SCOPES")
          return back("invalid_scope", `scopes not allowed for this client: ${above.join(" ").slice(0, 300)}`)
        }
        // 3. the request, waiting for the person to sign in, bound to this browser
        const ms = yield* nowMillis
        const id = newId("areq", ms)
        const cookie = randomBytes(32).toString("base64url")
        const redirect = new URL(redirectUri)
        const clientUri = client.clientUri === null ? null : (() => {
          try {
            return new URL(client.clientUri!).host
          } catch {
            return null
          }
        })()
        const facts: OAuthRequestFacts = {
          issuer,
          resourceServerId: rs.id,
          resource: rs.identifier,
          resourceName: rs.name,
          clientId: client.clientId,
          clientName: client.clientName ?? client.agentName,
          clientOrigin: client.origin,
          verified: client.verified,
          clientHost: client.origin === "cimd" ? new URL(client.clientId).host : clientUri,
          redirectHost: redirect.protocol === "http:" || redirect.protocol === "https:" ? redirect.host : redirect.protocol,
          redirectWarning: !(redirect.protocol === "https:" && !isLoopbackHost(redirect.hostname)),
          scopeDescriptions: Object.fromEntries(rs.scopes.filter((s) => s.description !== undefined).map((s) => [s.name, s.description!])),
          loginHint: typeof params.login_hint === "string" ? params.login_hint.slice(0, 320) : null
        }
        yield* sql`INSERT INTO auth_requests (id, developer_id, agent_id, principal_id, scopes, grant_ttl_seconds, redirect_uri, state, audience,
                     code_challenge, code_challenge_method, status, expires_at, created_at, oauth, interaction_cookie_hash)
                   VALUES (${id}, ${developerId}, ${client.agentId}, '', ${[...new Set(asked)] as any}, ${rs.grantTtlSeconds}, ${redirectUri},
                           ${typeof state === "string" ? state : null}, ${rs.identifier}, ${challenge}, 'S256', 'authenticating',
                           ${new Date(ms + config.oauth.interactionTtlMs)}, ${new Date(ms)}, ${JSON.stringify(facts)}::jsonb, ${sha256Hex(cookie)})`.pipe(Effect.orDie)
        return {
          _tag: "Redirect",
          location: `${issuer}/login?ix=${id}`,
          cookie: `${OAUTH_INTERACTION_COOKIE}=${cookie}; Path=/; Max-Age=${Math.floor(config.oauth.interactionTtlMs / 1000)}; HttpOnly; Secure; SameSite=Lax`
        } as const
      })

    const load = (developerId: string, id: string) =>
      sql<InteractionRow>`SELECT id, developer_id, agent_id, principal_id, scopes, status, expires_at, redirect_uri, state, oauth,
                                 interaction_cookie_hash, interaction_token_hash, interaction_token_expires_at, fido_verified_at
                          FROM auth_requests WHERE id = ${id} AND developer_id = ${developerId} AND oauth IS NOT NULL`.pipe(
        Effect.map((rows) => rows[0]),
        Effect.orDie
      )

    const STALE = page(400, "Sign-in expired", "This sign-in is no longer valid. Go back to the application and start again.")
    const NOT_YOURS = page(403, "Not allowed", "This sign-in can be finished only in the browser that started it. Nothing was shared.")

    const login: FlowService["login"] = (developerId, id, cookie) =>
      Effect.gen(function*() {
        const row = yield* load(developerId, id)
        const ms = yield* nowMillis
        if (row === undefined || row.status !== "authenticating" || row.expiresAt.getTime() <= ms) return STALE
        if (cookie === undefined || !sameHash(row.interactionCookieHash, sha256Hex(cookie))) return NOT_YOURS
        const rs = (yield* resourceServers.ofDeveloper(developerId)).find((s) => s.id === row.oauth.resourceServerId)
        const url = rs?.login.developerLoginUrl
        if (url === undefined) return page(503, "Sign-in unavailable", "This service has no way for you to sign in yet.")
        const target = new URL(url)
        target.searchParams.set("interaction", id)
        return { _tag: "Redirect", location: target.toString() } as const
      })

    const interaction: FlowService["interaction"] = (developerId, id) =>
      Effect.gen(function*() {
        const row = yield* load(developerId, id)
        if (row === undefined) return yield* Effect.fail(new NotFound({ message: "Interaction not found" }))
        const ms = yield* nowMillis
        return {
          interactionId: row.id,
          status: row.status === "authenticating" && row.expiresAt.getTime() <= ms ? "expired" : row.status,
          clientId: row.oauth.clientId,
          clientName: row.oauth.clientName,
          resourceServerId: row.oauth.resourceServerId,
          resource: row.oauth.resource,
          scopes: [...row.scopes],
          expiresAt: row.expiresAt.toISOString()
        }
      })

    const setPrincipal: FlowService["setPrincipal"] = (developerId, id, principalId) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const token = randomBytes(32).toString("base64url")
        const rows = yield* sql<{ id: string }>`
          UPDATE auth_requests SET principal_id = ${principalId}, auth_method = 'developer', interaction_token_hash = ${sha256Hex(token)},
                 interaction_token_expires_at = ${new Date(ms + RESUME_TTL_MS)}
          WHERE id = ${id} AND developer_id = ${developerId} AND oauth IS NOT NULL AND status = 'authenticating' AND expires_at > ${new Date(ms)}
            AND auth_time IS NULL
          RETURNING id`.pipe(Effect.orDie)
        if (rows.length === 0) return yield* Effect.fail(new NotFound({ message: "Interaction not found or no longer waiting for sign-in" }))
        return { redirectTo: `${issuerOf(config.oauth.issuerBase, developerId)}/interaction/${id}/resume?token=${token}` }
      })

    /** a refusal of the gate, as the error the client gets */
    const refusalError = (tag: string): string =>
      tag === "AgentSuspended" ? "unauthorized_client" : tag === "QuotaExceeded" || tag === "PlanLimitExceeded" ? "temporarily_unavailable" : "access_denied"

    const resume: FlowService["resume"] = (developerId, id, token, cookie) =>
      Effect.gen(function*() {
        const row = yield* load(developerId, id)
        const ms = yield* nowMillis
        if (row === undefined || row.status !== "authenticating" || row.expiresAt.getTime() <= ms || token === undefined) return STALE
        if (cookie === undefined || !sameHash(row.interactionCookieHash, sha256Hex(cookie))) return NOT_YOURS
        if (row.interactionTokenExpiresAt === null || row.interactionTokenExpiresAt.getTime() <= ms || !sameHash(row.interactionTokenHash, sha256Hex(token))) {
          return STALE
        }
        // decisions §22.5: the developer's login is the first method; `fidoRequired` adds a passkey after it
        const signedIn = yield* sql<{ fidoRequired: boolean }>`
          UPDATE auth_requests r SET auth_time = ${new Date(ms)}, interaction_token_hash = NULL FROM developers d
          WHERE r.id = ${id} AND r.status = 'authenticating' AND r.interaction_token_hash = ${sha256Hex(token)} AND d.id = r.developer_id
          RETURNING d.fido_required`.pipe(Effect.orDie)
        if (signedIn.length === 0) return STALE
        if (signedIn[0]!.fidoRequired) return { _tag: "Redirect", location: `${row.oauth.issuer}/login/passkey?ix=${id}` } as const
        return yield* proceed(developerId, id)
      })

    const proceed: FlowService["proceed"] = (developerId, id) =>
      Effect.gen(function*() {
        const row = yield* load(developerId, id)
        const ms = yield* nowMillis
        if (row === undefined || row.status !== "authenticating" || row.expiresAt.getTime() <= ms || row.principalId === "") return STALE
        const back = (params: Record<string, string | undefined>) => errorRedirect(row.redirectUri, { ...params, state: row.state, iss: row.oauth.issuer })
        const developer = (yield* sql<{ mode: string }>`SELECT mode FROM developers WHERE id = ${developerId}`.pipe(Effect.orDie))[0]
        // decisions §20: the person is known, so the gate decides now, as for POST /v1/authorize, in the request's transaction
        const outcome = yield* gate.transaction(Effect.gen(function*() {
          const claimed = yield* sql`UPDATE auth_requests SET status = 'pending', auth_time = COALESCE(auth_time, ${new Date(ms)}), interaction_token_hash = NULL
                                     WHERE id = ${id} AND status = 'authenticating' RETURNING id`
          if (claimed.length === 0) return { stale: true } as const
          const allowed = yield* gate.check("authorize", {
            developerId, agentId: row.agentId, principalId: row.principalId, scopes: row.scopes,
            sandbox: developer?.mode === "sandbox", cap: "activeGrants", meter: "authorizations", passkeyAsserted: row.fidoVerifiedAt !== null,
            oauth: { resourceServerId: row.oauth.resourceServerId, resource: row.oauth.resource, clientOrigin: row.oauth.clientOrigin }
          })
          if (allowed.approvalMethod === null) return { consent: true } as const
          const approval = yield* authorization.approveAllowed(id, allowed)
          return { code: approval.code } as const
        })).pipe(
          Effect.catchTag("SqlError" as any, Effect.die),
          Effect.catchAll((refused: { _tag: string; message: string }) => Effect.succeed({ refused } as const))
        )
        if ("stale" in outcome) return STALE
        if ("refused" in outcome) {
          yield* sql.withTransaction(Effect.gen(function*() {
            yield* sql`UPDATE auth_requests SET status = 'denied', decided_at = ${new Date(ms)} WHERE id = ${id}`
            yield* audit.append({
              developerId, action: "service.oauth.authorization_denied", agentId: row.agentId, principalId: row.principalId,
              metadata: { resourceServerId: row.oauth.resourceServerId, clientId: row.oauth.clientId, refusal: outcome.refused._tag }
            })
          })).pipe(Effect.orDie)
          return back({ error: refusalError(outcome.refused._tag), error_description: outcome.refused.message })
        }
        if ("code" in outcome) {
          yield* clients.markAuthorized(row.agentId)
          return back({ code: outcome.code })
        }
        return { _tag: "Redirect", location: `${config.publicBaseUrl}/consent?req=${id}` } as const
      })

    return { authorize, login, interaction, setPrincipal, resume, proceed }
  })
)
