/**
 * Stored passkeys and user handles (decisions §17). Each principal of a developer gets a random
 * 32-byte user handle (never the principal id, which may be an email). A deleted passkey is kept
 * (soft delete) for 30 days and then purged by the cleanup fiber; while deleted it is neither listed,
 * offered, nor accepted.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import type { CursorPosition } from "../platform/Pagination.ts"
import { toPage } from "../platform/Pagination.ts"

export const MAX_CREDENTIALS_PER_PRINCIPAL = 20
export const DELETED_KEPT_MS = 30 * 24 * 3600 * 1000

export interface CredentialRow {
  readonly id: string
  readonly developerId: string
  readonly principalId: string
  readonly credentialId: string
  readonly publicKey: string
  readonly counter: string
  readonly transports: ReadonlyArray<string>
  readonly deviceType: string
  readonly backedUp: boolean
  readonly backupEligible: boolean
  readonly authenticatorAttachment: string | null
  readonly aaguid: string | null
  readonly providerName: string | null
  readonly deviceName: string | null
  readonly useCount: string
  readonly createdAt: Date
  readonly lastUsedAt: Date | null
}

export const CREDENTIAL_COLUMNS = `id, developer_id, principal_id, credential_id, public_key, counter::text AS counter, transports,
  device_type, backed_up, backup_eligible, authenticator_attachment, aaguid, provider_name, device_name,
  use_count::text AS use_count, created_at, last_used_at`

export const authenticatorType = (attachment: string | null | undefined, deviceType: string) => attachment ?? deviceType

export const credentialView = (c: CredentialRow) => ({
  id: c.id,
  credentialId: c.credentialId,
  principalId: c.principalId,
  deviceName: c.deviceName,
  providerName: c.providerName,
  aaguid: c.aaguid,
  authenticatorType: authenticatorType(c.authenticatorAttachment, c.deviceType),
  deviceType: c.deviceType,
  backupEligible: c.backupEligible,
  backedUp: c.backedUp,
  transports: [...c.transports],
  useCount: Number(c.useCount),
  createdAt: c.createdAt.toISOString(),
  lastUsedAt: c.lastUsedAt?.toISOString() ?? null
})

export type CredentialView = ReturnType<typeof credentialView>

export const makeCredentialStore = (sql: SqlClient.SqlClient) => {
  const activeOf = (developerId: string, principalId: string) =>
    sql.unsafe<CredentialRow>(
      `SELECT ${CREDENTIAL_COLUMNS} FROM webauthn_credentials
       WHERE developer_id = $1 AND principal_id = $2 AND deleted_at IS NULL ORDER BY created_at DESC, id DESC`,
      [developerId, principalId]
    ).pipe(Effect.orDie)

  const page = (developerId: string, principalId: string, p: { readonly limit: number; readonly cursor: CursorPosition | undefined }) =>
    Effect.gen(function*() {
      const params: Array<unknown> = [developerId, principalId]
      let after = ""
      if (p.cursor) {
        params.push(new Date(p.cursor.createdAt), p.cursor.id)
        after = " AND (created_at, id) < ($3, $4)"
      }
      params.push(p.limit + 1)
      const rows = yield* sql.unsafe<CredentialRow>(
        `SELECT ${CREDENTIAL_COLUMNS} FROM webauthn_credentials
         WHERE developer_id = $1 AND principal_id = $2 AND deleted_at IS NULL${after}
         ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
        params as any
      ).pipe(Effect.orDie)
      const { page: shown, nextCursor } = toPage(rows, p.limit)
      return { credentials: shown.map(credentialView), nextCursor }
    })

  const get = (developerId: string, id: string) =>
    sql.unsafe<CredentialRow>(
      `SELECT ${CREDENTIAL_COLUMNS} FROM webauthn_credentials WHERE id = $1 AND developer_id = $2 AND deleted_at IS NULL`,
      [id, developerId]
    ).pipe(Effect.map((rows) => rows[0]), Effect.orDie)

  /** the active credential with this WebAuthn credential id, for an assertion */
  const byCredentialId = (developerId: string, credentialId: string) =>
    sql.unsafe<CredentialRow>(
      `SELECT ${CREDENTIAL_COLUMNS} FROM webauthn_credentials WHERE developer_id = $1 AND credential_id = $2 AND deleted_at IS NULL`,
      [developerId, credentialId]
    ).pipe(Effect.map((rows) => rows[0]), Effect.orDie)

  const rename = (developerId: string, id: string, deviceName: string) =>
    sql.unsafe<CredentialRow>(
      `UPDATE webauthn_credentials SET device_name = $3 WHERE id = $1 AND developer_id = $2 AND deleted_at IS NULL
       RETURNING ${CREDENTIAL_COLUMNS}`,
      [id, developerId, deviceName]
    ).pipe(Effect.map((rows) => rows[0]), Effect.orDie)

  const softDelete = (developerId: string, id: string, at: Date) =>
    sql<{ id: string }>`UPDATE webauthn_credentials SET deleted_at = ${at}
                        WHERE id = ${id} AND developer_id = ${developerId} AND deleted_at IS NULL RETURNING id`.pipe(
      Effect.map((rows) => rows.length > 0),
      Effect.orDie
    )

  /**
   * The principal's user handle (base64url), made on first need when `create`; the row is locked
   * when `lock`, so registrations of one principal take turns (the per-principal cap holds).
   */
  const userHandle = (developerId: string, principalId: string, options: { readonly create: boolean; readonly lock?: boolean; readonly at: Date }) =>
    Effect.gen(function*() {
      if (options.create) {
        yield* sql`INSERT INTO webauthn_user_handles (developer_id, principal_id, user_handle, created_at)
                   VALUES (${developerId}, ${principalId}, ${randomBytes(32).toString("base64url")}, ${options.at})
                   ON CONFLICT (developer_id, principal_id) DO NOTHING`
      }
      const rows = options.lock
        ? yield* sql<{ userHandle: string }>`SELECT user_handle FROM webauthn_user_handles
                                             WHERE developer_id = ${developerId} AND principal_id = ${principalId} FOR UPDATE`
        : yield* sql<{ userHandle: string }>`SELECT user_handle FROM webauthn_user_handles
                                             WHERE developer_id = ${developerId} AND principal_id = ${principalId}`
      return rows[0]?.userHandle
    }).pipe(Effect.orDie)

  const countActive = (developerId: string, principalId: string) =>
    sql<{ n: number }>`SELECT count(*)::int AS n FROM webauthn_credentials
                       WHERE developer_id = ${developerId} AND principal_id = ${principalId} AND deleted_at IS NULL`.pipe(
      Effect.map((rows) => rows[0]?.n ?? 0),
      Effect.orDie
    )

  return { activeOf, page, get, byCredentialId, rename, softDelete, userHandle, countActive }
}
