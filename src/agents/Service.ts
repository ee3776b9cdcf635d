/** Agents: registration and lookup, always scoped to the calling developer. */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Credentials } from "../credentials/Service.ts"
import { Grants, GrantsLive } from "../grants/Service.ts"
import { InvalidRedirectUri, NotFound } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import type { CursorPosition } from "../platform/Pagination.ts"
import { now } from "../platform/Time.ts"
import { redirectUriProblem } from "./RedirectUri.ts"

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
}

const COLUMNS = "id, developer_id, name, description, scopes, status, redirect_uris, created_at, updated_at"

export interface AgentsService {
  readonly create: (
    developerId: string,
    input: { name: string; description?: string; scopes?: ReadonlyArray<string>; redirectUris?: ReadonlyArray<string> }
  ) => Effect.Effect<AgentRecord, InvalidRedirectUri>
  /** one page, newest first, after the cursor's position; `limit + 1` rows are read so the caller knows if more follow */
  readonly list: (developerId: string, after: CursorPosition | undefined, limit: number) => Effect.Effect<ReadonlyArray<AgentRecord>>
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
  ) => Effect.Effect<AgentRecord, NotFound | InvalidRedirectUri>
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
    const credentials = yield* Credentials
    const find = (developerId: string, agentId: string) =>
      sql.unsafe<AgentRecord>(
        `SELECT ${COLUMNS} FROM agents WHERE id = $1 AND developer_id = $2 AND deleted_at IS NULL`,
        [agentId, developerId]
      ).pipe(Effect.map((rows) => rows[0]), Effect.orDie)
    const get = (developerId: string, agentId: string) =>
      Effect.flatMap(find(developerId, agentId), (a) => a === undefined ? Effect.fail(notFound()) : Effect.succeed(a))
    // A suspended or deleted agent's bundles are revoked, through the one revocation path (a device
    // cannot be paused, so it is told to wipe); reactivation does not restore them (decisions §19).
    const revokeBundles = (developerId: string, agentId: string) =>
      Effect.gen(function*() {
        const rows = yield* sql<{ grantId: string }>`
          SELECT grant_id FROM consent_bundles WHERE agent_id = ${agentId} AND developer_id = ${developerId} AND status = 'active'`
        yield* grants.revokeMany(developerId, rows.map((r) => r.grantId))
      }).pipe(Effect.orDie)
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
      list: (developerId, after, limit) =>
        sql.unsafe<AgentRecord>(
          after === undefined
            ? `SELECT ${COLUMNS} FROM agents WHERE developer_id = $1 AND deleted_at IS NULL ORDER BY created_at DESC, id DESC LIMIT $2`
            : `SELECT ${COLUMNS} FROM agents WHERE developer_id = $1 AND deleted_at IS NULL AND (created_at, id) < ($3, $4)
               ORDER BY created_at DESC, id DESC LIMIT $2`,
          (after === undefined ? [developerId, limit + 1] : [developerId, limit + 1, new Date(after.createdAt), after.id]) as any
        ).pipe(Effect.orDie),
      update: (developerId, agentId, patch) =>
        sql.withTransaction(Effect.gen(function*() {
          yield* checkRedirectUris(patch.redirectUris)
          const at = yield* now
          const rows = yield* sql.unsafe<AgentRecord>(
            `UPDATE agents SET
               name = CASE WHEN $3::boolean THEN $4 ELSE name END,
               description = CASE WHEN $5::boolean THEN $6 ELSE description END,
               scopes = CASE WHEN $7::boolean THEN $8::text[] ELSE scopes END,
               status = CASE WHEN $9::boolean THEN $10 ELSE status END,
               redirect_uris = CASE WHEN $12::boolean THEN $13::text[] ELSE redirect_uris END,
               updated_at = $11
             WHERE id = $1 AND developer_id = $2 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
            [agentId, developerId, patch.name !== undefined, patch.name ?? null, patch.description !== undefined,
              patch.description ?? null, patch.scopes !== undefined, unique(patch.scopes ?? []) as any,
              patch.status !== undefined, patch.status ?? null, at, patch.redirectUris !== undefined,
              unique(patch.redirectUris ?? []) as any]
          ).pipe(Effect.orDie)
          if (rows.length === 0) return yield* Effect.fail(notFound())
          // the row lock taken above orders this after any bundle creation that read the agent active
          if (rows[0]!.status === "suspended") yield* revokeBundles(developerId, agentId)
          // decisions §18: suspension bits of its credentials set (or cleared) in the same transaction
          if (patch.status !== undefined) yield* credentials.setAgentSuspended(developerId, agentId, patch.status === "suspended", at)
          return rows[0]!
        })).pipe(Effect.catchTag("SqlError", Effect.die)),
      remove: (developerId, agentId) =>
        sql.withTransaction(Effect.gen(function*() {
          const at = yield* now
          const rows = yield* sql`UPDATE agents SET deleted_at = ${at}, status = 'suspended', updated_at = ${at}
                                  WHERE id = ${agentId} AND developer_id = ${developerId} AND deleted_at IS NULL RETURNING id`.pipe(Effect.orDie)
          if (rows.length === 0) return yield* Effect.fail(notFound())
          yield* revokeBundles(developerId, agentId)
          // decisions §18: a deleted agent's credentials read suspended for good (it cannot be reactivated)
          yield* credentials.setAgentSuspended(developerId, agentId, true, at)
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
        updatedAt: a.updatedAt.toISOString()
      })
    }
  })
)

export const AgentsLive = AgentsServiceLive.pipe(Layer.provideMerge(GrantsLive))
