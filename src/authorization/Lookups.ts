/**
 * What both halves of the authorization flow share: the auth_requests row and its columns, the
 * random secrets (codes, refresh tokens), and two lookups (a request; whether an agent is active).
 * Its own file so consent (Service.ts) and the token exchanges (Tokens.ts) use one copy.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
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
  readonly status: "pending" | "approved" | "denied"
  readonly expiresAt: Date
  readonly createdAt: Date
  readonly grantId: string | null
  readonly fidoVerifiedAt: Date | null
}

export const REQUEST_COLUMNS = `id, developer_id, agent_id, principal_id, scopes, grant_ttl_seconds, redirect_uri, state, audience,
  code_challenge, code_challenge_method, status, expires_at, created_at, grant_id, fido_verified_at`

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
