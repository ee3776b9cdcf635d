/** Summaries, descriptions and examples of consent bundles; ConsentBundlesApi carries them. */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { AGENT, BUNDLE, JWT, PRINCIPAL, T } from "../platform/DocExamples.ts"

const bundle = {
  bundleId: BUNDLE,
  grantToken: JWT,
  jwksSnapshot: { keys: [{ kty: "RSA", kid: "NjU4MTA", n: "0vx7agoebGcQSuu…", e: "AQAB", alg: "RS256", use: "sig" }], fetchedAt: T, validUntil: "2026-11-25T09:30:00.000Z" },
  offlineAuditKey: { publicKey: "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA…\n-----END PUBLIC KEY-----\n", privateKey: "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI…\n-----END PRIVATE KEY-----\n", algorithm: "Ed25519" },
  checkpointAt: 1795512600000,
  syncEndpoint: "http://localhost:3001/v1/audit/offline-sync",
  offlineExpiresAt: "2026-11-25T09:30:00.000Z"
}
const bundleSummary = {
  id: BUNDLE, agentId: AGENT, userId: PRINCIPAL, scopes: ["email:read"], offlineExpiresAt: "2026-11-25T09:30:00.000Z",
  status: "active", createdAt: T, lastSyncAt: null, auditEntryCount: 0
}

export const CONSENT_BUNDLES_DOCS = {
  create: {
    summary: "Create a consent bundle",
    description: "Called by your backend for an on-device agent: issues, in one transaction, a grant for the person (`userId`), its grant token, a JWKS snapshot to check the token offline and an Ed25519 key pair for signing audit entries offline (the private key is returned once and never stored). Hand the bundle to the device; keep the API key on your backend (the device syncs through it). `offlineTTL` `^[1-9][0-9]*[mhd]$`, at most 168h (422 `INVALID_TTL`). Emits `consent_bundle.created`. Names: the person is `userId` here (`principalId` elsewhere), and this answer says `bundleId` where the summary (list, get) says `id`: the interface fixed both.",
    request: { agentId: AGENT, userId: PRINCIPAL, scopes: ["email:read"], offlineTTL: "24h" },
    response: bundle
  },
  list: {
    summary: "List consent bundles",
    description: "Bundle summaries (never the token or key), newest first; filter by `agentId` and `status` (`expired` = active past `offlineExpiresAt`). The summary's `id` is the `bundleId` of create.",
    response: { bundles: [bundleSummary], nextCursor: null }
  },
  get: { summary: "Read a consent bundle", description: "One bundle's summary; `id` is the `bundleId` create answered.", response: bundleSummary },
  revoke: {
    summary: "Revoke a consent bundle",
    description: "Revokes the bundle and its grant: online checks fail at once; the device learns it at its next sync (`revocationStatus: \"revoked\"`), and the kit then wipes the token and key. Entries synced afterwards are still accepted (the audit is never lost). 409 `ALREADY_REVOKED`. Emits `consent_bundle.revoked` and `grant.revoked`.",
    response: { bundleId: BUNDLE, status: "revoked", revokedAt: T }
  },
  revocationStatus: {
    summary: "Revocation status of a bundle",
    description: "Cheap status check (its own rate budget) for a device or backend that polls: `active` or `revoked`.",
    response: { bundleId: BUNDLE, status: "active", revokedAt: null }
  },
  refresh: {
    summary: "Refresh a consent bundle",
    description: "New expiry (now + the bundle's TTL), new grant token, JWKS snapshot and audit key pair. Entries signed with the previous key still verify when synced later. 409 `BUNDLE_REVOKED` / `BUNDLE_EXPIRED`: create a new bundle instead.",
    response: { ...bundle, checkpointAt: 1795599000000 }
  }
} satisfies Record<string, OperationDoc>
