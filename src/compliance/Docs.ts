/**
 * Summaries, descriptions and examples of compliance exports (decisions §15); ComplianceApi
 * carries them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { AGENT, DEV, DID, GRANT, LATER, PRINCIPAL, T } from "../platform/DocExamples.ts"

const EXPORT = "cexp_01JDQ9NY2ZABCDEFGHJKMNPQRS"
/** a DPDP export's id (decisions §21) */
const DPDP_EXPORT = "exp_01JDQ9NY2ZABCDEFGHJKMNPQRS"
const KID = "NjU4MTA"
const JWS = "eyJhbGciOiJSUzI1NiIsImtpZCI6Ik5qVTRNVEEiLCJ0eXAiOiJzZXJ2aWNlLWV4cG9ydCtqd3MifQ.eyJ0eXAiOiJzZXJ2aWNlLWV4cG9ydC1wYWdlIn0.c2lnbmF0dXJl"
/** a detached JWS (the payload, the proof's canonical JSON, left out) */
const DETACHED = "eyJhbGciOiJSUzI1NiIsImtpZCI6Ik5qVTRNVEEiLCJ0eXAiOiJzZXJ2aWNlLWV4cG9ydCtqd3MifQ..c2lnbmF0dXJl"
const SHA = "53d1f4f145fb09f8806bfd75374ec802c63e6936df3257956451aba2ec2eea80"
const H1 = "bb413aafd3b643fa3ce730cea93fac8be628db970058b96c755334cbe4d4d224"
const H2 = "4477d463e2b8c19a8df499b5d82b73c6e9eccfe64e968fbb89e82094627ff8d4"
const summary = {
  generatedAt: T, since: "2026-10-01T00:00:00.000Z", until: "2026-10-31T23:59:59.999Z",
  agents: { total: 4, active: 3, suspended: 1, revoked: 0 },
  grants: { total: 120, active: 87, revoked: 21, expired: 12 },
  auditEntries: { total: 12840, success: 12711, failure: 98, blocked: 31 },
  policies: { total: 0 },
  plan: "free",
  breaches: { open: 1, overdue: 0 },
  consentBundles: { active: 6, revoked: 2 },
  directory: { users: 0, deprovisioned: 0 },
  anomalies: { open: 0 },
  dpdp: { consentRecords: { active: 40, withdrawn: 3, expired: 1, erased: 1 }, grievances: { open: 2, overdue: 0 }, erasures: { processing: 0, completed: 1 } }
}
const grantRow = {
  grantId: GRANT, agentId: AGENT, principalId: PRINCIPAL, developerId: DEV, scopes: ["email:read"], status: "active",
  issuedAt: T, expiresAt: LATER, revokedAt: null, delegationDepth: 0
}
const auditRow = (seq: number, hash: string, prevHash: string | null) => ({
  seq, entryId: seq === 41 ? "alog_01JDQ94D5E6F7G8H9J0K1M2N3P" : "alog_01JDQ94E6F7G8H9J0K1M2N3P4Q", agentId: AGENT, agentDid: DID, grantId: GRANT,
  principalId: PRINCIPAL, developerId: DEV, action: "email.read", metadata: { folder: "inbox" }, status: "success", timestamp: T, prevHash, hash
})
const job = {
  id: EXPORT, kind: "audit", format: "ndjson", status: "complete", rowCounts: { entries: 12840 }, sha256: SHA, signature: DETACHED, bytes: 9_437_184,
  createdAt: T, completedAt: "2026-11-24T09:30:41.000Z", expiresAt: "2026-12-01T09:30:41.000Z", error: null,
  exportId: EXPORT, issuer: "https://auth.acme.example", developerId: DEV, generatedAt: T, since: "2026-01-01T00:00:00.000Z",
  until: "2026-10-31T23:59:59.999Z", filters: {}, anchor: "9d56c3e6d16ef99325e0c7f75962938d8c9bc7e0a337a1d46a28dc782e9669fe", rows: 12840,
  lastHash: H2, kid: KID
}
const dpdpData = {
  exportType: "gdpr-article-15", dateRange: { from: "2026-01-01T00:00:00.000Z", to: "2026-11-24T23:59:59.999Z" }, generatedAt: T, developerId: DEV,
  dataPrincipalId: PRINCIPAL,
  consentRecords: [{
    id: "crec_01JDQ9HT8V9W0XYZABCDEFGHJK", recordId: "crec_01JDQ9HT8V9W0XYZABCDEFGHJK", grantId: GRANT, grantIds: [GRANT],
    dataPrincipalId: PRINCIPAL, purposes: [{ code: "email-triage", description: "Sort your inbox" }], scopes: ["email:read"],
    consentNoticeId: "privacy-notice", consentNoticeVersion: "2026-11", status: "active",
    consentGivenAt: T, processingExpiresAt: LATER, withdrawnAt: null, erasedAt: null
  }],
  auditLog: [{ id: "alog_01JDQ94D5E6F7G8H9J0K1M2N3P", action: "email.read", status: "success", metadata: { folder: "inbox" }, timestamp: T }],
  truncated: false, auditLogLimit: null
}
const WINDOW = "`since` / `until` are ISO 8601 dates or date-times (a date alone for `until` means the end of that day); a malformed or " +
  "impossible date, or `since` after `until`, answers 400."
