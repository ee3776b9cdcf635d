/**
 * The audit chain: one SHA-256 hash chain per developer (decisions §3).
 *
 * hash = SHA-256 hex of the canonical JSON (sorted keys) of
 *   { id, agentId, agentDid, grantId, principalId, developerId, action, metadata, timestamp, prevHash, status }
 * with prevHash null for the first entry.
 *
 * `append` runs in the caller's transaction and locks the developer's chain head row (its UPDATE,
 * or for a developer's first entry INSERT … ON CONFLICT DO UPDATE … RETURNING, takes the row lock),
 * so concurrent writers on any number of instances append one after another: the chain never forks,
 * and an entry commits or rolls back with the change it records.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import { type AuditEntry, checkEntry, entryHashV2, entryV2HashParts, newPiiSalt, piiDigests } from "./AuditHash.ts"
import { newId } from "./Ids.ts"
import { nowMillis } from "./Time.ts"

export { type AuditEntry, canonicalJson, checkEntry, entryHash } from "./AuditHash.ts"


export interface AppendInput {
  readonly developerId: string
  readonly action: string
  readonly agentId?: string | null
  readonly agentDid?: string | null
  readonly grantId?: string | null
  readonly principalId?: string | null
  readonly metadata?: Record<string, unknown>
  readonly status?: string
}

interface Row {
  id: string
  agentId: string | null
  agentDid: string | null
  grantId: string | null
  principalId: string | null
  developerId: string
  action: string
  metadata: Record<string, unknown> | string
  hash: string
  prevHash: string | null
  timestamp: string
  status: string
  seq: string | number
  hashVersion?: number
  piiSalt?: string | null
  principalDigest?: string | null
  metadataDigest?: string | null
  erasedAt?: Date | null
}

/** the columns rowToEntry reads (decisions §21 adds hash version 2's) */
export const ENTRY_COLUMNS = `id, agent_id, agent_did, grant_id, principal_id, developer_id, action, metadata, hash, prev_hash,
  timestamp, status, seq, hash_version, pii_salt, principal_digest, metadata_digest, erased_at`

export const rowToEntry = (row: Row): AuditEntry => ({
  entryId: row.id,
  agentId: row.agentId,
  agentDid: row.agentDid,
  grantId: row.grantId,
  principalId: row.principalId,
  developerId: row.developerId,
  action: row.action,
  metadata: typeof row.metadata === "string" ? JSON.parse(row.metadata) : row.metadata,
  hash: row.hash,
  prevHash: row.prevHash,
  timestamp: row.timestamp,
  status: row.status,
  hashVersion: row.hashVersion ?? 1,
  piiSalt: row.piiSalt ?? null,
  principalDigest: row.principalDigest ?? null,
  metadataDigest: row.metadataDigest ?? null,
  erased: row.erasedAt !== null && row.erasedAt !== undefined
})

/** The columns of a batch of entries, as `unnest` arrays, in the order insertEntriesSql takes them. */
export interface EntryColumns {
  readonly id: Array<string>
  readonly seq: Array<number>
  readonly agentId: Array<string | null>
  readonly agentDid: Array<string | null>
  readonly grantId: Array<string | null>
  readonly principalId: Array<string | null>
  readonly action: Array<string>
  readonly metadata: Array<string>
  readonly status: Array<string>
  readonly prevHash: Array<string | null>
  readonly hash: Array<string>
  readonly piiSalt: Array<string>
  readonly principalDigest: Array<string | null>
  readonly metadataDigest: Array<string>
}

/** An entry's own fields, all but its place in the chain; hash version 2 (decisions §21): salted digests of the principal and metadata */
const entryFields = (developerId: string, input: AppendInput, ms: number, timestamp = new Date(ms).toISOString()) => {
  const principalId = input.principalId ?? null
  const metadata = input.metadata ?? {}
  const piiSalt = newPiiSalt()
  return {
    id: newId("alog", ms),
    agentId: input.agentId ?? null,
    agentDid: input.agentDid ?? null,
    grantId: input.grantId ?? null,
    principalId,
    developerId,
    action: input.action,
    metadata,
    timestamp,
    status: input.status ?? "success",
    piiSalt,
    ...piiDigests(piiSalt, principalId, metadata)
  }
}

/**
 * Chains one developer's new entries onto the head (seq, hash) they are appended to: ids, seqs,
 * hashes, and the columns to insert. Pure, so a writer can chain before it knows whether the
 * head still holds (see AuditedEvents) and chain again when it does not.
 */
