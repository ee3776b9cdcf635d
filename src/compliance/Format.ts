/**
 * The layouts of streamed exports (decisions §15, revised), shared by the server and the verifier.
 *
 * A streamed body holds only data, so any reader takes it unchanged: NDJSON is one row per line;
 * CSV is RFC 4180 (CRLF), the column names first, then one record per row (an empty unquoted cell is null).
 * The proof travels beside the body: `Export-Id` / `Export-Anchor` headers, and once the stream has
 * ended the detached proof at GET /v1/compliance/exports/:exportId. Its `sha256` covers the body's
 * bytes exactly and its `signature` is a detached compact JWS (RS256, the grant-token key) whose
 * payload is `proofPayload(proof)`, so the body, the proof and the public JWKS are all an auditor needs.
 *
 * `?envelope=true` keeps the one-file form: a first line carrying `ExportStart`, the same body, and
 * a last line carrying the proof (`{"export":…}` / `{"exportEnd":…}` in NDJSON, `# export …` /
 * `# end …` in CSV). The envelope lines are outside the digest; the signed proof names every fact
 * they state.
 */
import { stringify } from "csv-stringify/sync"
import { canonicalJson } from "../platform/AuditHash.ts"

export type StreamFormat = "ndjson" | "csv"
export type ExportKind = "audit" | "grants"

export const AUDIT_COLUMNS = [
  "seq", "entryId", "agentId", "agentDid", "grantId", "principalId", "developerId", "action", "metadata", "status",
  "timestamp", "prevHash", "hash",
  // decisions §21: hash version 2
  "hashVersion", "piiSalt", "principalDigest", "metadataDigest", "erased"
] as const
export const GRANT_COLUMNS = [
  "grantId", "agentId", "principalId", "developerId", "scopes", "status", "issuedAt", "expiresAt", "revokedAt",
  "delegationDepth"
] as const
/** columns a CSV cell may leave empty for null */
export const NULLABLE = new Set(["agentId", "agentDid", "grantId", "principalId", "prevHash", "revokedAt", "piiSalt", "principalDigest", "metadataDigest"])

/** What is known when an export starts (the envelope's first line; every field is also in the proof). */
export interface ExportStart {
  readonly exportId: string
  readonly kind: ExportKind
  readonly format: StreamFormat
  readonly issuer: string
  readonly developerId: string
  readonly generatedAt: string
  readonly since: string | null
  readonly until: string | null
  readonly filters: Record<string, string>
  /** audit: the hash of the entry before the window's first (null at the chain's start); grants: null */
  readonly anchor: string | null
}

/** The detached proof (GET /v1/compliance/exports/:exportId, the envelope's last line). */
export interface ExportProof extends ExportStart {
  readonly status: "complete"
  readonly rows: number
  /** hex SHA-256 of the body's bytes */
  readonly sha256: string
  /** audit: the hash of the last entry exported (the anchor when a contiguous export is empty); grants: null */
  readonly lastHash: string | null
  readonly kid: string
  readonly signature: string
}

export const PROOF_FIELDS = [
  "exportId", "kind", "format", "status", "issuer", "developerId", "generatedAt", "since", "until", "filters", "anchor", "rows",
  "sha256", "lastHash", "kid"
] as const

/** An unfiltered audit export holds every entry of its range, so its links can be checked from the anchor. */
export const isContiguous = (p: Pick<ExportStart, "kind" | "filters">) => p.kind === "audit" && Object.keys(p.filters).length === 0

/** What the detached JWS signs: the proof's canonical JSON without its signature (extra fields ignored). */
export const proofPayload = (proof: Omit<ExportProof, "signature"> | Record<string, unknown>): string =>
  canonicalJson(Object.fromEntries(PROOF_FIELDS.map((f) => [f, (proof as any)[f] ?? null])))

/** `header.payload.signature` → `header..signature` (RFC 7515 appendix F) */
export const detach = (jws: string) => {
  const [h, , s] = jws.split(".")
  return `${h}..${s}`
}
/** puts the payload back into a detached JWS */
export const attach = (detached: string, payload: string) => {
  const [h, p, s] = detached.split(".")
  if (h === undefined || s === undefined || p !== "") throw new Error("not a detached compact JWS")
  return `${h}.${Buffer.from(payload, "utf8").toString("base64url")}.${s}`
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
  readonly hashVersion: number
  readonly piiSalt: string | null
  readonly principalDigest: string | null
  readonly metadataDigest: string | null
  readonly erased: boolean
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

export const columnsOf = (kind: ExportKind) => kind === "audit" ? AUDIT_COLUMNS : GRANT_COLUMNS

/**
 * A spreadsheet runs a cell starting with = + - @ tab or CR as a formula: such a cell is written
 * with a leading `'`. A value that itself starts with `'` gets one more, so `unneutralise` is exact
 * and the verifier recomputes every hash from what it reads.
 */
const RISKY = /^[=+\-@\t\r']/
export const neutralise = (value: string) => RISKY.test(value) ? `'${value}` : value
export const unneutralise = (value: string) => value.startsWith("'") ? value.slice(1) : value

const cell = (column: string, value: unknown): unknown => {
  const text = column === "metadata" ? canonicalJson(value) : column === "scopes" ? JSON.stringify(value)
    : column === "erased" || column === "hashVersion" ? String(value) : value
  return typeof text === "string" ? neutralise(text) : text
}

/** RFC 4180: records end with CRLF */
const CSV_OPTIONS = { record_delimiter: "windows" } as const

/** The CSV body's first record: the column names. */
export const csvHeaderRow = (kind: ExportKind) => stringify([[...columnsOf(kind)]], CSV_OPTIONS)

/** One page of rows as text; a field that could start an envelope comment line (`#`) is quoted. */
export const rowsText = (kind: ExportKind, format: StreamFormat, rows: ReadonlyArray<AuditRow | GrantRow>): string => {
  if (rows.length === 0) return ""
  if (format === "ndjson") {
    let out = ""
    for (const row of rows) out += `${JSON.stringify(row)}\n`
    return out
  }
  const columns = columnsOf(kind)
  return stringify(rows.map((row) => columns.map((c) => cell(c, (row as any)[c]))), { ...CSV_OPTIONS, quoted_match: /^#/ })
}

/** the envelope's first line */
export const envelopeHead = (start: ExportStart): string =>
  start.format === "ndjson" ? `${JSON.stringify({ export: start })}\n` : `# export ${JSON.stringify(start)}\n`

/** the envelope's last line */
export const envelopeEnd = (proof: ExportProof): string =>
  proof.format === "ndjson" ? `${JSON.stringify({ exportEnd: proof })}\n` : `# end ${JSON.stringify(proof)}\n`

export const startOf = (proof: ExportProof): ExportStart => ({
  exportId: proof.exportId, kind: proof.kind, format: proof.format, issuer: proof.issuer, developerId: proof.developerId,
  generatedAt: proof.generatedAt, since: proof.since, until: proof.until, filters: proof.filters, anchor: proof.anchor
})

export const contentType = (format: StreamFormat) =>
  format === "ndjson" ? "application/x-ndjson" : "text/csv; charset=utf-8"
