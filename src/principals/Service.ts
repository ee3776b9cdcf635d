/**
 * Principal sessions (decisions §12): a developer hands a person a short-lived session token so the
 * person can see which agents may act for them and revoke any of it. The token is stored only as
 * its SHA-256; it is worth exactly the principal's own views (grants, audit entries, revocation) of
 * one developer, and nothing else.
 *
 * Revocation goes through the one path (Grants.revoke: the grant and every descendant, bundles,
 * grant.revoked), with `principal.grant_revoked` and an audit-chain entry in the same transaction.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { describeScope } from "../authorization/Scopes.ts"
import { Config } from "../Config.ts"
import { Grants } from "../grants/Service.ts"
import { AuditChain, ENTRY_COLUMNS, rowToEntry } from "../platform/AuditChain.ts"
import { DirectoryPrincipals } from "../directory/Principals.ts"
import { makePrincipalWithdrawal } from "../dpdp/Withdrawal.ts"
import { BadRequest, NotFound, type PrincipalInactive } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { type CursorPosition, toPage } from "../platform/Pagination.ts"
import { nowMillis, parseDuration } from "../platform/Time.ts"
import { sha256Hex } from "../platform/Hash.ts"

export const DEFAULT_SESSION_SECONDS = 3600
export const MAX_SESSION_SECONDS = 24 * 3600

export interface PrincipalSession {
  readonly sessionId: string
  readonly developerId: string
  readonly principalId: string
  readonly expiresAt: Date
}

export type { ApprovalMethod } from "../grants/Record.ts"
import type { ApprovalMethod } from "../grants/Record.ts"

export interface PrincipalGrant {
  readonly grantId: string
  readonly agentId: string
  readonly agentName: string
  readonly agentDid: string
  /** a suspended agent's grant still counts: the application may set the agent active again */
  readonly agentStatus: "active" | "suspended"
  readonly scopes: ReadonlyArray<string>
  readonly scopeDescriptions: Record<string, string>
  readonly approvalMethod: ApprovalMethod
  readonly issuedAt: string
  readonly expiresAt: string
  readonly parentGrantId: string | null
  readonly delegationDepth: number
  /** decisions §22.5: an OAuth grant names its client and the resource it is for */
  readonly oauth?: {
    readonly clientName: string
    readonly clientOrigin: "api" | "dcr" | "cimd"
    readonly resourceServerId: string
    readonly resource: string
    readonly resourceName: string
  }
}

export interface PrincipalsService {
  readonly createSession: (
    developerId: string,
    input: { readonly principalId: string; readonly expiresIn?: string | undefined }
  ) => Effect.Effect<{ sessionToken: string; dashboardUrl: string; expiresAt: string }, BadRequest | PrincipalInactive>
  /** the live session a token names, or undefined (unknown, malformed or expired) */
  readonly resolve: (token: string) => Effect.Effect<PrincipalSession | undefined>
  readonly grants: (
    session: PrincipalSession,
    page: { readonly limit: number; readonly cursor: CursorPosition | undefined }
  ) => Effect.Effect<{ principalId: string; grants: Array<PrincipalGrant>; nextCursor: string | null }>
  readonly audit: (
    session: PrincipalSession,
    page: { readonly limit: number; readonly cursor: CursorPosition | undefined }
  ) => Effect.Effect<{ entries: Array<ReturnType<typeof rowToEntry>>; nextCursor: string | null }>
  /** one of the principal's active grants and its active delegated descendants (nearest first), or undefined */
  readonly grantTree: (
    session: PrincipalSession,
    grantId: string
  ) => Effect.Effect<{ grant: PrincipalGrant; delegated: Array<PrincipalGrant> } | undefined>
  /** revokes one of the principal's grants (and its descendants); NotFound for any other grant */
  readonly revoke: (session: PrincipalSession, grantId: string) => Effect.Effect<{ readonly revoked: ReadonlyArray<string> }, NotFound>
  /** ends every session of a principal (deprovisioning), in the caller's transaction; how many were live */
  readonly endSessions: (developerId: string, principalId: string) => Effect.Effect<number>
}

export class Principals extends Context.Tag("agent-auth/Principals")<Principals, PrincipalsService>() {}

const TOKEN_SHAPE = /^pst_[A-Za-z0-9_-]{43}$/

/**
 * How a grant was made: the stored method, else derived from what made it: an authorization request
 * approved with a passkey, through SSO (decisions §12), or plainly (directly, or consumed by the consent bundle that holds the
 * grant), else the application (a bundle without consent, a delegation, a sandbox's automatic approval).
 */
