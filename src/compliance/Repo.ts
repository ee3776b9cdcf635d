/**
 * SQL of the compliance capability. Every query is scoped to one developer. Exports read in keyset
 * pages (short statements, the connection released between pages), so a long export neither holds a
 * connection (the embedded database has one) nor runs into the statement timeout, and memory stays
 * at one page whatever the row count.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AuditRow, GrantRow } from "./Format.ts"

export const PAGE = 1000
/**
 * NDJSON audit pages are built by PostgreSQL, one text per page (see auditNdjsonPage). Their size
 * trades the per-chunk cost of the stream against the size of each transient text: streaming
 * 200,000 entries, the server's RSS grew 4–44 MB at 100 rows and 5–44 MB at 1,000 (GC timing on a
 * loaded 2-core machine dominates), at 40–100k rows/s. Issue 37, on a quiet machine (100,000
 * entries, `COMPLIANCE_BENCH_ENTRIES=100000 npm run bench -- compliance`): 250 rows 70–76k rows/s and
 * 4.8–5.8 µs of the service's CPU a row; 1,000 rows 85–87k and 3.0–3.4 µs (a page's text ~730 KB).
 */
export const NDJSON_PAGE = 1000

export interface AuditFilters {
  readonly agentId?: string | undefined
  readonly status?: string | undefined
  readonly action?: string | undefined
}

/** The chain range of a time window: contiguous seqs, bounded by the head as it stood. */
export interface AuditRange {
  readonly first: number
  readonly last: number
  readonly anchor: string | null
  readonly headSeq: number
  readonly headHash: string | null
}

const AUDIT_COLUMNS = `seq, id AS entry_id, agent_id, agent_did, grant_id, principal_id, developer_id, action, metadata, status,
  timestamp, prev_hash, hash, hash_version, pii_salt, principal_digest, metadata_digest, erased_at IS NOT NULL AS erased`

const toAuditRow = (r: any): AuditRow => ({
  seq: Number(r.seq),
  entryId: r.entryId,
  agentId: r.agentId,
  agentDid: r.agentDid,
  grantId: r.grantId,
  principalId: r.principalId,
  developerId: r.developerId,
  action: r.action,
  metadata: typeof r.metadata === "string" ? JSON.parse(r.metadata) : r.metadata,
  status: r.status,
  timestamp: r.timestamp,
  prevHash: r.prevHash,
  hash: r.hash,
  hashVersion: Number(r.hashVersion),
  piiSalt: r.piiSalt,
  principalDigest: r.principalDigest,
  metadataDigest: r.metadataDigest,
  erased: r.erased === true
})

export const grantStatus = (r: { status: string; expiresAt: Date }, nowMs: number) =>
  r.status === "revoked" ? "revoked" : r.expiresAt.getTime() <= nowMs ? "expired" : "active"

const toGrantRow = (r: any, nowMs: number): GrantRow => ({
  grantId: r.id,
  agentId: r.agentId,
  principalId: r.principalId,
  developerId: r.developerId,
  scopes: r.scopes,
  status: grantStatus(r, nowMs),
  issuedAt: r.issuedAt.toISOString(),
  expiresAt: r.expiresAt.toISOString(),
  revokedAt: r.revokedAt === null ? null : r.revokedAt.toISOString(),
  delegationDepth: r.delegationDepth
})

