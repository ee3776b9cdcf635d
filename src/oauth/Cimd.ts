/**
 * CIMD clients (decisions §22.3): a client_id that is the URL of its own metadata document. While some
 * resource server of the developer has `cimd` on (and lists the host, when it keeps a list), the
 * document is fetched under the outbound rules, checked, and kept as a row (any instance serves any
 * step), fresh per Cache-Control within [5 min, 24 h]. Its first successful use makes the client an
 * unverified agent of the developer (origin `cimd`, public); later copies update its name and
 * redirect URIs. The document itself is never logged.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Entitlements } from "../billing/Entitlements.ts"
import { Config } from "../Config.ts"
import type { Developer } from "../platform/Auth.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { CIMD_STALE_GRACE_MS, type CimdDocument, cimdFreshnessMs, cimdHost, cimdUrlProblem, readCimdDocument } from "./CimdDocument.ts"
import { CimdFetch } from "./CimdFetch.ts"
import { type ResourceServer, ResourceServers } from "./ResourceServers.ts"

/** the resource servers a CIMD client of this host may reach: `cimd` on, and the host listed when a list is kept */
export const openToCimd = (servers: ReadonlyArray<ResourceServer>, clientId: string) => {
  const host = cimdHost(clientId)
  return servers.filter((rs) => rs.openCimd && (rs.cimdAllowedHosts === null || rs.cimdAllowedHosts.includes(host)))
}

export interface CimdService {
  /** the document behind `clientId` made current as this developer's client, or why it cannot be used */
  readonly resolve: (developerId: string, clientId: string) => Effect.Effect<{ readonly problem?: string }>
}

export class Cimd extends Context.Tag("agent-auth/OAuthCimd")<Cimd, CimdService>() {}

interface CachedRow {
  readonly document: CimdDocument
  readonly freshUntil: Date
}

interface ClientRow {
  readonly agentId: string
  readonly deleted: boolean
  readonly clientName: string | null
  readonly redirectUris: ReadonlyArray<string>
  readonly grantTypes: ReadonlyArray<string>
  readonly applicationType: string
  readonly clientUri: string | null
  readonly scope: string | null
}

/** a transport failure or an overloaded server may pass; a definite answer (4xx, an invalid document) is the publisher's word */
const transient = (status: number) => status >= 500 || status === 408 || status === 429