const GRANT_SELECT = `
  SELECT g.id, g.agent_id, a.name AS agent_name, a.status AS agent_status, g.scopes, g.issued_at, g.expires_at,
         g.parent_grant_id, g.delegation_depth, g.created_at,
         g.resource_server_id, g.resource, rs.name AS resource_name, rs.scopes AS resource_scopes,
         COALESCE(oc.client_name, a.name) AS client_name, oc.origin AS client_origin,
         COALESCE(g.approval_method,
           CASE WHEN r.fido_verified_at IS NOT NULL THEN 'passkey'
                WHEN r.sso_session_id IS NOT NULL THEN 'sso'
                WHEN r.id IS NOT NULL AND d.mode <> 'sandbox' THEN 'consent'
                ELSE 'developer' END) AS approval_method
  FROM grants g
  JOIN agents a ON a.id = g.agent_id
  JOIN developers d ON d.id = g.developer_id
  LEFT JOIN resource_servers rs ON rs.id = g.resource_server_id
  LEFT JOIN oauth_clients oc ON oc.agent_id = g.agent_id
  LEFT JOIN LATERAL (
    SELECT id, fido_verified_at, sso_session_id FROM auth_requests WHERE grant_id = g.id
    UNION ALL
    SELECT ar.id, ar.fido_verified_at, ar.sso_session_id FROM consent_bundles b JOIN auth_requests ar ON ar.consumed_by_bundle_id = b.id
    WHERE b.grant_id = g.id
    LIMIT 1
  ) r ON true`

interface GrantRow {
  readonly id: string
  readonly agentId: string
  readonly agentName: string
  readonly agentStatus: "active" | "suspended"
  readonly scopes: ReadonlyArray<string>
  readonly issuedAt: Date
  readonly expiresAt: Date
  readonly parentGrantId: string | null
  readonly delegationDepth: number
  readonly createdAt: Date
  readonly approvalMethod: ApprovalMethod
  readonly resourceServerId: string | null
  readonly resource: string | null
  readonly resourceName: string | null
  readonly resourceScopes: ReadonlyArray<{ readonly name: string; readonly description?: string }> | null
  readonly clientName: string
  readonly clientOrigin: "api" | "dcr" | "cimd" | null
}

const AUDIT_COLUMNS = `${ENTRY_COLUMNS}, created_at`

