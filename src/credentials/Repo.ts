/** Credentials and status lists (decisions §18): SQL only. Every statement runs in the caller's transaction when there is one. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { DELIVERY_CHANNEL, insertDeliveriesSql } from "../platform/Events.ts"
import type { CursorPosition } from "../platform/Pagination.ts"

export const COUNTER_SHARDS = 32

export interface ListRow {
  readonly id: string
  readonly developerId: string
  readonly purpose: "revocation" | "suspension"
  readonly partnerId: string
  readonly size: number
  readonly bits: Uint8Array
  readonly version: number
  readonly signed: SignedForms | null
  readonly updatedAt: Date
}

/** the signed forms of a list kept beside it, each with the version (and key) it was signed at */
export interface SignedForms {
  readonly vc?: { readonly version: number; readonly kid: string; readonly jwt: string }
  readonly tokenList?: { readonly version: number; readonly kid: string; readonly jwt: string }
}

export interface CredentialRow {
  readonly id: string
  readonly uuid: string
  readonly developerId: string
  readonly grantId: string
  readonly agentId: string
  readonly principalId: string
  readonly format: "vc+jwt" | "dc+sd-jwt"
  readonly credential: string
  readonly kid: string
  readonly revocationListId: string
  readonly suspensionListId: string
  readonly statusIdx: number
  readonly status: "active" | "revoked"
  readonly suspended: boolean
  readonly issuedAt: Date
  readonly expiresAt: Date
  readonly revokedAt: Date | null
}

const CREDENTIAL_COLUMNS = `id, uuid, developer_id, grant_id, agent_id, principal_id, format, credential, kid, revocation_list_id,
  suspension_list_id, status_idx, status, suspended, issued_at, expires_at, revoked_at`

/** What a bit change touched: per list, the credentials whose bit changed. */
export interface Flipped {
  readonly listId: string
  readonly developerId: string
  readonly credentialIds: ReadonlyArray<string>
  readonly grantIds: ReadonlyArray<string>
  /** the list's version after the change */
  readonly version: number
  readonly partnerId: string
}