export const chainEntries = (
  developerId: string,
  head: { readonly seq: number; readonly hash: string | null },
  inputs: ReadonlyArray<AppendInput>,
  ms: number
) => {
  const timestamp = new Date(ms).toISOString()
  let seq = head.seq
  let prevHash = head.hash
  const cols: EntryColumns = { id: [], seq: [], agentId: [], agentDid: [], grantId: [], principalId: [], action: [], metadata: [],
    status: [], prevHash: [], hash: [], piiSalt: [], principalDigest: [], metadataDigest: [] }
  const entries: Array<AuditEntry> = []
  for (const input of inputs) {
    const { piiSalt, principalDigest, metadataDigest, ...fields } = entryFields(developerId, input, ms, timestamp)
    const entry = { ...fields, prevHash }
    const digests = { principalDigest, metadataDigest }
    const hash = entryHashV2({ ...entry, ...digests })
    seq++
    cols.piiSalt.push(piiSalt); cols.principalDigest.push(digests.principalDigest); cols.metadataDigest.push(digests.metadataDigest)
    cols.id.push(entry.id); cols.seq.push(seq); cols.agentId.push(entry.agentId); cols.agentDid.push(entry.agentDid)
    cols.grantId.push(entry.grantId); cols.principalId.push(entry.principalId); cols.action.push(entry.action)
    cols.metadata.push(JSON.stringify(entry.metadata)); cols.status.push(entry.status); cols.prevHash.push(entry.prevHash); cols.hash.push(hash)
    const { id: entryId, ...rest } = entry
    entries.push({ entryId, ...rest, hash, hashVersion: 2, piiSalt, ...digests, erased: false })
    prevHash = hash
  }
  return { entries, cols, seq, prevHash, timestamp }
}

/**
 * The INSERT of chained entries from `unnest` arrays: $1 developer, $2 timestamp, $3 created_at,
 * then the eleven EntryColumns arrays from `$first`, and hash version 2's three (salt, digests) from
 * `$v2first` (entryV2Params); `source` may join a guard (see AuditedEvents).
 */
export const insertEntriesSql = (first: number, source = "", v2first = first + 11) => {
  const p = (n: number) => `$${first + n}`
  const v = (n: number) => `$${v2first + n}`
  return `INSERT INTO audit_log (id, developer_id, seq, agent_id, agent_did, grant_id, principal_id, action, metadata,
                                 status, timestamp, prev_hash, hash, created_at, hash_version, pii_salt, principal_digest, metadata_digest)
          SELECT u.id, $1, u.seq, u.agent_id, u.agent_did, u.grant_id, u.principal_id, u.action, u.metadata::jsonb,
                 u.status, $2, u.prev_hash, u.hash, $3, 2, u.pii_salt, u.principal_digest, u.metadata_digest
          FROM ${source}unnest(${p(0)}::text[], ${p(1)}::bigint[], ${p(2)}::text[], ${p(3)}::text[], ${p(4)}::text[], ${p(5)}::text[],
                      ${p(6)}::text[], ${p(7)}::text[], ${p(8)}::text[], ${p(9)}::text[], ${p(10)}::text[],
                      ${v(0)}::text[], ${v(1)}::text[], ${v(2)}::text[])
               AS u(id, seq, agent_id, agent_did, grant_id, principal_id, action, metadata, status, prev_hash, hash,
                    pii_salt, principal_digest, metadata_digest)
          RETURNING 1`
}

export const entryColumnParams = (cols: EntryColumns) =>
  [cols.id, cols.seq, cols.agentId, cols.agentDid, cols.grantId, cols.principalId, cols.action, cols.metadata, cols.status,
    cols.prevHash, cols.hash]

/** hash version 2's columns, passed after the statement's other parameters (insertEntriesSql's v2first) */
export const entryV2Params = (cols: EntryColumns) => [cols.piiSalt, cols.principalDigest, cols.metadataDigest]

export interface AuditChainService {
  readonly append: (input: AppendInput) => Effect.Effect<AuditEntry>
  /**
   * Appends many entries in the caller's transaction with one head lock and one INSERT per
   * developer (developers in sorted order, so concurrent batches lock heads in the same order).
   * Entries of a developer are chained in the order given.
   */
  readonly appendMany: (inputs: ReadonlyArray<AppendInput>) => Effect.Effect<ReadonlyArray<AuditEntry>>
  readonly verify: (developerId: string) => Effect.Effect<{
    valid: boolean; checkedEntries: number; firstBrokenAt: string | null; erasedEntries: number; linkOnlyEntries: number
  }>
}

/** Runs in the caller's transaction when there is one (no savepoint round trips), else in its own. */
export const inTransaction = <A, E, R>(sql: SqlClient.SqlClient, effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (tx) =>
    Option.isSome(tx) ? effect : sql.withTransaction(effect))

export class AuditChain extends Context.Tag("agent-auth/AuditChain")<AuditChain, AuditChainService>() {}