export const makeRepo = (sql: SqlClient.SqlClient) => {
  // Uninterruptible: a client that leaves mid-export interrupts the stream, and interrupting a
  // running query sends PostgreSQL a cancel request that can land on the connection's next query
  // (another request's). Every statement here is one short page, so it is simply let finish.
  const q = <T extends object = any>(text: string, params: ReadonlyArray<unknown>) =>
    sql.unsafe<T>(text, params as any).pipe(Effect.orDie, Effect.uninterruptible)

  /**
   * The seqs of the window's first and last entries (by time, through the list index; entries of
   * one millisecond are told apart by seq, not by their random id part), capped at
   * the head read first, so entries appended while the export runs (its own audit entry too) lie
   * outside it; and the anchor, the hash of the entry before the first. A job passes `atSeq`, the
   * head when it was requested, so every run of it (a re-run after a crash too) reads the same range.
   */
  const auditRange = (developerId: string, since: Date | undefined, until: Date | undefined, atSeq?: number) =>
    Effect.gen(function*() {
      const [head] = yield* q<{ seq: string; hash: string | null }>(`SELECT seq, hash FROM audit_heads WHERE developer_id = $1`, [developerId])
      const headSeq = head === undefined ? 0 : Number(head.seq)
      const headHash = head?.hash ?? null
      let first = 1
      if (since !== undefined) {
        const [row] = yield* q<{ seq: string }>(
          `SELECT min(seq) AS seq FROM audit_log WHERE developer_id = $1 AND created_at =
             (SELECT created_at FROM audit_log WHERE developer_id = $1 AND created_at >= $2 ORDER BY created_at LIMIT 1)`, [developerId, since])
        first = row?.seq == null ? headSeq + 1 : Number(row.seq)
      }
      let last = headSeq
      if (until !== undefined) {
        const [row] = yield* q<{ seq: string }>(
          `SELECT max(seq) AS seq FROM audit_log WHERE developer_id = $1 AND created_at =
             (SELECT created_at FROM audit_log WHERE developer_id = $1 AND created_at <= $2 ORDER BY created_at DESC LIMIT 1)`, [developerId, until])
        last = row?.seq == null ? 0 : Math.min(Number(row.seq), headSeq)
      }
      if (atSeq !== undefined) last = Math.min(last, atSeq)
      let anchor: string | null = null
      if (first > 1) {
        const [row] = yield* q<{ hash: string }>(`SELECT hash FROM audit_log WHERE developer_id = $1 AND seq = $2`, [developerId, first - 1])
        anchor = row?.hash ?? null
      }
      return { first, last, anchor, headSeq, headHash } satisfies AuditRange
    })

  /** the chain's head when a job was requested (its params' `atSeq`; undefined for jobs made before it was kept) */
  const jobAtSeq = (exportId: string) =>
    Effect.map(q<{ at: string | null }>(`SELECT params->>'atSeq' AS at FROM compliance_exports WHERE id = $1`, [exportId]),
      ([row]) => row?.at == null ? undefined : Number(row.at))

  /** the next page after `afterSeq` up to `lastSeq`, in chain order */
  const auditPage = (developerId: string, afterSeq: number, lastSeq: number, filters: AuditFilters, limit = PAGE) => {
    const params: Array<unknown> = [developerId, afterSeq, lastSeq]
    let where = "developer_id = $1 AND seq > $2 AND seq <= $3"
    for (const [column, value] of [["agent_id", filters.agentId], ["status", filters.status], ["action", filters.action]] as const) {
      if (value === undefined) continue
      params.push(value)
      where += ` AND ${column} = $${params.length}`
    }
    params.push(limit)
    return q(`SELECT ${AUDIT_COLUMNS} FROM audit_log WHERE ${where} ORDER BY seq LIMIT $${params.length}`, params).pipe(
      Effect.map((rows) => rows.map(toAuditRow))
    )
  }

  /**
   * The same page as NDJSON text built by PostgreSQL in one value (its rows joined, plus the count,
   * the last seq and the last hash): one string per page instead of a parsed object per row, which
   * keeps the garbage a large export leaves for the collector, and so the process's memory, low.
   */
  const auditNdjsonPage = (developerId: string, afterSeq: number, lastSeq: number, filters: AuditFilters, limit = NDJSON_PAGE) => {
    const params: Array<unknown> = [developerId, afterSeq, lastSeq]
    let where = "developer_id = $1 AND seq > $2 AND seq <= $3"
    for (const [column, value] of [["agent_id", filters.agentId], ["status", filters.status], ["action", filters.action]] as const) {
      if (value === undefined) continue
      params.push(value)
      where += ` AND ${column} = $${params.length}`
    }
    params.push(limit)
    return q<{ n: string; lastSeq: string | null; lastHash: string | null; text: string | null }>(`
      SELECT count(*) AS n, max(seq) AS last_seq, (array_agg(hash ORDER BY seq DESC))[1] AS last_hash,
             string_agg(line || E'\n', '' ORDER BY seq) AS text
      FROM (SELECT seq, hash, json_build_object('seq', seq, 'entryId', id, 'agentId', agent_id, 'agentDid', agent_did,
              'grantId', grant_id, 'principalId', principal_id, 'developerId', developer_id, 'action', action, 'metadata', metadata,
              'status', status, 'timestamp', timestamp, 'prevHash', prev_hash, 'hash', hash, 'hashVersion', hash_version,
              'piiSalt', pii_salt, 'principalDigest', principal_digest, 'metadataDigest', metadata_digest,
              'erased', erased_at IS NOT NULL)::text AS line
            FROM audit_log WHERE ${where} ORDER BY seq LIMIT $${params.length}) page`, params).pipe(
      Effect.map(([r]) => ({ rows: Number(r!.n), lastSeq: Number(r!.lastSeq ?? 0), lastHash: r!.lastHash, text: r!.text ?? "" }))
    )
  }

  const auditCount = (developerId: string, first: number, last: number, filters: AuditFilters) => {
    const params: Array<unknown> = [developerId, first, last]
    let where = "developer_id = $1 AND seq >= $2 AND seq <= $3"
    for (const [column, value] of [["agent_id", filters.agentId], ["status", filters.status], ["action", filters.action]] as const) {
      if (value === undefined) continue
      params.push(value)
      where += ` AND ${column} = $${params.length}`
    }
    return q<{ n: string }>(`SELECT count(*) AS n FROM audit_log WHERE ${where}`, params).pipe(Effect.map(([r]) => Number(r!.n)))
  }

  /** grant rows issued in the window, oldest first, after the keyset position (createdAt, id) */
  const grantWhere = (since: Date | undefined, until: Date | undefined, status: string | undefined, nowMs: number, params: Array<unknown>) => {
    let where = "developer_id = $1"
    if (since !== undefined) { params.push(since); where += ` AND created_at >= $${params.length}` }
    if (until !== undefined) { params.push(until); where += ` AND created_at <= $${params.length}` }
    if (status === "revoked") where += " AND status = 'revoked'"
    else if (status === "active" || status === "expired") {
      params.push(new Date(nowMs))
      where += ` AND status = 'active' AND expires_at ${status === "active" ? ">" : "<="} $${params.length}`
    }
    return where
  }

  const grantPage = (developerId: string, after: { createdAt: Date; id: string } | undefined, since: Date | undefined,
    until: Date | undefined, status: string | undefined, nowMs: number, limit = PAGE) => {
    const params: Array<unknown> = [developerId]
    let where = grantWhere(since, until, status, nowMs, params)
    if (after !== undefined) {
      params.push(after.createdAt, after.id)
      where += ` AND (created_at, id) > ($${params.length - 1}, $${params.length})`
    }
    params.push(limit)
    return q(`SELECT id, agent_id, principal_id, developer_id, scopes, status, issued_at, expires_at, revoked_at, delegation_depth,
                     created_at
              FROM grants WHERE ${where} ORDER BY created_at, id LIMIT $${params.length}`, params).pipe(
      Effect.map((rows) => rows.map((r) => ({ row: toGrantRow(r, nowMs), key: { createdAt: r.createdAt as Date, id: r.id as string } })))
    )
  }

  const grantCount = (developerId: string, since: Date | undefined, until: Date | undefined, status: string | undefined, nowMs: number) => {
    const params: Array<unknown> = [developerId]
    const where = grantWhere(since, until, status, nowMs, params)
    return q<{ n: string }>(`SELECT count(*) AS n FROM grants WHERE ${where}`, params).pipe(Effect.map(([r]) => Number(r!.n)))
  }

  return { q, auditRange, jobAtSeq, auditPage, auditNdjsonPage, auditCount, grantPage, grantCount }
}

export type Repo = ReturnType<typeof makeRepo>
