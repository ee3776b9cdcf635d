/** Agents: registration and lookup, always scoped to the calling developer. */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { AnomalyCore } from "../anomalies/Core.ts"
import { Grants } from "../grants/Service.ts"
import { Conflict, InvalidRedirectUri, NotFound } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import type { CursorPosition } from "../platform/Pagination.ts"
import { now } from "../platform/Time.ts"
import { redirectUriProblem } from "./RedirectUri.ts"
import { AgentSuspension } from "./Suspension.ts"

export interface AgentRecord {
  readonly id: string
  readonly developerId: string
  readonly name: string
  readonly description: string | null
  readonly scopes: ReadonlyArray<string>
  readonly status: "active" | "suspended"
  /** when not empty, an authorize's redirectUri must be one of these (decisions §19) */
  readonly redirectUris: ReadonlyArray<string>
  readonly createdAt: Date
  readonly updatedAt: Date
  /** decisions §22.3: the OAuth client profile, read only where the agent is shown (never on the hot paths) */
  readonly oauth?: OAuthProfile | null
}

/** decisions §22.3: an agent as an OAuth client */
export interface OAuthProfile {
  readonly clientId: string
  readonly origin: "api" | "dcr" | "cimd"
  readonly clientType: "public" | "confidential"
  readonly tokenEndpointAuthMethod: string
  readonly redirectUris: ReadonlyArray<string>
  readonly grantTypes: ReadonlyArray<string>
  readonly applicationType: "web" | "native"
  readonly clientUri: string | null
  readonly tokenExchange: boolean
  readonly verified: boolean
}

export const ORIGINS = ["api", "dcr", "cimd"] as const

const COLUMNS = "id, developer_id, name, description, scopes, status, redirect_uris, created_at, updated_at"
/** the columns and the OAuth profile (an API client's redirect URIs are the agent's own) */
const VIEW_COLUMNS = `${COLUMNS}, (SELECT json_build_object('clientId', c.client_id, 'origin', c.origin, 'clientType', c.client_type,
    'tokenEndpointAuthMethod', c.token_endpoint_auth_method,
    'redirectUris', CASE WHEN c.origin = 'api' THEN agents.redirect_uris ELSE c.redirect_uris END, 'grantTypes', c.grant_types,
    'applicationType', c.application_type, 'clientUri', c.client_uri, 'tokenExchange', c.token_exchange, 'verified', c.verified)
  FROM oauth_clients c WHERE c.agent_id = agents.id) AS oauth`

export interface AgentsService {
  readonly create: (
    developerId: string,
    input: { name: string; description?: string; scopes?: ReadonlyArray<string>; redirectUris?: ReadonlyArray<string> }
  ) => Effect.Effect<AgentRecord, InvalidRedirectUri>
  /** one page, newest first, after the cursor's position; `limit + 1` rows are read so the caller knows if more follow */
  readonly list: (
    developerId: string, after: CursorPosition | undefined, limit: number, origin?: (typeof ORIGINS)[number]
  ) => Effect.Effect<ReadonlyArray<AgentRecord>>
  /** the developer's live (not deleted) agent */
  readonly find: (developerId: string, agentId: string) => Effect.Effect<AgentRecord | undefined>
  readonly get: (developerId: string, agentId: string) => Effect.Effect<AgentRecord, NotFound>
  readonly update: (
    developerId: string,
    agentId: string,
    patch: {
      name?: string
      description?: string | null
      scopes?: ReadonlyArray<string>
      status?: "active" | "suspended"
      redirectUris?: ReadonlyArray<string>
    }
  ) => Effect.Effect<AgentRecord, NotFound | InvalidRedirectUri | Conflict>
  /** deletes the agent; its consent bundles are revoked with it (decisions §19) */
  readonly remove: (developerId: string, agentId: string) => Effect.Effect<void, NotFound>
  readonly view: (agent: AgentRecord) => {
    agentId: string
    did: string
    developerId: string
    name: string
    description: string | null
    scopes: Array<string>
    status: "active" | "suspended"
    redirectUris: Array<string>
    createdAt: string
    updatedAt: string
    oauth?: OAuthProfile
  }
}

export class Agents extends Context.Tag("agent-auth/Agents")<Agents, AgentsService>() {}

const unique = (scopes: ReadonlyArray<string>) => [...new Set(scopes)]

/** registered redirect URIs each follow the rules every authorize applies (400 INVALID_REDIRECT_URI) */
const checkRedirectUris = (uris: ReadonlyArray<string> | undefined) => {
  for (const uri of uris ?? []) {
    const problem = redirectUriProblem(uri)
    if (problem !== undefined) return Effect.fail(new InvalidRedirectUri({ message: problem }))
  }
  return Effect.void
}

