/** Summaries, descriptions and examples of the audit log; AuditApi carries them. */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { AGENT, DEV, DID, GRANT, PRINCIPAL, T } from "../platform/DocExamples.ts"

const auditEntry = {
  entryId: "alog_01JDQ94D5E6F7G8H9J0K1M2N3P", agentId: AGENT, agentDid: DID, grantId: GRANT, principalId: PRINCIPAL, developerId: DEV,
  action: "email.send", metadata: { to: "team@acme.example" }, hash: "9f2c…e41a", prevHash: "5b7d…c0f3", timestamp: T, status: "success",
  hashVersion: 2, piiSalt: "3fa1…9c02", principalDigest: "a41e…77d0", metadataDigest: "0b9c…e215", erased: false
}

export const AUDIT_DOCS = {
  log: {
    summary: "Append an audit entry",
    description: "Appends what an agent did to your hash chain (`hash` covers the entry and `prevHash`, so any later change shows in verify). Actions starting with `service.` are reserved for the service.",
    request: { agentId: AGENT, agentDid: DID, grantId: GRANT, principalId: PRINCIPAL, action: "email.send", metadata: { to: "team@acme.example" }, status: "success" },
    response: auditEntry
  },
  entries: {
    summary: "List audit entries",
    description: "Newest first; filter by `agentId`, `grantId`, `principalId`, `action`; page with `cursor` / `limit`. Includes the service's own entries (`service.*`).",
    response: { entries: [auditEntry], nextCursor: null }
  },
  verify: {
    summary: "Check the audit chain",
    description: "Recomputes every entry's hash and link; `firstBrokenAt` names the first entry that does not match (null when the chain is intact). Entries since hash version 2 (decisions §21) hash salted digests of the principal and metadata, checked against the salt while it exists; a DPDP erasure deletes the salt and keeps the digests, so erased entries still verify (`erasedEntries`). Entries written before version 2 that were erased are tombstoned and checked by their links only (`linkOnlyEntries`); the erasure's own entry commits to them.",
    response: { valid: true, checkedEntries: 1284, firstBrokenAt: null, erasedEntries: 0, linkOnlyEntries: 0 }
  },
  get: { summary: "Read an audit entry", description: "One entry by `entryId` (the path's `id`).", response: auditEntry }
} satisfies Record<string, OperationDoc>
