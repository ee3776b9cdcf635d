/**
 * Grants: the record of what a principal allowed an agent to do, and the RS256 grant tokens that
 * carry it (decisions §3). Other capabilities (authorization, consent bundles, delegation, budgets,
 * vault) create, find, revoke and check grants only through this service.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Config } from "../Config.ts"
import { AnomalyCore } from "../anomalies/Core.ts"
import { inTransaction } from "../platform/AuditChain.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { Metrics } from "../platform/Metrics.ts"
import { type GrantTokenClaims, Keys } from "../platform/Keys.ts"
import { makeDirectRead } from "../platform/PgPool.ts"
import { nowMillis } from "../platform/Time.ts"
import { makeCoalescer } from "../platform/Coalesce.ts"
import type { ApprovalMethod, GrantRecord } from "./Record.ts"
import { RevocationPath } from "./Revocation.ts"

export type { ApprovalMethod, GrantRecord } from "./Record.ts"
export interface CreateGrantInput {
  readonly developerId: string
  readonly agentId: string
  readonly principalId: string
  readonly scopes: ReadonlyArray<string>
  readonly expiresAt: Date
  readonly audience?: string | null
  readonly parentGrantId?: string | null
  readonly delegationDepth?: number
  /** emit grant.created (default true) */
  readonly emitEvent?: boolean
  /** decisions §22.5: what grant.created adds for an OAuth grant (resourceServerId, clientOrigin) */
  readonly eventExtra?: Record<string, unknown>
  /** decisions §20: how the gate allowed it, recorded on the grant and carried by grant.created */
  readonly approvalMethod: ApprovalMethod
  /** the policy that approved it (approvalMethod "policy"), else null */
  readonly policyId: string | null
}

export interface IssuedToken {
  readonly grantToken: string
  readonly jti: string
  readonly expiresAt: Date
}

/** A grant lifetime (`expiresIn`) may be at most 366 days (decisions §19). */
export const MAX_GRANT_TTL_SECONDS = 366 * 86400

export type TokenStatus = "active" | "revoked" | "expired" | "unknown"

/** The public shape of a grant (GET /v1/grants/:id). */
export const grantView = (g: GrantRecord, nowMs: number) => ({
  grantId: g.id,
  agentId: g.agentId,
  principalId: g.principalId,
  developerId: g.developerId,
  scopes: [...g.scopes],
  status: g.status === "active" && g.expiresAt.getTime() <= nowMs ? "expired" as const : g.status,
  issuedAt: g.issuedAt.toISOString(),
  expiresAt: g.expiresAt.toISOString(),
  revokedAt: g.revokedAt?.toISOString() ?? null,
  parentGrantId: g.parentGrantId,
  delegationDepth: g.delegationDepth,
  approvalMethod: g.approvalMethod,
  policyId: g.policyId
})