const SIGNED = "Signed with the grant-token key (RS256, `kid` in the JWKS), so an auditor checks it with the public JWKS alone " +
  "(`agent-auth verify-export <file> jwks.json [proof.json]`, or `npx agent-auth-verify-export` from its own package). Every export is itself written to your audit chain (`service.compliance.exported`) " +
  "twice: when it starts (`stage: started`, with its window and filters, so an export whose client went away is still on record) and when it ends " +
  "(`stage: completed`, with its row count and digest)."
const STREAMED = "`format=ndjson` or `csv` streams every row as a file (`Content-Disposition: attachment`, no row cap, constant memory) that holds " +
  "only data: NDJSON one row per line; CSV per RFC 4180 (CRLF), the column names first, an empty unquoted cell for null, and a cell that " +
  "starts with `=`, `+`, `-`, `@`, tab, CR or `'` written with one leading `'` so a spreadsheet never runs it as a formula (the verifier strips " +
  "it back). The proof travels beside the body: the `Export-Id` header (and for audit `Export-Anchor`, empty at the chain's start), and once " +
  "the body has ended `GET /v1/compliance/exports/{Export-Id}` gives `rows`, `sha256` (of the body's bytes), `anchor`, `lastHash`, `kid` " +
  "and `signature`, a detached JWS over that proof's canonical JSON. (No HTTP trailer: the server cannot send one.) `envelope=true` gives the " +
  "one-file form instead: a first line with the export's facts (`{\"export\":…}` / `# export …`), the same rows, and a last line with the " +
  "same proof (`{\"exportEnd\":…}` / `# end …`)."