export const AgentsServiceLive = Layer.effect(
  Agents,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const grants = yield* Grants
    const notFound = () => new NotFound({ message: "Agent not found" })
    const suspension = yield* AgentSuspension
    const anomalies = yield* AnomalyCore
    const find = (developerId: string, agentId: string) =>
      sql.unsafe<AgentRecord>(
        `SELECT ${COLUMNS} FROM agents WHERE id = $1 AND developer_id = $2 AND deleted_at IS NULL`,
        [agentId, developerId]
      ).pipe(Effect.map((rows) => rows[0]), Effect.orDie)
    const get = (developerId: string, agentId: string) =>
      sql.unsafe<AgentRecord>(`SELECT ${VIEW_COLUMNS} FROM agents WHERE id = $1 AND developer_id = $2 AND deleted_at IS NULL`, [agentId, developerId]).pipe(
        Effect.orDie,
        Effect.flatMap(([a]) => a === undefined ? Effect.fail(notFound()) : Effect.succeed(a))
      )
    // a status change's consequences (bundles revoked, credentials' bits) go through the one path; the
    // bundles' grants count toward mass revocation (AD-006) like any revocation the developer causes
    const statusChanged = (developerId: string, agentId: string, suspended: boolean, at: Date) =>
      Effect.flatMap(suspension.statusChanged(developerId, agentId, suspended, at), (revoked) =>
        revoked.length === 0 ? Effect.void : anomalies.grantsRevoked(developerId, revoked))
    return {
      find,
      get,
      create: (developerId, input) =>
        Effect.gen(function*() {
          yield* checkRedirectUris(input.redirectUris)
          const at = yield* now
          const rows = yield* sql.unsafe<AgentRecord>(
            `INSERT INTO agents (id, developer_id, name, description, scopes, status, redirect_uris, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, 'active', $6, $7, $7) RETURNING ${COLUMNS}`,
            [newId("ag", at.getTime()), developerId, input.name, input.description ?? null, unique(input.scopes ?? []) as any,
              unique(input.redirectUris ?? []) as any, at]
          ).pipe(Effect.orDie)
          return rows[0]!
        }),
      list: (developerId, after, limit, origin) => {
        const params: Array<unknown> = [developerId, limit + 1]
        let where = "developer_id = $1 AND deleted_at IS NULL"
        if (after !== undefined) {
          params.push(new Date(after.createdAt), after.id)
          where += " AND (created_at, id) < ($3, $4)"
        }
        if (origin !== undefined) {
          params.push(origin)
          where += ` AND EXISTS (SELECT 1 FROM oauth_clients c WHERE c.agent_id = agents.id AND c.origin = $${params.length})`
        }
        return sql.unsafe<AgentRecord>(`SELECT ${VIEW_COLUMNS} FROM agents WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT $2`, params as any)
          .pipe(Effect.orDie)
      },
      update: (developerId, agentId, patch) =>
        sql.withTransaction(Effect.gen(function*() {
          yield* checkRedirectUris(patch.redirectUris)
          // decisions §22.3: a client that registered itself (DCR, CIMD) is read-only but for its status
          const edits = Object.entries(patch).filter(([key, value]) => key !== "status" && value !== undefined)
          if (edits.length > 0) {
            const [self] = yield* sql<{ origin: string }>`SELECT origin FROM oauth_clients WHERE agent_id = ${agentId} AND developer_id = ${developerId}`
            if (self !== undefined && self.origin !== "api") {
              return yield* Effect.fail(new Conflict({ message: `A client registered by ${self.origin.toUpperCase()} is read-only; only its status may change (or DELETE it)` }))
            }
          }
          const at = yield* now
          const rows = yield* sql.unsafe<AgentRecord>(
            `UPDATE agents SET
               name = CASE WHEN $3::boolean THEN $4 ELSE name END,
               description = CASE WHEN $5::boolean THEN $6 ELSE description END,
               scopes = CASE WHEN $7::boolean THEN $8::text[] ELSE scopes END,
               status = CASE WHEN $9::boolean THEN $10 ELSE status END,
               redirect_uris = CASE WHEN $12::boolean THEN $13::text[] ELSE redirect_uris END,
               updated_at = $11
             WHERE id = $1 AND developer_id = $2 AND deleted_at IS NULL RETURNING ${VIEW_COLUMNS}`,
            [agentId, developerId, patch.name !== undefined, patch.name ?? null, patch.description !== undefined,
              patch.description ?? null, patch.scopes !== undefined, unique(patch.scopes ?? []) as any,
              patch.status !== undefined, patch.status ?? null, at, patch.redirectUris !== undefined,
              unique(patch.redirectUris ?? []) as any]
          ).pipe(Effect.orDie)
          if (rows.length === 0) return yield* Effect.fail(notFound())
          if (patch.status !== undefined) yield* statusChanged(developerId, agentId, patch.status === "suspended", at)
          return rows[0]!
        })).pipe(Effect.catchTag("SqlError", Effect.die)),
      remove: (developerId, agentId) =>
        sql.withTransaction(Effect.gen(function*() {
          const at = yield* now
          const rows = yield* sql`UPDATE agents SET deleted_at = ${at}, status = 'suspended', updated_at = ${at}
                                  WHERE id = ${agentId} AND developer_id = ${developerId} AND deleted_at IS NULL RETURNING id`.pipe(Effect.orDie)
          if (rows.length === 0) return yield* Effect.fail(notFound())
          // decisions §18: a deleted agent's credentials read suspended for good (it cannot be reactivated)
          yield* statusChanged(developerId, agentId, true, at)
        })).pipe(Effect.catchTag("SqlError", Effect.die)),
      view: (a) => ({
        agentId: a.id,
        did: grants.agentDid(a.id),
        developerId: a.developerId,
        name: a.name,
        description: a.description,
        scopes: [...a.scopes],
        status: a.status,
        redirectUris: [...a.redirectUris],
        createdAt: a.createdAt.toISOString(),
        updatedAt: a.updatedAt.toISOString(),
        ...(a.oauth ? { oauth: a.oauth } : {})
      })
    }
  })
)

/** needs Grants, the suspension path and the anomaly core, composed in src/Server.ts */
export const AgentsLive = AgentsServiceLive
