/**
 * What both halves of the authorization flow share: the auth_requests row and its columns, the
 * random secrets (codes, refresh tokens), and two lookups (a request; whether an agent is active).
 * Its own file so consent (Service.ts) and the token exchanges (Tokens.ts) use one copy.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import type { NoticeBinding } from "../dpdp/ApprovalConsent.ts"
import { AgentSuspended } from "../platform/Errors.ts"

export const secret = () => randomBytes(32).toString("base64url")

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
  readonly status: "authenticating" | "pending" | "approved" | "denied"
  readonly expiresAt: Date
  readonly createdAt: Date
  readonly grantId: string | null
  readonly fidoVerifiedAt: Date | null
  /** decisions §22.5: an OAuth authorization's facts (issuer, resource server, client, redirect host); null for section 3's */
  readonly oauth: OAuthRequestFacts | null
  readonly interactionCookieHash: string | null
  readonly authMethod: string | null
  readonly authTime: Date | null
  /** decisions §21: the consent notice pinned at authorize, if any (read here so the approval needs no second read) */
  readonly dpdpConsent: NoticeBinding | null
}

/** What an OAuth authorization request adds to a section-3 request (decisions §22.5), as stored with it. */
export interface OAuthRequestFacts {
  readonly issuer: string
  readonly resourceServerId: string
  readonly resource: string
  readonly resourceName: string
  readonly clientId: string
  readonly clientName: string
  readonly clientOrigin: "api" | "dcr" | "cimd"
  readonly verified: boolean
  /** the client's own host (client_uri or the CIMD URL), shown beside its name */
  readonly clientHost: string | null
  readonly redirectHost: string
  /** a loopback or private-use redirect: the page warns */
  readonly redirectWarning: boolean
  readonly scopeDescriptions: Record<string, string>
  /** `login_hint` of the authorization request, passed to SSO (absent on requests stored before it was kept) */
  readonly loginHint?: string | null
}

export const REQUEST_COLUMNS = `id, developer_id, agent_id, principal_id, scopes, grant_ttl_seconds, redirect_uri, state, audience,
  code_challenge, code_challenge_method, status, expires_at, created_at, grant_id, fido_verified_at, oauth, interaction_cookie_hash,
  auth_method, auth_time, dpdp_consent`

export const agentSuspended = () => new AgentSuspended({ message: "Agent is suspended" })

/** The request and agent lookups, on the caller's connection (inside its transaction when it has one). */
export const makeLookups = (sql: SqlClient.SqlClient) => {
  const loadRequest = (id: string, lock = false) =>
    sql.unsafe<AuthRequestRecord>(
      `SELECT ${REQUEST_COLUMNS} FROM auth_requests WHERE id = $1${lock ? " FOR UPDATE" : ""}`,
      [id]
    ).pipe(Effect.map((rows) => rows[0]), Effect.orDie)

  /** whether the agent is active (not suspended, not deleted): it alone gets consent and tokens */
  const agentIsActive = (developerId: string, agentId: string) =>
    Effect.map(
      sql<{ status: string }>`SELECT status FROM agents WHERE id = ${agentId} AND developer_id = ${developerId} AND deleted_at IS NULL`,
      (rows) => rows[0]?.status === "active"
    )

  return { loadRequest, agentIsActive }
}
