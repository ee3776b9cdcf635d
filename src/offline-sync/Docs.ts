/** Summary, description and example of the offline audit upload; OfflineSyncApi carries them. */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { BUNDLE, DID, GRANT, T } from "../platform/DocExamples.ts"

const entry = {
  seq: 1, timestamp: T, action: "email.read", agentDID: DID, grantId: GRANT, scopes: ["email:read"], result: "success",
  metadata: { folder: "inbox" }, prevHash: "0000000000000000", hash: "3c9d5e…a1f0", signature: "8b1f…0c2e"
}

export const OFFLINE_SYNC_DOCS = {
  sync: {
    summary: "Upload offline audit entries",
    description: "Called by your backend, relaying what a device sends (the device never holds the API key). Each entry is checked in order: duplicate (same seq and hash: accepted again, nothing written; other hash: `DUPLICATE_SEQ`), hash (`INVALID_HASH`), signature with the bundle's key, current or previous (`INVALID_SIGNATURE`), sequence (`SEQ_GAP`) and chain (`BROKEN_CHAIN`); rejected ones are listed in `errors` and the rest are stored. Resending is safe. More than 1000 entries: 413 before any is checked. Entries of expired and revoked bundles are accepted too; `revocationStatus` tells the device to stop. The body is checked by the handler (so its codes and messages are the interface's); the schema here describes it.",
    request: { bundleId: BUNDLE, entries: [entry] },
    response: { accepted: 1, rejected: 0, revocationStatus: "active", revokedAt: null, errors: [] }
  }
} satisfies Record<string, OperationDoc>