export interface GrantsService {
  readonly agentDid: (agentId: string) => string
  /** inserts the grant (and its grant.created event) in the caller's transaction */
  readonly create: (input: CreateGrantInput) => Effect.Effect<GrantRecord>
  /** signs a token for the grant and records its jti; `expiresAt` defaults to the grant's */
  readonly issueToken: (
    grant: GrantRecord,
    extra?: { readonly expiresAt?: Date; readonly bdg?: number; readonly parentAgt?: string; readonly parentGrnt?: string }
  ) => Effect.Effect<IssuedToken>
  /** the developer's grant, or undefined (another developer's grant is never visible) */
  readonly find: (developerId: string, grantId: string) => Effect.Effect<GrantRecord | undefined>
  /**
   * Revokes the grant and every delegated descendant in one transaction, emitting grant.revoked
   * for each. Returns the revoked ids (root first), or undefined when the grant is not the developer's.
   */
  readonly revoke: (developerId: string, grantId: string) => Effect.Effect<ReadonlyArray<string> | undefined>
  /**
   * Revokes each grant and its descendants (as `revoke`) in one transaction: an agent's consent
   * bundles when it is suspended or deleted. Grants that are not the developer's are skipped.
   */
  readonly revokeMany: (developerId: string, grantIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>>
  /**
   * Revokes every active grant of a principal (SCIM deprovisioning, decisions §11) as `revokeMany`,
   * in the caller's transaction. Returns the ids that were active and are now revoked.
   */
  readonly revokePrincipal: (developerId: string, principalId: string) => Effect.Effect<ReadonlyArray<string>>
  /** online check of verified token claims: grant active and unexpired, token not revoked */
  readonly tokenStatus: (claims: GrantTokenClaims) => Effect.Effect<TokenStatus>
  /** revokes one token by jti (the developer's own); false when unknown */
  readonly revokeToken: (developerId: string, jti: string) => Effect.Effect<boolean>
}

/**
 * What the online check of a grant token reads: its grant's status, expiry and developer, the
 * token's revocation, and the status of the grant's agent (a suspended or deleted agent's tokens
 * stop working at once, and work again if it is set active again). A delegated grant's
 * `agentStatus` is `suspended` when any agent it descends from is not active (decisions §19).
 */
export interface TokenRow {
  readonly status: string
  readonly expiresAt: Date
  readonly revokedAt: Date | null
  readonly developerId: string
  readonly agentStatus: string | null
}

/** The online status of a grant token whose signature, iss and exp were checked, given its rows (none: unknown). */
export const tokenStatusOf = (claims: GrantTokenClaims, row: TokenRow | undefined, ms: number): TokenStatus => {
  if (claims.exp * 1000 <= ms) return "expired"
  if (row === undefined || row.developerId !== claims.dev) return "unknown"
  if (row.status !== "active" || row.revokedAt !== null || row.agentStatus !== "active") return "revoked"
  if (row.expiresAt.getTime() <= ms) return "expired"
  return "active"
}

/** the agent id of a DID `did:<method>:<agentId>`, or null */
export const agentIdOf = (agt: string | undefined): string | null => {
  if (typeof agt !== "string") return null
  const parts = agt.split(":")
  return parts.length >= 3 && parts[0] === "did" ? parts.slice(2).join(":") : null
}

/** a token whose grant is live but whose agent (or one it was delegated from) is suspended or deleted */
export const suspendedAgentToken = (claims: GrantTokenClaims, row: TokenRow | undefined) =>
  row !== undefined && row.developerId === claims.dev && row.status === "active" && row.revokedAt === null && row.agentStatus !== "active"

/**
 * The `agent_status` column of the online check, for grant alias `g` and its agent `a`: the agent's
 * own status, or `suspended` when an agent the grant was delegated from is not active (a deleted
 * agent is suspended for good). One indexed probe of at most MAX_DELEGATION_DEPTH ids, and none
 * for a grant that was not delegated.
 */
export const AGENT_STATUS_SQL = `CASE WHEN cardinality(g.ancestor_agent_ids) = 0 THEN a.status
  WHEN EXISTS (SELECT 1 FROM agents x WHERE x.id = ANY(g.ancestor_agent_ids) AND x.status <> 'active') THEN 'suspended'
  ELSE a.status END AS agent_status`

export class Grants extends Context.Tag("agent-auth/Grants")<Grants, GrantsService>() {}

export const GRANT_COLUMNS = `id, developer_id, agent_id, principal_id, scopes, status, audience, issued_at, expires_at,
  revoked_at, parent_grant_id, delegation_depth, created_at, approval_method, policy_id`

export const GrantsServiceLive = Layer.effect(
  Grants,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const read = yield* makeDirectRead
    const keys = yield* Keys
    const events = yield* Events
    const config = yield* Config
    const metrics = yield* Metrics
    const revocation = yield* RevocationPath
    // decisions §14: mass revocation (AD-006) and suspended-agent use (AD-008) are seen here
    const anomalies = yield* AnomalyCore
    const agentDid = (agentId: string) => `did:${config.didMethod}:${agentId}`

    // the caller's transaction joined, not a savepoint in it (two round trips fewer on the approval path)
    const create = (input: CreateGrantInput) =>
      inTransaction(sql, Effect.gen(function*() {
        const ms = yield* nowMillis
        const at = new Date(ms)
        const id = newId("grnt", ms)
        const rows = yield* sql.unsafe<GrantRecord>(
          `INSERT INTO grants (id, developer_id, agent_id, principal_id, scopes, status, audience, issued_at, expires_at,
             parent_grant_id, delegation_depth, created_at, ancestor_agent_ids, approval_method, policy_id)
           VALUES ($1, $2, $3, $4, $5, 'active', $6, $7, $8, $9, $10, $7,
             COALESCE((SELECT p.ancestor_agent_ids || p.agent_id FROM grants p WHERE p.id = $9), '{}'), $11, $12)
           RETURNING ${GRANT_COLUMNS}`,
          [id, input.developerId, input.agentId, input.principalId, [...input.scopes] as any, input.audience ?? null, at,
            input.expiresAt, input.parentGrantId ?? null, input.delegationDepth ?? 0, input.approvalMethod, input.policyId]
        )
        const grant = rows[0]!
        if (input.emitEvent !== false) {
          yield* events.emit(input.developerId, "grant.created", {
            grantId: grant.id,
            agentId: grant.agentId,
            principalId: grant.principalId,
            scopes: [...grant.scopes],
            expiresAt: grant.expiresAt.toISOString(),
            approvalMethod: grant.approvalMethod,
            policyId: grant.policyId,
            ...input.eventExtra
          })
        }
        return grant
      })).pipe(Effect.orDie, Effect.tap(() => metrics.inc("grants_issued_total")))

    const issueToken: GrantsService["issueToken"] = (grant, extra = {}) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const jti = newId("tok", ms)
        const expiresAt = extra.expiresAt ?? grant.expiresAt
        const grantToken = yield* keys.sign({
          sub: grant.principalId,
          agt: agentDid(grant.agentId),
          dev: grant.developerId,
          scp: [...grant.scopes],
          jti,
          grnt: grant.id,
          iat: Math.floor(ms / 1000),
          exp: Math.floor(expiresAt.getTime() / 1000),
          ...(grant.audience ? { aud: grant.audience } : {}),
          ...(extra.parentAgt ? { parentAgt: extra.parentAgt } : {}),
          ...(extra.parentGrnt ? { parentGrnt: extra.parentGrnt, delegationDepth: grant.delegationDepth } : {}),
          ...(extra.bdg !== undefined ? { bdg: extra.bdg } : {})
        })
        yield* sql`INSERT INTO grant_tokens (jti, grant_id, developer_id, issued_at, expires_at)
                   VALUES (${jti}, ${grant.id}, ${grant.developerId}, ${new Date(ms)}, ${expiresAt})`
        const exp = new Date(Math.floor(expiresAt.getTime() / 1000) * 1000)
        // every token issued says so (code exchange, refresh, delegation, consent bundles)
        yield* events.emit(grant.developerId, "token.issued", {
          tokenId: jti,
          grantId: grant.id,
          agentId: grant.agentId,
          principalId: grant.principalId,
          scopes: [...grant.scopes],
          expiresAt: exp.toISOString()
        })
        return { grantToken, jti, expiresAt: exp }
      }).pipe(Effect.orDie)

    const find = (developerId: string, grantId: string) =>
      sql.unsafe<GrantRecord>(`SELECT ${GRANT_COLUMNS} FROM grants WHERE id = $1 AND developer_id = $2`, [grantId, developerId]).pipe(
        Effect.map((rows) => rows[0]),
        Effect.orDie
      )

    // every revocation but an anomaly response's own is a signal for mass revocation (AD-006),
    // seen in the revoking transaction
    const revokeTrees = (developerId: string, grantIds: ReadonlyArray<string>) =>
      inTransaction(sql, Effect.gen(function*() {
        const { ids, revokedNow } = yield* revocation.revokeTrees(developerId, grantIds)
        if (revokedNow.length > 0) yield* anomalies.grantsRevoked(developerId, revokedNow)
        return ids
      })).pipe(Effect.orDie)

    const revoke = (developerId: string, grantId: string) => revokeTrees(developerId, [grantId])

    const revokeMany = (developerId: string, grantIds: ReadonlyArray<string>) =>
      Effect.map(revokeTrees(developerId, grantIds), (ids) => ids ?? [])

    // Online checks of concurrent requests share one query (batched by the coalescer): the hot
    // path of token verification and vault exchange pays a fraction of a round trip each.
    // (straight through the pool, PgPool.ts: the batch runs in its own fiber, never in a transaction)
    const lookupTokens = makeCoalescer<{ grnt: string; jti: string }, TokenRow | undefined>(
      (keys) =>
        read<TokenRow & { grnt: string; jti: string }>(
          `SELECT k.grnt, k.jti, g.status, g.expires_at, g.developer_id, t.revoked_at, ${AGENT_STATUS_SQL}
           FROM unnest($1::text[], $2::text[]) AS k(grnt, jti)
           JOIN grants g ON g.id = k.grnt
           LEFT JOIN grant_tokens t ON t.jti = k.jti
           LEFT JOIN agents a ON a.id = g.agent_id`,
          [keys.map((k) => k.grnt), keys.map((k) => k.jti)]
        ).pipe(
          Effect.map((rows) => {
            const byKey = new Map(rows.map((r) => [`${r.grnt}\u0000${r.jti}`, r]))
            return keys.map((k) => byKey.get(`${k.grnt}\u0000${k.jti}`))
          }),
          Effect.orDie
        ),
      { parallel: 4 }
    )

    const tokenStatus = (claims: GrantTokenClaims) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        if (claims.exp * 1000 <= ms) return "expired" as const
        const row = yield* lookupTokens({ grnt: claims.grnt, jti: claims.jti })
        const status = tokenStatusOf(claims, row, ms)
        // only a refused token pays for this: one of an agent that is not active (AD-008)
        if (status === "revoked" && suspendedAgentToken(claims, row)) {
          yield* anomalies.suspendedAgentUse(claims.dev, agentIdOf(claims.agt) ?? "", claims.grnt, "token check")
        }
        return status
      })

    const revokeToken = (developerId: string, jti: string) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const rows = yield* sql`UPDATE grant_tokens SET revoked_at = COALESCE(revoked_at, ${new Date(ms)})
                                WHERE jti = ${jti} AND developer_id = ${developerId} RETURNING jti`
        return rows.length > 0
      }).pipe(Effect.orDie)

    const revokePrincipal = (developerId: string, principalId: string) =>
      Effect.gen(function*() {
        const rows = yield* sql<{ id: string }>`SELECT id FROM grants WHERE developer_id = ${developerId} AND principal_id = ${principalId}
                                                AND status = 'active' ORDER BY id`.pipe(Effect.orDie)
        const active = new Set(rows.map((r) => r.id))
        // revokeMany answers whole trees; only grants active before count as revoked here
        return [...new Set(yield* revokeMany(developerId, [...active]))].filter((id) => active.has(id))
      })

    return { agentDid, create, issueToken, find, revoke, revokeMany, revokePrincipal, tokenStatus, revokeToken }
  })
)


/** needs the revocation path and the anomaly core, composed in src/Server.ts */
export const GrantsLive = GrantsServiceLive
