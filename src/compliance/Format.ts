/**
 * The file layouts of streamed exports (decisions §15), shared by the server and the verifier.
 *
 * NDJSON: line 1 `{"export":{…header}}`, one line per row, last line `{"exportEnd":{…trailer}}`.
 * CSV: line 1 `# export {…header}`, the column names, one record per row, last line
 * `# end {…trailer}` (read back with csv-parse's `comment: "#"`; an empty unquoted cell is null).
 *
 * The trailer's `sha256` covers every byte before the trailer line, and its `signature` is a compact
 * JWS (RS256, the grant-token key) over the canonical JSON of `signedTrailer(...)`, so the file
 * alone and the public JWKS prove who produced it and that not one byte changed. The digest has to
 * travel in the file: a streamed response sends its headers before the last row is read.
 */
import { stringify } from "csv-stringify/sync"
import { canonicalJson } from "../platform/AuditChain.ts"

export type StreamFormat = "ndjson" | "csv"
export type ExportKind = "audit" | "grants"

export const AUDIT_COLUMNS = [
  "seq", "entryId", "agentId", "agentDid", "grantId", "principalId", "developerId", "action", "metadata", "status",
  "timestamp", "prevHash", "hash"
] as const
export const GRANT_COLUMNS = [
  "grantId", "agentId", "principalId", "developerId", "scopes", "status", "issuedAt", "expiresAt", "revokedAt",
  "delegationDepth"
] as const
/** columns a CSV cell may leave empty for null */
export const NULLABLE = new Set(["agentId", "agentDid", "grantId", "principalId", "prevHash", "revokedAt"])

export interface ExportHeader {
  readonly exportId: string
  readonly kind: ExportKind
  readonly format: StreamFormat
  readonly issuer: string
  readonly developerId: string
  readonly generatedAt: string
  readonly since: string | null
  readonly until: string | null
  readonly filters: Record<string, string>
  /** audit only: true when every entry of the range is in the file, so the links can be checked */
  readonly contiguous?: boolean
  /** audit only: the hash of the entry before the first one in range (null at the chain's start) */
  readonly anchor?: string | null
}

export interface ExportTrailer {
  readonly rows: number
  readonly sha256: string
  /** audit only: the hash of the last entry in range */
  readonly lastHash?: string | null
  readonly kid: string
  readonly signature: string
}

export interface AuditRow {
  readonly seq: number
  readonly entryId: string
  readonly agentId: string | null
  readonly agentDid: string | null
  readonly grantId: string | null
  readonly principalId: string | null
  readonly developerId: string
  readonly action: string
  readonly metadata: Record<string, unknown>
  readonly status: string
  readonly timestamp: string
  readonly prevHash: string | null
  readonly hash: string
}

export interface GrantRow {
  readonly grantId: string
  readonly agentId: string
  readonly principalId: string
  readonly developerId: string
  readonly scopes: ReadonlyArray<string>
  readonly status: string
  readonly issuedAt: string
  readonly expiresAt: string
  readonly revokedAt: string | null
  readonly delegationDepth: number
}

/** What the trailer's JWS signs: everything an auditor needs to trust the file's bytes. */
export const signedTrailer = (header: ExportHeader, rows: number, sha256: string, lastHash: string | null | undefined) =>
  canonicalJson({
    typ: "service-export",
    exportId: header.exportId,
    kind: header.kind,
    format: header.format,
    issuer: header.issuer,
    developerId: header.developerId,
    rows,
    sha256,
    lastHash: lastHash ?? null
  })

const columnsOf = (kind: ExportKind) => kind === "audit" ? AUDIT_COLUMNS : GRANT_COLUMNS

export const headerText = (header: ExportHeader): string =>
  header.format === "ndjson"
    ? `${JSON.stringify({ export: header })}\n`
    : `# export ${JSON.stringify(header)}\n${stringify([[...columnsOf(header.kind)]])}`

export const trailerText = (format: StreamFormat, trailer: ExportTrailer): string =>
  format === "ndjson" ? `${JSON.stringify({ exportEnd: trailer })}\n` : `# end ${JSON.stringify(trailer)}\n`

const cell = (column: string, value: unknown): unknown =>
  column === "metadata" ? canonicalJson(value) : column === "scopes" ? JSON.stringify(value) : value

/** One page of rows as text; a field that could start a comment line is quoted. */
export const rowsText = (kind: ExportKind, format: StreamFormat, rows: ReadonlyArray<AuditRow | GrantRow>): string => {
  if (rows.length === 0) return ""
  if (format === "ndjson") {
    let out = ""
    for (const row of rows) out += `${JSON.stringify(row)}\n`
    return out
  }
  const columns = columnsOf(kind)
  return stringify(rows.map((row) => columns.map((c) => cell(c, (row as any)[c]))), { quoted_match: /^#/ })
}

export const contentType = (format: StreamFormat) =>
  format === "ndjson" ? "application/x-ndjson" : "text/csv; charset=utf-8"