export const CimdLive = Layer.effect(
  Cimd,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const fetcher = yield* CimdFetch
    const resourceServers = yield* ResourceServers
    const events = yield* Events
    const entitlements = yield* Entitlements
    const audit = yield* AuditChain

    /** the current document: the fresh cached copy, else a new fetch, else (transport failure) a copy within its grace */
    const documentOf = (clientId: string) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const cached = (yield* sql<CachedRow>`SELECT document, fresh_until FROM oauth_cimd_documents WHERE url = ${clientId}`)[0]
        if (cached !== undefined && cached.freshUntil.getTime() > ms) return { ok: cached.document } as const
        const host = cimdHost(clientId)
        const fetched = yield* fetcher.get(clientId)
        const stale = cached !== undefined && cached.freshUntil.getTime() + CIMD_STALE_GRACE_MS > ms ? cached.document : undefined
        if (fetched._tag === "Failed" || transient(fetched.status)) {
          const reason = fetched._tag === "Failed" ? fetched.reason : `answered ${fetched.status}`
          yield* Effect.logWarning("client metadata document fetch failed").pipe(Effect.annotateLogs({ host, reason, cachedCopyUsed: stale !== undefined }))
          return stale !== undefined ? { ok: stale } as const : { problem: `the client metadata document could not be fetched (${reason})` } as const
        }
        const read = fetched.status === 200 ? readCimdDocument(fetched.text, clientId) : { problem: `the client metadata document answered ${fetched.status}` }
        if ("problem" in read) {
          // the publisher's own answer: the old copy is not used against it
          yield* sql`DELETE FROM oauth_cimd_documents WHERE url = ${clientId}`
          yield* Effect.logWarning("client metadata document refused").pipe(Effect.annotateLogs({ host, reason: read.problem }))
          return read
        }
        const freshUntil = new Date(ms + cimdFreshnessMs(fetched.cacheControl))
        yield* sql`INSERT INTO oauth_cimd_documents (url, document, fetched_at, fresh_until)
                   VALUES (${clientId}, ${JSON.stringify(read.ok)}::jsonb, ${new Date(ms)}, ${freshUntil})
                   ON CONFLICT (url) DO UPDATE SET document = EXCLUDED.document, fetched_at = EXCLUDED.fetched_at, fresh_until = EXCLUDED.fresh_until`
        return read
      })

    const clientRow = (developerId: string, clientId: string) =>
      sql<ClientRow>`SELECT c.agent_id, a.deleted_at IS NOT NULL AS deleted, c.client_name, c.redirect_uris, c.grant_types, c.application_type, c.client_uri, c.scope
                     FROM oauth_clients c JOIN agents a ON a.id = c.agent_id
                     WHERE c.developer_id = ${developerId} AND c.client_id = ${clientId} AND c.origin = 'cimd'`.pipe(Effect.map((rows) => rows[0]))

    /** the first use: a new agent and its profile; another instance may win the race, then its row is used */
    const create = (developerId: string, clientId: string, doc: CimdDocument) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const agentId = newId("ag", ms)
        // decisions §22.3: a CIMD client counts toward the plan's oauthClients cap as a DCR one does
        const [owner] = yield* sql<Pick<Developer, "id" | "plan">>`SELECT id, plan FROM developers WHERE id = ${developerId}`
        return yield* entitlements.withinCap(owner!, "oauthClients", sql.withTransaction(Effect.gen(function*() {
          yield* sql`INSERT INTO agents (id, developer_id, name, description, scopes, status, created_at, updated_at, redirect_uris)
                     VALUES (${agentId}, ${developerId}, ${doc.clientName}, ${null}, ${[] as any}, 'active', ${new Date(ms)}, ${new Date(ms)}, ${doc.redirectUris as any})`
          const inserted = yield* sql`INSERT INTO oauth_clients (agent_id, developer_id, client_id, origin, client_type, token_endpoint_auth_method, redirect_uris,
                       grant_types, application_type, client_name, client_uri, scope, verified, created_at)
                     VALUES (${agentId}, ${developerId}, ${clientId}, 'cimd', 'public', 'none', ${doc.redirectUris as any}, ${doc.grantTypes as any},
                             ${doc.applicationType}, ${doc.clientName}, ${doc.clientUri}, ${doc.scope}, false, ${new Date(ms)})
                     ON CONFLICT (developer_id, client_id) DO NOTHING RETURNING agent_id`
          if (inserted.length === 0) return yield* Effect.fail("raced" as const)
          yield* events.emit(developerId, "oauth.client.registered", { agentId, origin: "cimd" })
          yield* audit.append({ developerId, action: "service.oauth.client_registered", agentId, metadata: { origin: "cimd" } })
        }))).pipe(
          Effect.as(undefined),
          Effect.catchIf((e) => e === "raced", () => Effect.succeed(undefined)),
          Effect.catchTag("PlanLimitExceeded", () => Effect.succeed("the developer's plan allows no more self-registered clients"))
        )
      })

    /** a later copy of the document: the profile follows it (name, redirect URIs, grant types, scope) */
    const update = (row: ClientRow, doc: CimdDocument) =>
      Effect.gen(function*() {
        const same = row.clientName === doc.clientName && JSON.stringify(row.redirectUris) === JSON.stringify(doc.redirectUris) &&
          JSON.stringify(row.grantTypes) === JSON.stringify(doc.grantTypes) && row.applicationType === doc.applicationType &&
          row.clientUri === doc.clientUri && row.scope === doc.scope
        if (same) return
        const ms = yield* nowMillis
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`UPDATE oauth_clients SET client_name = ${doc.clientName}, redirect_uris = ${doc.redirectUris as any}, grant_types = ${doc.grantTypes as any},
                       application_type = ${doc.applicationType}, client_uri = ${doc.clientUri}, scope = ${doc.scope}
                     WHERE agent_id = ${row.agentId}`
          yield* sql`UPDATE agents SET name = ${doc.clientName}, redirect_uris = ${doc.redirectUris as any}, updated_at = ${new Date(ms)} WHERE id = ${row.agentId}`
        }))
      })

    const resolve: CimdService["resolve"] = (developerId, clientId) =>
      Effect.gen(function*() {
        const urlProblem = cimdUrlProblem(clientId, config.oauth.cimd.allowPrivateHosts)
        if (urlProblem !== undefined) return { problem: urlProblem }
        const servers = yield* resourceServers.ofDeveloper(developerId)
        if (!servers.some((rs) => rs.openCimd)) return { problem: "client ID metadata documents are not accepted by this issuer" }
        if (openToCimd(servers, clientId).length === 0) return { problem: "the client's host is not allowed by this issuer" }
        const doc = yield* documentOf(clientId)
        if ("problem" in doc) return { problem: doc.problem }
        const row = yield* clientRow(developerId, clientId)
        if (row === undefined) {
          const refused = yield* create(developerId, clientId, doc.ok)
          return refused === undefined ? {} : { problem: refused }
        }
        if (row.deleted) return { problem: "this client was removed by the developer" }
        yield* update(row, doc.ok)
        return {}
      }).pipe(Effect.orDie)

    return { resolve }
  })
)
