/**
 * OAuth clients (decisions §22.3): every client is an agent of the issuer's developer with an
 * `oauth` profile. Dynamic registration (RFC 7591) makes a new, unverified agent, and so does a
 * client ID metadata document's first use (Cimd.ts); the token, revocation and authorization
 * endpoints find a client and authenticate it here.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { AnomalyCore } from "../anomalies/Core.ts"
import { Entitlements } from "../billing/Entitlements.ts"
import type { Developer } from "../platform/Auth.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { NotFound } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { sha256Hex } from "../platform/Hash.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { Config } from "../Config.ts"
import { OAuthInvalidClient, OAuthInvalidClientMetadata, OAuthInvalidRedirectUri, OAuthInvalidRequest, OAuthNotFound } from "./Errors.ts"
import { Cimd } from "./Cimd.ts"
import { isCimdClientId } from "./CimdDocument.ts"
import { ResourceServers } from "./ResourceServers.ts"
import { isNativeRedirect, oauthRedirectProblem, sameHash } from "./Rules.ts"

export interface OAuthClient {
  readonly agentId: string
  readonly developerId: string
  readonly clientId: string
  readonly origin: "api" | "dcr" | "cimd"
  readonly clientType: "public" | "confidential"
  readonly tokenEndpointAuthMethod: "none" | "client_secret_basic" | "client_secret_post"
  readonly redirectUris: ReadonlyArray<string>
  readonly grantTypes: ReadonlyArray<string>
  readonly applicationType: "web" | "native"
  readonly clientName: string | null
  readonly clientUri: string | null
  readonly scope: string | null
  readonly secretHash: string | null
  readonly previousSecretHash: string | null
  readonly previousSecretUntil: Date | null
  readonly verified: boolean
  readonly tokenExchange: boolean
  /** the agent's status; a deleted agent is no client */
  readonly agentStatus: string
  readonly agentName: string
  readonly agentScopes: ReadonlyArray<string>
}

/**
 * A client: its OAuth profile (DCR, or an API agent given a secret), else an API agent with redirect
 * URIs, which is a public client of its developer (decisions §22.3). An API agent's redirect URIs are
 * always the agent's own (PATCH /v1/agents), never a copy.
 */
const CLIENT_SQL = `SELECT c.agent_id, c.developer_id, c.client_id, c.origin, c.client_type, c.token_endpoint_auth_method,
    CASE WHEN c.origin = 'api' THEN a.redirect_uris ELSE c.redirect_uris END AS redirect_uris,
    c.grant_types, c.application_type, c.client_name, c.client_uri, c.scope, c.secret_hash, c.previous_secret_hash, c.previous_secret_until,
    c.verified, c.token_exchange, a.status AS agent_status, a.name AS agent_name, a.scopes AS agent_scopes
  FROM oauth_clients c JOIN agents a ON a.id = c.agent_id AND a.deleted_at IS NULL
  WHERE c.developer_id = $1 AND c.client_id = $2
  UNION ALL
  SELECT a.id, a.developer_id, a.id, 'api', 'public', 'none', a.redirect_uris, ARRAY['authorization_code', 'refresh_token'], 'web', a.name, NULL, NULL,
    NULL, NULL, NULL, true, false, a.status, a.name, a.scopes
  FROM agents a
  WHERE a.developer_id = $1 AND a.id = $2 AND a.deleted_at IS NULL AND cardinality(a.redirect_uris) > 0
    AND NOT EXISTS (SELECT 1 FROM oauth_clients c WHERE c.agent_id = a.id)`

const AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"] as const
const GRANT_TYPES = ["authorization_code", "refresh_token"]

/** the credentials a token-endpoint request presents: Basic, or form fields (RFC 6749 §2.3.1) */
export interface PresentedCredentials {
  readonly authorization: string | undefined
  readonly clientId: string | undefined
  readonly clientSecret: string | undefined
}

const formDecode = (s: string) => decodeURIComponent(s.replace(/\+/g, " "))