export const makeRepo = (sql: SqlClient.SqlClient) => {
  /** the developer's open revocation list (and its suspension partner) */
  const openList = (developerId: string) =>
    sql<{ id: string; partnerId: string; size: number }>`
      SELECT id, partner_id, size FROM vc_status_lists WHERE developer_id = ${developerId} AND purpose = 'revocation' AND open`.pipe(
      Effect.map((rows) => rows[0])
    )

  /**
   * Issuance in one round trip: the grant locked against a concurrent revocation (FOR SHARE: the
   * revocation either waits for this issuance and then flips its bit, or commits first and is seen
   * here), the credential inserted at its index unless the index is taken or the list closed, one
   * counter shard that no concurrent issuance holds (SKIP LOCKED) counted up, and the event with its
   * webhook deliveries (the outbox, as Events.emit writes it).
   */
  const insertIssued = (
    row: Omit<CredentialRow, "status" | "suspended" | "revokedAt">,
    event: { readonly id: string; readonly type: string; readonly data: Record<string, unknown>; readonly maxAttempts: number }
  ) =>
    sql.unsafe<{ grantActive: boolean | null; listOpen: boolean | null; inserted: string | null; used: number | null; deliveries: number }>(
      `WITH grant_row AS (
         SELECT true AS active FROM grants WHERE id = $4 AND status = 'active' FOR SHARE
       ), list AS (
         SELECT true AS open FROM vc_status_lists WHERE id = $10 AND open
       ), ins AS (
         INSERT INTO vc_credentials (id, uuid, developer_id, grant_id, agent_id, principal_id, format, credential, kid,
           revocation_list_id, suspension_list_id, status_idx, issued_at, expires_at)
         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14
         WHERE EXISTS (SELECT 1 FROM grant_row) AND EXISTS (SELECT 1 FROM list)
         ON CONFLICT (revocation_list_id, status_idx) DO NOTHING RETURNING id, developer_id
       ), shard AS (
         SELECT list_id, shard FROM vc_status_counters WHERE list_id = $10 AND EXISTS (SELECT 1 FROM ins)
         ORDER BY random() LIMIT 1 FOR UPDATE SKIP LOCKED
       ), counted AS (
         UPDATE vc_status_counters c SET used = c.used + 1 FROM shard
         WHERE c.list_id = shard.list_id AND c.shard = shard.shard RETURNING c.used
       ), event AS (
         INSERT INTO events (id, developer_id, type, data, created_at)
         SELECT $15, ins.developer_id, $16, $17::jsonb, $13 FROM ins
         RETURNING id, developer_id, type, data
       ), deliveries AS (${insertDeliveriesSql("$18", "$13")})
       SELECT (SELECT active FROM grant_row) AS grant_active, (SELECT open FROM list) AS list_open,
              (SELECT id FROM ins) AS inserted, (SELECT used FROM counted) AS used,
              (SELECT count(*) FROM deliveries)::int AS deliveries,
              (SELECT pg_notify($19, $3) WHERE EXISTS (SELECT 1 FROM deliveries))::text AS notified`,
      [row.id, row.uuid, row.developerId, row.grantId, row.agentId, row.principalId, row.format, row.credential, row.kid,
        row.revocationListId, row.suspensionListId, row.statusIdx, row.issuedAt, row.expiresAt,
        event.id, event.type, JSON.stringify(event.data), event.maxAttempts, DELIVERY_CHANNEL] as any
    ).pipe(Effect.map((rows) => rows[0]!))

  /** every shard locked by concurrent issuances: count on one of them, waiting for it */
  const countBlocking = (listId: string, shard: number) =>
    sql<{ used: number }>`UPDATE vc_status_counters SET used = used + 1 WHERE list_id = ${listId} AND shard = ${shard} RETURNING used`.pipe(
      Effect.map((rows) => rows[0]?.used ?? 0)
    )

  const usedTotal = (listId: string) =>
    sql<{ total: string }>`SELECT COALESCE(sum(used), 0)::text AS total FROM vc_status_counters WHERE list_id = ${listId}`.pipe(
      Effect.map((rows) => Number(rows[0]?.total ?? 0))
    )

  /** opens a new pair for the developer unless one is open already (a concurrent issuance made it) */
  const openPair = (developerId: string, revocationId: string, suspensionId: string, size: number, at: Date) =>
    sql.unsafe(
      `WITH r AS (
         INSERT INTO vc_status_lists (id, developer_id, purpose, partner_id, size, bits, created_at, updated_at)
         VALUES ($1, $3, 'revocation', $2, $4, decode(repeat('00', $4 / 8), 'hex'), $5, $5)
         ON CONFLICT (developer_id, purpose) WHERE open DO NOTHING RETURNING id
       ), s AS (
         INSERT INTO vc_status_lists (id, developer_id, purpose, partner_id, size, bits, created_at, updated_at)
         SELECT $2, $3, 'suspension', $1, $4, decode(repeat('00', $4 / 8), 'hex'), $5, $5 FROM r
         ON CONFLICT (developer_id, purpose) WHERE open DO NOTHING RETURNING id
       )
       INSERT INTO vc_status_counters (list_id, shard) SELECT r.id, g FROM r, generate_series(0, $6 - 1) AS g`,
      [revocationId, suspensionId, developerId, size, at, COUNTER_SHARDS] as any
    )

  const closePair = (listId: string, partnerId: string) =>
    sql`UPDATE vc_status_lists SET open = false WHERE id IN (${listId}, ${partnerId})`

  /** one statement: the grants' active credentials marked revoked and their revocation bits set */
  const revokeForGrants = (grantIds: ReadonlyArray<string>, at: Date) =>
    sql.unsafe<Flipped>(
      `WITH hit AS (
         UPDATE vc_credentials SET status = 'revoked', revoked_at = $2
         WHERE grant_id = ANY($1::text[]) AND status = 'active'
         RETURNING id, grant_id, developer_id, revocation_list_id, status_idx
       ), grouped AS (
         SELECT revocation_list_id AS list_id, min(developer_id) AS developer_id, array_agg(status_idx) AS idx,
                array_agg(id) AS credential_ids, array_agg(grant_id) AS grant_ids
         FROM hit GROUP BY revocation_list_id
       ), flipped AS (
         UPDATE vc_status_lists l SET bits = vc_set_bits(l.bits, g.idx, 1), version = l.version + 1, updated_at = $2
         FROM grouped g WHERE l.id = g.list_id RETURNING l.id, l.version, l.partner_id
       )
       SELECT g.list_id, g.developer_id, g.credential_ids, g.grant_ids, f.version, f.partner_id FROM grouped g JOIN flipped f ON f.id = g.list_id`,
      [[...grantIds], at] as any
    )

  /**
   * Suspension bits of the agent's credentials and of those delegated from its grants (a suspended
   * agent stops everything derived from it, decisions §19): set on suspension, cleared on reactivation
   * unless another agent of the credential's delegation chain is still suspended (or deleted).
   */
  const setSuspended = (developerId: string, agentId: string, suspended: boolean, at: Date) =>
    sql.unsafe<Flipped>(
      `WITH RECURSIVE tree AS (
         SELECT id FROM grants WHERE agent_id = $1 AND developer_id = $2
         UNION
         SELECT g.id FROM grants g JOIN tree t ON g.parent_grant_id = t.id
       ), chain AS (
         SELECT t.id AS grant_id, g.agent_id, g.parent_grant_id FROM tree t JOIN grants g ON g.id = t.id
         UNION ALL
         SELECT c.grant_id, p.agent_id, p.parent_grant_id FROM chain c JOIN grants p ON p.id = c.parent_grant_id
       ), held AS (
         -- still suspended through another agent of its chain (itself, or one it was delegated from)
         SELECT DISTINCT c.grant_id FROM chain c JOIN agents a ON a.id = c.agent_id
         WHERE a.status <> 'active' OR a.deleted_at IS NOT NULL
       ), hit AS (
         UPDATE vc_credentials SET suspended = $3
         WHERE grant_id IN (SELECT id FROM tree) AND suspended <> $3
           AND ($3 OR grant_id NOT IN (SELECT grant_id FROM held))
         RETURNING id, grant_id, developer_id, suspension_list_id, status_idx
       ), grouped AS (
         SELECT suspension_list_id AS list_id, min(developer_id) AS developer_id, array_agg(status_idx) AS idx,
                array_agg(id) AS credential_ids, array_agg(grant_id) AS grant_ids
         FROM hit GROUP BY suspension_list_id
       ), flipped AS (
         UPDATE vc_status_lists l SET bits = vc_set_bits(l.bits, g.idx, $3::int), version = l.version + 1, updated_at = $4
         FROM grouped g WHERE l.id = g.list_id RETURNING l.id, l.version, l.partner_id
       )
       SELECT g.list_id, g.developer_id, g.credential_ids, g.grant_ids, f.version, f.partner_id FROM grouped g JOIN flipped f ON f.id = g.list_id`,
      [agentId, developerId, suspended, at] as any
    )

  /** a list and its partner (the partner of X names X as its partner), in one read */
  const listPair = (listId: string) =>
    sql.unsafe<ListRow>(
      `SELECT id, developer_id, purpose, partner_id, size, bits, version, signed, updated_at FROM vc_status_lists
       WHERE id = $1 OR partner_id = $1`,
      [listId]
    ).pipe(Effect.map((rows) => ({ row: rows.find((r) => r.id === listId), partner: rows.find((r) => r.id !== listId) })))

  /**
   * Keeps a signed form unless a newer one was stored meanwhile. A list locked by a change in
   * progress is skipped (SKIP LOCKED), never waited for: the next reader after its commit signs anyway.
   */
  const storeSigned = (listId: string, form: "vc" | "tokenList", value: { version: number; kid: string; jwt: string }) =>
    sql.unsafe(
      `UPDATE vc_status_lists SET signed = COALESCE(signed, '{}'::jsonb) || jsonb_build_object($2::text, $3::jsonb)
       WHERE id = (SELECT id FROM vc_status_lists WHERE id = $1 FOR UPDATE SKIP LOCKED)
         AND COALESCE((signed -> $2::text ->> 'version')::int, -1) <= $4`,
      [listId, form, JSON.stringify(value), value.version] as any
    )

  const findCredential = (developerId: string, id: string) =>
    sql.unsafe<CredentialRow>(`SELECT ${CREDENTIAL_COLUMNS} FROM vc_credentials WHERE id = $1 AND developer_id = $2`, [id, developerId]).pipe(
      Effect.map((rows) => rows[0])
    )

  const credentialByUuid = (uuid: string) =>
    sql.unsafe<CredentialRow>(`SELECT ${CREDENTIAL_COLUMNS} FROM vc_credentials WHERE uuid = $1`, [uuid]).pipe(Effect.map((rows) => rows[0]))

  const listCredentials = (
    developerId: string,
    filters: { grantId?: string; principalId?: string; status?: "active" | "revoked" },
    after: CursorPosition | undefined,
    limit: number
  ) => {
    const conditions = ["developer_id = $1"]
    const params: Array<unknown> = [developerId]
    const add = (clause: string, value: unknown) => {
      params.push(value)
      conditions.push(clause.replace("?", `$${params.length}`))
    }
    if (filters.grantId) add("grant_id = ?", filters.grantId)
    if (filters.principalId) add("principal_id = ?", filters.principalId)
    if (filters.status) add("status = ?", filters.status)
    if (after) {
      params.push(new Date(after.createdAt), after.id)
      conditions.push(`(issued_at, id) < ($${params.length - 1}, $${params.length})`)
    }
    params.push(limit + 1)
    return sql.unsafe<CredentialRow>(
      `SELECT ${CREDENTIAL_COLUMNS} FROM vc_credentials WHERE ${conditions.join(" AND ")}
       ORDER BY issued_at DESC, id DESC LIMIT $${params.length}`,
      params as any
    )
  }

  /** of the given key ids, those that signed a credential not yet expired */
  const liveKids = (kids: ReadonlyArray<string>, now: Date) =>
    kids.length === 0
      ? Effect.succeed([] as Array<string>)
      : sql.unsafe<{ kid: string }>(
        `SELECT k AS kid FROM unnest($1::text[]) AS k WHERE EXISTS (SELECT 1 FROM vc_credentials WHERE kid = k AND expires_at > $2)`,
        [[...kids], now] as any
      ).pipe(Effect.map((rows) => rows.map((r) => r.kid)))

  return {
    openList, insertIssued, countBlocking, usedTotal, openPair, closePair, revokeForGrants, setSuspended,
    listPair, storeSigned, findCredential, credentialByUuid, listCredentials, liveKids
  }
}

export type Repo = ReturnType<typeof makeRepo>
