/** Vault rows. Every query a caller reaches is scoped by developer (another developer's row is absent). */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { CursorPosition } from "../platform/Pagination.ts"
import { AGENT_STATUS_SQL, type TokenRow } from "../grants/Service.ts"
import type { Sealed } from "./Crypto.ts"

export interface CredentialRow {
  readonly id: string
  readonly developerId: string
  readonly principalId: string
  readonly service: string
  readonly credentialType: string
  readonly tokenExpiresAt: Date | null
  readonly metadata: Record<string, unknown>
  readonly tokenEndpoint: string | null
  readonly hasRefreshToken: boolean
  readonly keyId: string
  readonly iv: string
  readonly ciphertext: string
  readonly refreshedAt: Date | null
  readonly createdAt: Date
  readonly updatedAt: Date
}

const COLUMNS = `id, developer_id, principal_id, service, credential_type, token_expires_at, metadata, token_endpoint,
  has_refresh_token, key_id, iv, ciphertext, refreshed_at, created_at, updated_at`

export interface WriteFields {
  readonly credentialType: string
  readonly tokenExpiresAt: Date | null
  readonly metadata: Record<string, unknown>
  readonly tokenEndpoint: string | null
  readonly hasRefreshToken: boolean
  readonly sealed: Sealed
}

const normalise = (row: CredentialRow): CredentialRow =>
  typeof row.metadata === "string" ? { ...row, metadata: JSON.parse(row.metadata) } : row

export interface ExchangeKey {
  readonly grnt: string
  readonly jti: string
  readonly developerId: string
  readonly principalId: string
  readonly service: string | null
}

interface ExchangeTokenColumns {
  readonly grantStatus: string | null
  readonly agentStatus: string | null
  readonly grantExpiresAt: Date | null
  readonly grantDeveloperId: string | null
  readonly tokenRevokedAt: Date | null
  readonly principalInactive: boolean | null
}

export interface ExchangeRead {
  readonly token: TokenRow | undefined
  readonly credential: CredentialRow | undefined
  /** the principal has directory users and none is active (decisions §20's principal step, read here) */
  readonly principalInactive: boolean
}

/** the statement of `findForExchange` (exported so the benchmark's floor sends the same text) */
export const FIND_FOR_EXCHANGE_SQL = `SELECT k.n, g.status AS grant_status, g.expires_at AS grant_expires_at, g.developer_id AS grant_developer_id,
                t.revoked_at AS token_revoked_at, ${AGENT_STATUS_SQL}, ${COLUMNS.replace(/(\w+)/g, "v.$1")},
                (SELECT count(*) > 0 AND NOT bool_or(u.active AND u.deleted_at IS NULL) FROM scim_users u
                  WHERE u.developer_id = k.developer_id AND u.principal_id = k.principal_id) AS principal_inactive
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
              WITH ORDINALITY AS k(grnt, jti, developer_id, principal_id, service, n)
         LEFT JOIN grants g ON g.id = k.grnt
         LEFT JOIN grant_tokens t ON t.jti = k.jti
         LEFT JOIN agents a ON a.id = g.agent_id
         LEFT JOIN vault_credentials v
           ON v.developer_id = k.developer_id AND v.principal_id = k.principal_id AND v.service = k.service`