export interface ClientsService {
  readonly register: (developerId: string, metadata: unknown) => Effect.Effect<Record<string, unknown>, OAuthInvalidClientMetadata | OAuthInvalidRedirectUri | OAuthNotFound>
  readonly find: (developerId: string, clientId: string) => Effect.Effect<OAuthClient | undefined>
  /** a client to use now: a stored one, or a CIMD URL whose document is fetched (or cached) and checked first */
  readonly lookup: (developerId: string, clientId: string) => Effect.Effect<OAuthClient, OAuthInvalidClient>
  /** decisions §22.6: who calls, authenticated as registered (a wrong, missing or extra secret is invalid_client) */
  readonly authenticate: (developerId: string, presented: PresentedCredentials) => Effect.Effect<OAuthClient, OAuthInvalidClient | OAuthInvalidRequest>
  /**
   * decisions §22.3: an API agent's client secret (`cs_…`, shown once, stored as SHA-256); the agent
   * becomes a confidential client (client_secret_basic or _post) and the previous secret stays valid
   * 24 h. `tokenExchange` lets it use RFC 8693 token exchange.
   */
  readonly issueSecret: (developerId: string, agentId: string, options: { readonly tokenExchange?: boolean | undefined }) => Effect.Effect<
    { clientSecret: string; createdAt: string; tokenExchange: boolean },
    NotFound
  >
  /** the first completed authorization of a DCR client (it is then kept past 24 h) */
  readonly markAuthorized: (agentId: string) => Effect.Effect<void>
}

export class Clients extends Context.Tag("agent-auth/OAuthClients")<Clients, ClientsService>() {}