export const PrincipalsLive = Layer.effect(
  Principals,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const grants = yield* Grants
    const events = yield* Events
    const chain = yield* AuditChain
    // decisions §21: the person revoking a grant withdraws the consent records covering it
    const withdrawConsents = yield* makePrincipalWithdrawal
    const directory = yield* DirectoryPrincipals

    const createSession: PrincipalsService["createSession"] = (developerId, input) =>
      Effect.gen(function*() {
        const seconds = input.expiresIn === undefined ? DEFAULT_SESSION_SECONDS : parseDuration(input.expiresIn)
        if (seconds === undefined || seconds > MAX_SESSION_SECONDS) {
          return yield* Effect.fail(new BadRequest({
            message: "expiresIn must look like 90s, 15m or 24h and be at most 24h",
            details: [{ path: "expiresIn", message: "a duration of at most 24h" }]
          }))
        }
        // decisions §12: a deprovisioned person gets no new session (deprovisioning ended the old ones)
        yield* directory.requireActive(developerId, input.principalId)
        const ms = yield* nowMillis
        const sessionToken = `pst_${randomBytes(32).toString("base64url")}`
        const expiresAt = new Date(ms + seconds * 1000)
        yield* sql`INSERT INTO principal_sessions (id, developer_id, principal_id, token_hash, created_at, expires_at)
                   VALUES (${newId("psess", ms)}, ${developerId}, ${input.principalId}, ${sha256Hex(sessionToken)},
                           ${new Date(ms)}, ${expiresAt})`.pipe(Effect.orDie)
        return {
          sessionToken,
          dashboardUrl: `${config.publicBaseUrl}/permissions#session=${sessionToken}`,
          expiresAt: expiresAt.toISOString()
        }
      })

    const resolve: PrincipalsService["resolve"] = (token) =>
      Effect.gen(function*() {
        if (!TOKEN_SHAPE.test(token)) return undefined
        const ms = yield* nowMillis
        const rows = yield* sql<{ id: string; developerId: string; principalId: string; expiresAt: Date }>`
          SELECT id, developer_id, principal_id, expires_at FROM principal_sessions
          WHERE token_hash = ${sha256Hex(token)} AND expires_at > ${new Date(ms)}`.pipe(Effect.orDie)
        const row = rows[0]
        return row === undefined
          ? undefined
          : { sessionId: row.id, developerId: row.developerId, principalId: row.principalId, expiresAt: row.expiresAt }
      })

    const toView = (g: GrantRow): PrincipalGrant => ({
      grantId: g.id,
      agentId: g.agentId,
      agentName: g.agentName,
      agentDid: grants.agentDid(g.agentId),
      agentStatus: g.agentStatus,
      scopes: [...g.scopes],
      // an OAuth grant's scopes are the resource server's, described as it registered them
      scopeDescriptions: Object.fromEntries(g.scopes.map((s) => [s, g.resourceScopes?.find((d) => d.name === s)?.description ?? describeScope(s)])),
      approvalMethod: g.approvalMethod,
      issuedAt: g.issuedAt.toISOString(),
      expiresAt: g.expiresAt.toISOString(),
      parentGrantId: g.parentGrantId,
      delegationDepth: g.delegationDepth,
      ...(g.resourceServerId !== null && g.resource !== null
        ? {
          oauth: {
            clientName: g.clientName, clientOrigin: g.clientOrigin ?? "api", resourceServerId: g.resourceServerId, resource: g.resource,
            resourceName: g.resourceName ?? g.resource
          }
        }
        : {})
    })

    const grantTree: PrincipalsService["grantTree"] = (session, grantId) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const rows = yield* sql.unsafe<GrantRow>(
          `WITH RECURSIVE tree AS (
             SELECT id FROM grants WHERE id = $1 AND developer_id = $2 AND principal_id = $3
             UNION ALL
             SELECT c.id FROM grants c JOIN tree t ON c.parent_grant_id = t.id
           )
           ${GRANT_SELECT}
           WHERE g.id IN (SELECT id FROM tree) AND g.status = 'active' AND g.expires_at > $4 AND a.deleted_at IS NULL
           ORDER BY g.delegation_depth, g.created_at, g.id`,
          [grantId, session.developerId, session.principalId, new Date(ms)]
        ).pipe(Effect.orDie)
        const root = rows.find((g) => g.id === grantId)
        return root === undefined ? undefined : { grant: toView(root), delegated: rows.filter((g) => g.id !== grantId).map(toView) }
      })

    const listGrants: PrincipalsService["grants"] = (session, page) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const params: Array<unknown> = [session.developerId, session.principalId, new Date(ms)]
        let after = ""
        if (page.cursor) {
          params.push(new Date(page.cursor.createdAt), page.cursor.id)
          after = ` AND (g.created_at, g.id) < ($4, $5)`
        }
        params.push(page.limit + 1)
        const rows = yield* sql.unsafe<GrantRow>(
          `${GRANT_SELECT}
           WHERE g.developer_id = $1 AND g.principal_id = $2 AND g.status = 'active' AND g.expires_at > $3
             AND a.deleted_at IS NULL${after}
           ORDER BY g.created_at DESC, g.id DESC LIMIT $${params.length}`,
          params as any
        ).pipe(Effect.orDie)
        const { page: shown, nextCursor } = toPage(rows, page.limit)
        // whose grants these are, at the top as the published protocol answers
        return { principalId: session.principalId, grants: shown.map(toView), nextCursor }
      })

    const audit: PrincipalsService["audit"] = (session, page) =>
      Effect.gen(function*() {
        const params: Array<unknown> = [session.developerId, session.principalId]
        let after = ""
        if (page.cursor) {
          params.push(new Date(page.cursor.createdAt), page.cursor.id)
          after = ` AND (created_at, id) < ($3, $4)`
        }
        params.push(page.limit + 1)
        const rows = yield* sql.unsafe<any>(
          `SELECT ${AUDIT_COLUMNS} FROM audit_log WHERE developer_id = $1 AND principal_id = $2${after}
           ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
          params as any
        ).pipe(Effect.orDie)
        const { page: shown, nextCursor } = toPage(rows, page.limit)
        return { entries: shown.map(rowToEntry), nextCursor }
      })

    const revoke: PrincipalsService["revoke"] = (session, grantId) =>
      sql.withTransaction(Effect.gen(function*() {
        // principal revocations of one grant take turns, so only the first reports it (event, audit entry)
        yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`principal-revoke:${grantId}`}))`
        const grant = yield* grants.find(session.developerId, grantId)
        // another principal's grant is answered like an unknown one
        if (grant === undefined || grant.principalId !== session.principalId) {
          return yield* Effect.fail(new NotFound({ message: "Grant not found" }))
        }
        const revoked = (yield* grants.revoke(session.developerId, grantId)) ?? []
        yield* withdrawConsents(session.developerId, [...new Set([grantId, ...revoked])])
        if (grant.status === "active") {
          yield* events.emit(session.developerId, "principal.grant_revoked", { grantId })
          yield* chain.append({
            developerId: session.developerId,
            action: "service.principal.grant_revoked",
            agentId: grant.agentId,
            agentDid: grants.agentDid(grant.agentId),
            grantId,
            principalId: session.principalId,
            metadata: { sessionId: session.sessionId, revokedGrantIds: [...revoked] }
          })
        }
        return { revoked }
      })).pipe(Effect.catchTag("SqlError", Effect.die))

    // an ended session is deleted: its token then answers 401 like an unknown one
    const endSessions: PrincipalsService["endSessions"] = (developerId, principalId) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const rows = yield* sql<{ expiresAt: Date }>`DELETE FROM principal_sessions
                                WHERE developer_id = ${developerId} AND principal_id = ${principalId} RETURNING expires_at`
        return rows.filter((r) => r.expiresAt.getTime() > ms).length
      }).pipe(Effect.orDie)

    return { createSession, resolve, grants: listGrants, grantTree, audit, revoke, endSessions }
  })
)