export const COMPLIANCE_DOCS = {
  summary: {
    summary: "Compliance summary",
    description: `Called by your backend or an auditor's tooling: counts over a window — agents by status, grants (active, revoked, expired), audit entries by result, policies, your plan, and (ours) open and overdue breaches, consent bundles, directory users and open anomaly alerts. ${WINDOW} Without a window, everything so far.`,
    response: summary
  },
  exportGrants: {
    summary: "Export grants",
    description: `Grants created in the window, oldest first, optionally one \`status\` (\`active\`, \`revoked\`, \`expired\`). \`format=json\` (default) answers a signed page: \`limit\` 1–10,000 (default 1,000), \`nextCursor\` to continue, \`total\` the whole count, \`signature\` a JWS over the digest of the page without it. ${STREAMED} ${WINDOW} ${SIGNED}`,
    response: { generatedAt: T, total: 120, nextCursor: null, kid: KID, signature: JWS, grants: [grantRow] }
  },
  exportAudit: {
    summary: "Export the audit chain",
    description: `Your audit entries in chain order (\`seq\`), filtered by window, \`agentId\`, \`status\` (\`success\`, \`failure\`, \`blocked\`) and \`action\`, with every \`hash\` and \`prevHash\`. \`anchor\` is the hash of the entry before the first one exported, so an unfiltered range (\`contiguous: true\`) can be checked on its own; a filtered export has gaps and says \`contiguous: false\`. Formats and paging as the grants export; a cursor only works with the filters it was made with (400 otherwise). ${WINDOW} ${SIGNED}`,
    response: { generatedAt: T, total: 12840, nextCursor: "eyJhIjo0MiwibCI6MTI4ODAsInQiOjEyODQwLCJjIjp0cnVlLCJmIjoie30ifQ", kid: KID, signature: JWS, entries: [auditRow(41, H1, "9d56c3e6d16ef99325e0c7f75962938d8c9bc7e0a337a1d46a28dc782e9669fe"), auditRow(42, H2, H1)], anchor: "9d56c3e6d16ef99325e0c7f75962938d8c9bc7e0a337a1d46a28dc782e9669fe", contiguous: true }
  },
  evidencePack: {
    summary: "Evidence pack",
    description: `One signed JSON document for an audit (\`framework\`: \`soc2\`, \`gdpr\`, \`dpdp\` or \`all\`, the default): \`meta\`, \`summary\`, \`grants\`, \`auditEntries\`, \`policies\` (\`rules\`, and \`cedar\`: the active Cedar set's \`bundleId\`, \`version\`, \`sha256\` and \`text\`, or null), \`breaches\` (ids, statuses and dates; no principal ids or free text), \`chainIntegrity\` (the window's entries re-hashed from their anchor as they were written, and whether the stored chain head still matches), \`manifest\` (each section's SHA-256 over its canonical JSON, sorted keys, no spaces) and \`signature\`, a compact JWS whose payload is the manifest. Streamed. Above 50,000 audit entries in the window it answers 413 \`EXPORT_TOO_LARGE\` before sending anything: create an export job instead. ${WINDOW} ${SIGNED}`,
    response: {
      meta: { developerId: DEV, exportId: EXPORT, framework: "dpdp", generatedAt: T, issuer: "https://auth.acme.example", schemaVersion: "1.0", since: null, until: null },
      summary, policies: { rules: [], cedar: { bundleId: "pbnd_01JDQ9NY2ZABCDEFGHJKMNPQRS", version: "v3", sha256: SHA, policyCount: 1, createdAt: T, text: "forbid(principal, action == Action::\"authorize\", resource) when { context.time.minuteOfDay < 360 };" } }, breaches: [], grants: [grantRow], auditEntries: [auditRow(1, H1, null)],
      chainIntegrity: { anchorHash: null, checkedEntries: 1, firstBrokenAt: null, headHash: H1, headMatchesStored: true, valid: true },
      manifest: { files: [{ name: "meta", rows: 1, sha256: SHA }, { name: "summary", rows: 1, sha256: SHA }, { name: "grants", rows: 1, sha256: SHA }] },
      signature: JWS
    }
  },
  createJob: {
    summary: "Start an export job",
    description: "For exports too large to stream in one request (an evidence pack above 50,000 entries, a year of audit): answers 202 with the job id at once; a background worker writes the file (resumed by another instance if this one dies), then `GET /v1/compliance/exports/{id}` says `complete` and download serves it. `kind` `evidence-pack` (JSON, `framework`, no filters), `grants` (`status`) or `audit` (`status`, `agentId`, `action`); `format` `ndjson` (the default for grants and audit) or `csv` (JSON pages come from the export routes). Results are kept 7 days. At most 5 jobs an hour and 3 unfinished at a time per developer (429 `RATE_LIMITED`).",
    request: { kind: "audit", format: "ndjson", since: "2026-01-01", until: "2026-10-31" },
    response: { id: EXPORT, status: "pending" }
  },
  getJob: {
    summary: "Read an export job, or a streamed export's proof",
    description: "A job: where it is: `pending`, `running`, `complete` (with `rowCounts`, the file's `sha256`, its `signature` and size in `bytes`), `failed` (after 3 attempts; `error` says only that it could not be produced) or `expired` (kept 7 days). Poll it; the worker picks jobs up within seconds. A complete NDJSON/CSV job, and any streamed NDJSON/CSV export by its `Export-Id` once its body has ended, also carry the detached proof: `exportId`, `issuer`, `developerId`, `generatedAt`, `since`, `until`, `filters`, `anchor` (audit: the hash of the entry before the first in range; grants: null), `rows`, `sha256` (of the body), `lastHash`, `kid` and `signature`, a detached compact JWS (RS256) whose payload is the canonical JSON (sorted keys, no spaces) of those fields with `kind`, `format` and `status`. `bun scripts/verify-export.ts <body> jwks.json <this JSON>` checks a body with it. 404 for an export that is not yours or whose stream never ended.",
    response: job
  },
  downloadJob: {
    summary: "Download an export job's file",
    description: "The finished file, streamed, in its format (`application/json` for an evidence pack, `application/x-ndjson` or `text/csv`: rows only, as the streamed exports), with `Content-Digest` (SHA-256, the job's `sha256`) and `Content-Disposition: attachment`; an NDJSON/CSV file also carries `Export-Id`, `Export-Anchor` (audit) and `Export-Proof` (its whole proof as base64url JSON, so the download verifies from its headers: `--headers`). `envelope=true` wraps the rows in the proof's first and last lines (one self-contained file; no `Content-Digest` then), 400 for an evidence pack. 409 `EXPORT_NOT_READY` while pending or running (or failed), 410 `GONE` once the 7 days passed, 404 for another developer's job.",
    response: { meta: { developerId: DEV, exportId: EXPORT, framework: "all", generatedAt: T, issuer: "https://auth.acme.example", schemaVersion: "1.0", since: "2026-01-01T00:00:00.000Z", until: null }, manifest: { files: [{ name: "meta", rows: 1, sha256: SHA }] }, signature: JWS }
  },
  createDpdpExport: {
    summary: "DPDP / GDPR export",
    description: "The published protocol's data-protection export (its id `exp_…`, read by this route and by `GET /v1/compliance/exports/{id}` alike), for a regulator's request or a person's access request: `type` `dpdp-audit`, `gdpr-article-15` (one person's data: `dataPrincipalId` required, 400 without) or `eu-ai-act-conformance`, over [`dateFrom`, `dateTo`] (dates or date-times; a date alone for `dateTo` is the end of that day). `data` holds the consent records (your grants: `purposes` are their scopes, `status` `active`, `withdrawn` or `expired`) and the action log (audit entries), each switchable with `includeConsentRecords` / `includeActionLog` (default true). Nothing is cut off (`truncated` is always false): above 10,000 records it answers **202** with a job (`status: pending`, `statusUrl`) instead of 201. Signed like the other exports and written to the audit chain.",
    request: { type: "gdpr-article-15", dateFrom: "2026-01-01", dateTo: "2026-11-24", dataPrincipalId: PRINCIPAL },
    response: {
      exportId: DPDP_EXPORT, type: "gdpr-article-15", format: "json", truncated: false, auditLogLimit: null, dataPrincipalId: PRINCIPAL, recordCount: 2,
      data: dpdpData, expiresAt: "2026-12-01T09:30:00.000Z", createdAt: T
    }
  },
  getDpdpExport: {
    summary: "Read a DPDP / GDPR export",
    description: "A DPDP export by `exportId`, with its status, digest and signature; `data` inline when complete and at most 8 MiB, else `downloadUrl` (the job's download). 410 `GONE` after 7 days; 404 for an id that is not a DPDP export of yours.",
    response: {
      exportId: DPDP_EXPORT, type: "gdpr-article-15", dateFrom: "2026-01-01T00:00:00.000Z", dateTo: "2026-11-24T23:59:59.999Z", format: "json", status: "complete",
      recordCount: 2, truncated: false, auditLogLimit: null, dataPrincipalId: PRINCIPAL, data: dpdpData, sha256: SHA, signature: JWS,
      expiresAt: "2026-12-01T09:30:00.000Z", createdAt: T
    }
  }
} satisfies Record<string, OperationDoc>