export const ClientsLive = Layer.effect(
  Clients,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const resourceServers = yield* ResourceServers
    const events = yield* Events
    const audit = yield* AuditChain
    const anomalies = yield* AnomalyCore
    const cimd = yield* Cimd
    const config = yield* Config
    const entitlements = yield* Entitlements

    const find: ClientsService["find"] = (developerId, clientId) =>
      sql.unsafe<OAuthClient>(CLIENT_SQL, [developerId, clientId]).pipe(Effect.map((rows) => rows[0]), Effect.orDie)

    const lookup: ClientsService["lookup"] = (developerId, clientId) =>
      Effect.gen(function*() {
        if (isCimdClientId(clientId, config.oauth.cimd.allowPrivateHosts)) {
          const resolved = yield* cimd.resolve(developerId, clientId)
          if (resolved.problem !== undefined) return yield* Effect.fail(new OAuthInvalidClient({ message: resolved.problem }))
        }
        const client = yield* find(developerId, clientId)
        if (client === undefined) return yield* Effect.fail(new OAuthInvalidClient({ message: "unknown client" }))
        return client
      })

    const register: ClientsService["register"] = (developerId, input) =>
      Effect.gen(function*() {
        const servers = yield* resourceServers.ofDeveloper(developerId)
        if (!servers.some((rs) => rs.openDcr)) return yield* Effect.fail(new OAuthNotFound({ message: "Dynamic client registration is not open for this issuer" }))
        const bad = (message: string) => Effect.fail(new OAuthInvalidClientMetadata({ message }))
        if (typeof input !== "object" || input === null || Array.isArray(input)) return yield* bad("the body must be a JSON object")
        const m = input as Record<string, unknown>
        const str = (k: string, max = 2048) => m[k] === undefined ? undefined : typeof m[k] === "string" && (m[k] as string).length <= max ? m[k] as string : null
        if (m.jwks !== undefined || m.jwks_uri !== undefined) return yield* bad("jwks and jwks_uri are not accepted (private_key_jwt is not offered)")
        const redirects = m.redirect_uris
        if (!Array.isArray(redirects) || redirects.length < 1 || redirects.length > 20 || redirects.some((r) => typeof r !== "string")) {
          return yield* Effect.fail(new OAuthInvalidRedirectUri({ message: "redirect_uris must list 1 to 20 URIs" }))
        }
        const uris = redirects as Array<string>
        const declaredType = str("application_type")
        if (declaredType === null || (declaredType !== undefined && declaredType !== "web" && declaredType !== "native")) return yield* bad("application_type must be web or native")
        const applicationType: "web" | "native" = declaredType ?? (uris.every(isNativeRedirect) ? "native" : "web")
        for (const uri of uris) {
          const problem = oauthRedirectProblem(uri, applicationType)
          if (problem !== undefined) return yield* Effect.fail(new OAuthInvalidRedirectUri({ message: problem }))
        }
        const method = str("token_endpoint_auth_method") ?? "client_secret_basic"
        if (method === null || !(AUTH_METHODS as ReadonlyArray<string>).includes(method)) {
          return yield* bad("token_endpoint_auth_method must be none, client_secret_basic or client_secret_post")
        }
        const grantTypes = m.grant_types === undefined ? ["authorization_code"] : m.grant_types
        if (!Array.isArray(grantTypes) || grantTypes.length === 0 || grantTypes.some((g) => typeof g !== "string" || !GRANT_TYPES.includes(g))) {
          return yield* bad("grant_types may hold only authorization_code and refresh_token")
        }
        const responseTypes = m.response_types === undefined ? ["code"] : m.response_types
        if (!Array.isArray(responseTypes) || responseTypes.length !== 1 || responseTypes[0] !== "code") return yield* bad("response_types must be [\"code\"]")
        const clientName = str("client_name", 100)
        if (clientName === null) return yield* bad("client_name must be a string of at most 100 characters")
        const optional: Record<string, string> = {}
        for (const k of ["client_uri", "logo_uri", "scope", "software_id", "software_version"]) {
          const v = str(k)
          if (v === null) return yield* bad(`${k} must be a string`)
          if (v !== undefined) optional[k] = v
        }
        for (const k of ["client_uri", "logo_uri"]) {
          if (optional[k] !== undefined && !/^https?:\/\//.test(optional[k]!)) return yield* bad(`${k} must be an http(s) URL`)
        }
        const contacts = m.contacts
        if (contacts !== undefined && (!Array.isArray(contacts) || contacts.length > 20 || contacts.some((c) => typeof c !== "string" || c.length > 320))) {
          return yield* bad("contacts must be a list of strings")
        }
        const ms = yield* nowMillis
        const agentId = newId("ag", ms)
        const confidential = method !== "none"
        const secret = confidential ? `cs_${randomBytes(32).toString("base64url")}` : undefined
        // decisions §22.3: the plan's oauthClients cap, counted in the registering transaction
        const [owner] = yield* sql<Pick<Developer, "id" | "plan">>`SELECT id, plan FROM developers WHERE id = ${developerId}`.pipe(Effect.orDie)
        yield* entitlements.withinCap(owner!, "oauthClients", sql.withTransaction(Effect.gen(function*() {
          yield* sql`INSERT INTO agents (id, developer_id, name, description, scopes, status, created_at, updated_at, redirect_uris)
                     VALUES (${agentId}, ${developerId}, ${clientName ?? "Unnamed OAuth client"}, ${null}, ${[] as any}, 'active',
                             ${new Date(ms)}, ${new Date(ms)}, ${uris as any})`
          yield* sql`INSERT INTO oauth_clients (agent_id, developer_id, client_id, origin, client_type, token_endpoint_auth_method, redirect_uris,
                       grant_types, application_type, client_name, client_uri, scope, metadata, secret_hash, verified, created_at)
                     VALUES (${agentId}, ${developerId}, ${agentId}, 'dcr', ${confidential ? "confidential" : "public"}, ${method}, ${uris as any},
                             ${grantTypes as any}, ${applicationType}, ${clientName ?? null}, ${optional.client_uri ?? null}, ${optional.scope ?? null},
                             ${JSON.stringify({ ...optional, ...(contacts !== undefined ? { contacts } : {}) })}::jsonb,
                             ${secret === undefined ? null : sha256Hex(secret)}, false, ${new Date(ms)})`
          yield* events.emit(developerId, "oauth.client.registered", { agentId, origin: "dcr" })
          yield* audit.append({ developerId, action: "service.oauth.client_registered", agentId, metadata: { origin: "dcr" } })
          yield* anomalies.clientRegistered(developerId, agentId)
        })).pipe(Effect.orDie)).pipe(Effect.catchTag("PlanLimitExceeded", () => bad("client limit reached")))
        return {
          client_id: agentId,
          client_id_issued_at: Math.floor(ms / 1000),
          redirect_uris: uris,
          token_endpoint_auth_method: method,
          grant_types: grantTypes,
          response_types: ["code"],
          application_type: applicationType,
          ...(clientName !== undefined ? { client_name: clientName } : {}),
          ...optional,
          ...(contacts !== undefined ? { contacts } : {}),
          ...(secret !== undefined ? { client_secret: secret, client_secret_expires_at: 0 } : {})
        }
      })

    const authenticate: ClientsService["authenticate"] = (developerId, presented) =>
      Effect.gen(function*() {
        let basic: { id: string; secret: string } | undefined
        if (presented.authorization !== undefined && /^basic /i.test(presented.authorization)) {
          try {
            const decoded = Buffer.from(presented.authorization.slice(6).trim(), "base64").toString("utf8")
            const colon = decoded.indexOf(":")
            if (colon < 0) throw new Error("no colon")
            basic = { id: formDecode(decoded.slice(0, colon)), secret: formDecode(decoded.slice(colon + 1)) }
          } catch {
            return yield* Effect.fail(new OAuthInvalidClient({ message: "malformed Basic credentials" }))
          }
        }
        if (basic !== undefined && presented.clientSecret !== undefined) {
          return yield* Effect.fail(new OAuthInvalidRequest({ message: "use one client authentication method, not both" }))
        }
        if (basic !== undefined && presented.clientId !== undefined && presented.clientId !== basic.id) {
          return yield* Effect.fail(new OAuthInvalidRequest({ message: "client_id differs from the authenticated client" }))
        }
        const clientId = basic?.id ?? presented.clientId
        if (clientId === undefined) return yield* Effect.fail(new OAuthInvalidClient({ message: "client authentication is required" }))
        const client = yield* lookup(developerId, clientId)
        const secret = basic?.secret ?? presented.clientSecret
        if (client.clientType === "public") {
          if (secret !== undefined) return yield* Effect.fail(new OAuthInvalidClient({ message: "a public client sends no secret" }))
          return client
        }
        const used = basic !== undefined ? "client_secret_basic" : presented.clientSecret !== undefined ? "client_secret_post" : undefined
        if (secret === undefined || used === undefined) return yield* Effect.fail(new OAuthInvalidClient({ message: "client authentication is required" }))
        const ms = yield* nowMillis
        const hash = sha256Hex(secret)
        const ok = sameHash(client.secretHash, hash) ||
          (client.previousSecretUntil !== null && client.previousSecretUntil.getTime() > ms && sameHash(client.previousSecretHash, hash))
        if (!ok) return yield* Effect.fail(new OAuthInvalidClient({ message: "client authentication failed" }))
        return client
      })

    const issueSecret: ClientsService["issueSecret"] = (developerId, agentId, options) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const secret = `cs_${randomBytes(32).toString("base64url")}`
        const outcome = yield* sql.withTransaction(Effect.gen(function*() {
          const agents = yield* sql<{ id: string; origin: string | null; tokenExchange: boolean | null }>`
            SELECT a.id, c.origin, c.token_exchange FROM agents a LEFT JOIN oauth_clients c ON c.agent_id = a.id
            WHERE a.id = ${agentId} AND a.developer_id = ${developerId} AND a.deleted_at IS NULL FOR UPDATE OF a`
          const agent = agents[0]
          // DCR (and CIMD) clients are read-only in the API (decisions §22.3)
          if (agent === undefined || (agent.origin !== null && agent.origin !== "api")) return undefined
          const tokenExchange = options.tokenExchange ?? agent.tokenExchange ?? false
          yield* sql`INSERT INTO oauth_clients (agent_id, developer_id, client_id, origin, client_type, token_endpoint_auth_method, redirect_uris, grant_types,
                       application_type, secret_hash, token_exchange, verified, created_at)
                     VALUES (${agentId}, ${developerId}, ${agentId}, 'api', 'confidential', 'client_secret_basic', ${[] as any},
                             ${["authorization_code", "refresh_token"] as any}, 'web', ${sha256Hex(secret)}, ${tokenExchange}, true, ${new Date(ms)})
                     ON CONFLICT (agent_id) DO UPDATE SET previous_secret_hash = oauth_clients.secret_hash,
                       previous_secret_until = ${new Date(ms + 24 * 3600 * 1000)}, secret_hash = EXCLUDED.secret_hash, token_exchange = EXCLUDED.token_exchange`
          if (agent.origin === null) {
            yield* events.emit(developerId, "oauth.client.registered", { agentId, origin: "api" })
            yield* audit.append({ developerId, action: "service.oauth.client_registered", agentId, metadata: { origin: "api" } })
          }
          return { tokenExchange }
        })).pipe(Effect.orDie)
        if (outcome === undefined) return yield* Effect.fail(new NotFound({ message: "Agent not found, or a registered client whose profile is read-only" }))
        return { clientSecret: secret, createdAt: new Date(ms).toISOString(), tokenExchange: outcome.tokenExchange }
      })

    const markAuthorized: ClientsService["markAuthorized"] = (agentId) =>
      Effect.flatMap(nowMillis, (ms) => sql`UPDATE oauth_clients SET authorized_at = ${new Date(ms)} WHERE agent_id = ${agentId} AND authorized_at IS NULL`).pipe(
        Effect.asVoid,
        Effect.orDie
      )

    return { register, find, lookup, authenticate, issueSecret, markAuthorized }
  })
)