export const AuditChainLive = Layer.effect(
  AuditChain,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const appendMany = (inputs: ReadonlyArray<AppendInput>) =>
      inTransaction(sql, Effect.gen(function*() {
        const ms = yield* nowMillis
        const timestamp = new Date(ms).toISOString()
        const developers = [...new Set(inputs.map((i) => i.developerId))].sort()
        const out = new Map<AppendInput, AuditEntry>()
        for (const developerId of developers) {
          const group = inputs.filter((i) => i.developerId === developerId)
          const [head] = yield* sql<{ seq: string; hash: string | null }>`
            INSERT INTO audit_heads (developer_id, seq, hash) VALUES (${developerId}, 0, NULL)
            ON CONFLICT (developer_id) DO UPDATE SET seq = audit_heads.seq
            RETURNING seq, hash`
          const { entries, cols, seq, prevHash } = chainEntries(developerId, { seq: Number(head!.seq), hash: head!.hash }, group, ms)
          group.forEach((input, n) => out.set(input, entries[n]!))
          // the entries and the new head in one statement
          yield* sql.unsafe(
            `WITH entries AS (${insertEntriesSql(4, "", 17)})
             UPDATE audit_heads SET seq = $15, hash = $16 WHERE developer_id = $1`,
            [developerId, timestamp, new Date(ms), ...entryColumnParams(cols), seq, prevHash, ...entryV2Params(cols)] as any
          )
        }
        return inputs.map((i) => out.get(i)!)
      })).pipe(Effect.orDie)

    // One entry in one statement (issue 37): the head's UPDATE locks it, chains the next hash in SQL
    // from the hash it replaces (entryV2HashParts: the same bytes entryHashV2 hashes) and hands seq,
    // previous and new hash to the entry's INSERT. The developer's head is then held from this
    // statement to the commit, one round trip fewer than the lock-then-write of appendMany (every
    // other append of that developer waits on it: issue 27, the credential issuance measured 5 of
    // 10 connections waiting on the head). A developer without a head yet takes appendMany's path.
    const append = (input: AppendInput) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const fields = entryFields(input.developerId, input, ms)
        const { before, after } = entryV2HashParts(fields)
        const [row] = yield* sql.unsafe<{ seq: string; prevHash: string | null; hash: string }>(
          `WITH head AS (
             UPDATE audit_heads h SET seq = h.seq + 1, prev_hash = h.hash,
                    hash = encode(sha256(convert_to($15 || COALESCE('"' || h.hash || '"', 'null') || $16, 'UTF8')), 'hex')
             WHERE h.developer_id = $1 RETURNING h.seq, h.prev_hash, h.hash
           )
           INSERT INTO audit_log (id, developer_id, seq, agent_id, agent_did, grant_id, principal_id, action, metadata,
                                  status, timestamp, prev_hash, hash, created_at, hash_version, pii_salt, principal_digest, metadata_digest)
           SELECT $4, $1, head.seq, $5, $6, $7, $8, $9, $10::jsonb, $11, $2, head.prev_hash, head.hash, $3, 2, $12, $13, $14 FROM head
           RETURNING seq, prev_hash, hash`,
          [input.developerId, fields.timestamp, new Date(ms), fields.id, fields.agentId, fields.agentDid, fields.grantId, fields.principalId,
            fields.action, JSON.stringify(fields.metadata), fields.status, fields.piiSalt, fields.principalDigest, fields.metadataDigest,
            before, after] as any
        )
        if (row === undefined) return (yield* appendMany([input]))[0]!
        const { id: entryId, piiSalt, principalDigest, metadataDigest, ...rest } = fields
        return { entryId, ...rest, prevHash: row.prevHash, hash: row.hash, hashVersion: 2, piiSalt, principalDigest, metadataDigest, erased: false }
      }).pipe(Effect.orDie)

    const verify = (developerId: string) =>
      Effect.gen(function*() {
        // The head is read first: the walk then covers exactly the chain as it stood (entries
        // appended meanwhile lie beyond it) and must end on it, so entries deleted from the end of
        // the chain, which leave every remaining link intact, are found too.
        const [head] = yield* sql<{ seq: string; hash: string | null }>`SELECT seq, hash FROM audit_heads WHERE developer_id = ${developerId}`
        const endSeq = head === undefined ? Number.MAX_SAFE_INTEGER : Number(head.seq)
        let prevHash: string | null = null
        let checked = 0
        let erasedEntries = 0
        let linkOnlyEntries = 0
        let lastSeq = 0
        // pages of bounded size (metadata is at most 16 KiB each), so memory does not grow with the chain
        const pageSize = 250
        for (;;) {
          const rows: ReadonlyArray<Row> = yield* sql.unsafe<Row>(
            `SELECT ${ENTRY_COLUMNS} FROM audit_log WHERE developer_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4`,
            [developerId, lastSeq, endSeq, pageSize])
          for (const row of rows) {
            const entry = rowToEntry(row)
            // version 2 checked whole (digests while the salt exists); an erased version-1 entry by its links only
            const own = checkEntry({ ...entry, id: entry.entryId })
            if (entry.prevHash !== prevHash || !own.ok || Number(row.seq) !== lastSeq + 1) {
              return { valid: false, checkedEntries: checked, firstBrokenAt: entry.entryId, erasedEntries, linkOnlyEntries }
            }
            if (entry.erased === true) erasedEntries++
            if (own.linkOnly) linkOnlyEntries++
            prevHash = entry.hash
            lastSeq = Number(row.seq)
            checked++
          }
          if (rows.length < pageSize) {
            // the chain stops short of its head: its last entries are gone (no entry to name, so firstBrokenAt is null)
            const whole = head === undefined || (lastSeq === Number(head.seq) && prevHash === head.hash)
            return { valid: whole, checkedEntries: checked, firstBrokenAt: null, erasedEntries, linkOnlyEntries }
          }
        }
      }).pipe(Effect.orDie)

    return { append, appendMany, verify }
  })
)