export const makeRepo = (sql: SqlClient.SqlClient) => {
  const one = (rows: ReadonlyArray<CredentialRow>) => (rows[0] === undefined ? undefined : normalise(rows[0]))

  return {
    /** the row of (developer, principal, service), optionally locked for the caller's transaction */
    findByTriple: (developerId: string, principalId: string, service: string, lock = false) =>
      sql.unsafe<CredentialRow>(
        `SELECT ${COLUMNS} FROM vault_credentials WHERE developer_id = $1 AND principal_id = $2 AND service = $3${lock ? " FOR UPDATE" : ""}`,
        [developerId, principalId, service]
      ).pipe(Effect.map(one)),

    /**
     * What many exchanges read, in one statement: each grant token's online status rows (its
     * grant, its revocation) and the credential of (developer, principal, service) — `service`
     * null where the request named none. Results in the order asked.
     */
    findForExchange: (keys: ReadonlyArray<ExchangeKey>) =>
      sql.unsafe<CredentialRow & ExchangeTokenColumns & { n: string }>(
        FIND_FOR_EXCHANGE_SQL,
        [keys.map((k) => k.grnt), keys.map((k) => k.jti), keys.map((k) => k.developerId), keys.map((k) => k.principalId),
          keys.map((k) => k.service)] as any
      ).pipe(Effect.map((rows) => {
        const out: Array<ExchangeRead> = keys.map(() => ({ token: undefined, credential: undefined, principalInactive: false }))
        for (const r of rows) {
          out[Number(r.n) - 1] = {
            token: r.grantStatus === null
              ? undefined
              : { status: r.grantStatus, expiresAt: r.grantExpiresAt!, developerId: r.grantDeveloperId!, revokedAt: r.tokenRevokedAt, agentStatus: r.agentStatus },
            credential: r.id === null ? undefined : normalise(r),
            principalInactive: r.principalInactive === true
          }
        }
        return out
      })),

    get: (developerId: string, id: string, lock = false) =>
      sql.unsafe<CredentialRow>(
        `SELECT ${COLUMNS} FROM vault_credentials WHERE id = $1 AND developer_id = $2${lock ? " FOR UPDATE" : ""}`,
        [id, developerId]
      ).pipe(Effect.map(one)),

    /** inserts unless the triple exists (then undefined: the caller updates that row instead) */
    insert: (row: { id: string; developerId: string; principalId: string; service: string; at: Date } & WriteFields) =>
      sql.unsafe<CredentialRow>(
        `INSERT INTO vault_credentials (id, developer_id, principal_id, service, credential_type, token_expires_at, metadata,
           token_endpoint, has_refresh_token, key_id, iv, ciphertext, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11, $12, $13, $13)
         ON CONFLICT (developer_id, principal_id, service) DO NOTHING
         RETURNING ${COLUMNS}`,
        [row.id, row.developerId, row.principalId, row.service, row.credentialType, row.tokenExpiresAt,
          JSON.stringify(row.metadata), row.tokenEndpoint, row.hasRefreshToken, row.sealed.keyId, row.sealed.iv,
          row.sealed.ciphertext, row.at]
      ).pipe(Effect.map(one)),

    /** a new credential for the row (a refresh under way no longer owns it: its lease is dropped) */
    replace: (id: string, at: Date, fields: WriteFields) =>
      sql.unsafe<CredentialRow>(
        `UPDATE vault_credentials SET credential_type = $2, token_expires_at = $3, metadata = $4::jsonb, token_endpoint = $5,
           has_refresh_token = $6, key_id = $7, iv = $8, ciphertext = $9, refreshed_at = NULL, updated_at = $10,
           refresh_lease = NULL, refresh_lease_until = NULL
         WHERE id = $1 RETURNING ${COLUMNS}`,
        [id, fields.credentialType, fields.tokenExpiresAt, JSON.stringify(fields.metadata), fields.tokenEndpoint,
          fields.hasRefreshToken, fields.sealed.keyId, fields.sealed.iv, fields.sealed.ciphertext, at]
      ).pipe(Effect.map(one)),

    /**
     * Claims the upstream refresh of an expired, refreshable row: sets the lease unless another
     * live lease holds it. The row when claimed; undefined when there is nothing to claim.
     */
    claimRefresh: (developerId: string, id: string, now: Date, lease: string, leaseUntil: Date) =>
      sql.unsafe<CredentialRow>(
        `UPDATE vault_credentials SET refresh_lease = $3, refresh_lease_until = $4
         WHERE id = $1 AND developer_id = $2 AND has_refresh_token AND token_endpoint IS NOT NULL
           AND token_expires_at IS NOT NULL AND token_expires_at <= $5
           AND (refresh_lease_until IS NULL OR refresh_lease_until <= $5)
         RETURNING ${COLUMNS}`,
        [id, developerId, lease, leaseUntil, now]
      ).pipe(Effect.map(one)),

    /** gives a lease back after a failed upstream call (the row is otherwise unchanged) */
    releaseRefresh: (id: string, lease: string) =>
      sql`UPDATE vault_credentials SET refresh_lease = NULL, refresh_lease_until = NULL
          WHERE id = ${id} AND refresh_lease = ${lease}`.pipe(Effect.asVoid),

    /** stores an upstream refresh's answer if the lease still stands (undefined when it does not) */
    refreshed: (id: string, lease: string, at: Date, tokenExpiresAt: Date | null, hasRefreshToken: boolean, sealed: Sealed) =>
      sql.unsafe<CredentialRow>(
        `UPDATE vault_credentials SET token_expires_at = $2, has_refresh_token = $3, key_id = $4, iv = $5, ciphertext = $6,
           refreshed_at = $7, updated_at = $7, refresh_lease = NULL, refresh_lease_until = NULL
         WHERE id = $1 AND refresh_lease = $8 RETURNING ${COLUMNS}`,
        [id, tokenExpiresAt, hasRefreshToken, sealed.keyId, sealed.iv, sealed.ciphertext, at, lease]
      ).pipe(Effect.map(one)),

    list: (developerId: string, filter: { principalId?: string; service?: string }, after: CursorPosition | undefined, fetch: number) => {
      const params: Array<unknown> = [developerId]
      let where = "developer_id = $1"
      if (filter.principalId !== undefined) {
        params.push(filter.principalId)
        where += ` AND principal_id = $${params.length}`
      }
      if (filter.service !== undefined) {
        params.push(filter.service)
        where += ` AND service = $${params.length}`
      }
      if (after !== undefined) {
        params.push(after.createdAt, after.id)
        where += ` AND (created_at, id) < ($${params.length - 1}::timestamptz, $${params.length})`
      }
      params.push(fetch)
      return sql.unsafe<CredentialRow>(
        `SELECT ${COLUMNS} FROM vault_credentials WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
        params as any
      ).pipe(Effect.map((rows) => rows.map(normalise)))
    },

    remove: (developerId: string, id: string) =>
      sql`DELETE FROM vault_credentials WHERE id = ${id} AND developer_id = ${developerId} RETURNING id`.pipe(
        Effect.map((rows) => rows.length > 0)
      )
  }
}

export type Repo = ReturnType<typeof makeRepo>
