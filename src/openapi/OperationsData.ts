/** Summaries, descriptions and examples: consent bundles, offline sync, vault, breaches, budgets (see Document.ts). */
import type { OperationDoc } from "./Document.ts"
import { AGENT, BREACH, BUNDLE, DID, GRANT, JWT, PRINCIPAL, T } from "./Examples.ts"

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
const entry = {
  seq: 1, timestamp: T, action: "email.read", agentDID: DID, grantId: GRANT, scopes: ["email:read"], result: "success",
  metadata: { folder: "inbox" }, prevHash: "0000000000000000", hash: "3c9d5e…a1f0", signature: "8b1f…0c2e"
}
const credential = {
  id: "vcred_01JDQ9GS7T8V9W0XYZABCDEFGH", principalId: PRINCIPAL, service: "github", credentialType: "oauth2", tokenExpiresAt: "2026-11-24T17:30:00.000Z",
  metadata: { login: "octocat" }, hasRefreshToken: true, tokenEndpoint: "https://github.com/login/oauth/access_token", refreshedAt: null, createdAt: T, updatedAt: T
}
const report = { updatedDetails: null, factsCircumstancesReasons: null, mitigation: null, causeFindings: null, remedialMeasures: null }
const breach = {
  breachId: BREACH, status: "open", description: "A laptop with a customer export was stolen", nature: "Loss of device", extent: "Names and email addresses",
  occurredAt: "2026-11-23T18:00:00.000Z", awareAt: T, location: "Pune office", likelyImpact: null, affectedCount: 2, mitigation: null, detailedReport: report,
  boardInitialIntimationRequired: true, boardInitialIntimationSentAt: null, boardDetailedReportDueAt: "2026-11-27T09:30:00.000Z", boardDetailedReportSentAt: null,
  boardDetailedReportOverdue: false, boardDetailedReportLate: false, extension: null, principalIntimationRequired: true,
  principalIntimation: { due: "without_delay", intimatedCount: 0, pendingCount: 2, lastIntimatedAt: null }, createdAt: T, updatedAt: null, closedAt: null
}
const intimation = {
  intimationId: "bint_01JDQ9HT8V9W0XYZABCDEFGHJK", channel: "email", intimatedAt: T, principalCount: 2,
  contentIncluded: ["description", "likely_consequences", "mitigation", "safety_measures", "contact"], contentMissing: [], createdAt: T
}
const allocation = { id: "bdg_01JDQ9JV9W0XYZABCDEFGHJKMN", grantId: GRANT, initialBudget: 100, remainingBudget: 100, currency: "USD", createdAt: T }

export const DATA_OPERATIONS: Record<string, OperationDoc> = {
  "POST /v1/consent-bundles": {
    summary: "Create a consent bundle",
    description: "Called by your backend for an on-device agent: issues, in one transaction, a grant for the person (`userId`), its grant token, a JWKS snapshot to check the token offline and an Ed25519 key pair for signing audit entries offline (the private key is returned once and never stored). Hand the bundle to the device; keep the API key on your backend (the device syncs through it). `offlineTTL` `^[1-9][0-9]*[mhd]$`, at most 168h (422 `INVALID_TTL`). Emits `consent_bundle.created`. Names: the person is `userId` here (`principalId` elsewhere), and this answer says `bundleId` where the summary (list, get) says `id`: the interface fixed both.",
    request: { agentId: AGENT, userId: PRINCIPAL, scopes: ["email:read"], offlineTTL: "24h" },
    response: bundle
  },
  "GET /v1/consent-bundles": {
    summary: "List consent bundles",
    description: "Bundle summaries (never the token or key), newest first; filter by `agentId` and `status` (`expired` = active past `offlineExpiresAt`). The summary's `id` is the `bundleId` of create.",
    response: { bundles: [bundleSummary], nextCursor: null }
  },
  "GET /v1/consent-bundles/{id}": { summary: "Read a consent bundle", description: "One bundle's summary; `id` is the `bundleId` create answered.", response: bundleSummary },
  "POST /v1/consent-bundles/{id}/revoke": {
    summary: "Revoke a consent bundle",
    description: "Revokes the bundle and its grant: online checks fail at once; the device learns it at its next sync (`revocationStatus: \"revoked\"`), and the kit then wipes the token and key. Entries synced afterwards are still accepted (the audit is never lost). 409 `ALREADY_REVOKED`. Emits `consent_bundle.revoked` and `grant.revoked`.",
    response: { bundleId: BUNDLE, status: "revoked", revokedAt: T }
  },
  "GET /v1/consent-bundles/{id}/revocation-status": {
    summary: "Revocation status of a bundle",
    description: "Cheap status check (its own rate budget) for a device or backend that polls: `active` or `revoked`.",
    response: { bundleId: BUNDLE, status: "active", revokedAt: null }
  },
  "POST /v1/consent-bundles/{id}/refresh": {
    summary: "Refresh a consent bundle",
    description: "New expiry (now + the bundle's TTL), new grant token, JWKS snapshot and audit key pair. Entries signed with the previous key still verify when synced later. 409 `BUNDLE_REVOKED` / `BUNDLE_EXPIRED`: create a new bundle instead.",
    response: { ...bundle, checkpointAt: 1795599000000 }
  },

  "POST /v1/audit/offline-sync": {
    summary: "Upload offline audit entries",
    description: "Called by your backend, relaying what a device sends (the device never holds the API key). Each entry is checked in order: duplicate (same seq and hash: accepted again, nothing written; other hash: `DUPLICATE_SEQ`), hash (`INVALID_HASH`), signature with the bundle's key, current or previous (`INVALID_SIGNATURE`), sequence (`SEQ_GAP`) and chain (`BROKEN_CHAIN`); rejected ones are listed in `errors` and the rest are stored. Resending is safe. More than 1000 entries: 413 before any is checked. Entries of expired and revoked bundles are accepted too; `revocationStatus` tells the device to stop. The body is checked by the handler (so its codes and messages are the interface's); the schema here describes it.",
    request: { bundleId: BUNDLE, entries: [entry] },
    response: { accepted: 1, rejected: 0, revocationStatus: "active", revokedAt: null, errors: [] }
  },

  "POST /v1/vault/credentials": {
    summary: "Store a credential",
    description: "Called by your backend after the person connected a third-party account: stores the tokens encrypted (AES-256-GCM), one per person (`principalId`) and service (storing again replaces it). With `refreshToken`, `tokenEndpoint` and client credentials the service refreshes an expired token at exchange. The answer never carries a token or secret.",
    request: { principalId: PRINCIPAL, service: "github", accessToken: "gho_16C7e42F292c6912E7710c838347Ae178B4a", refreshToken: "ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498", tokenExpiresAt: "2026-11-24T17:30:00Z", tokenEndpoint: "https://github.com/login/oauth/access_token", clientId: "Iv1.8a61f9b3a7aba766", clientSecret: "1a2b3c…", metadata: { login: "octocat" } },
    response: credential
  },
  "GET /v1/vault/credentials": { summary: "List credentials", description: "Stored credentials (no tokens); filter by `principalId`, `service`; page with `cursor` / `limit`.", response: { credentials: [credential], nextCursor: null } },
  "POST /v1/vault/credentials/exchange": {
    summary: "Exchange a grant token for a credential",
    description: "Called by the agent with its grant token as the bearer (not the API key). The grant must be active online (revoked grant or bundle: 401). Checks in this order: token (401), `service` present (400), scope (403, the message lists the accepted forms), credential stored (404). Accepted scopes for service `{service}`: `{service}:read`, `{service}:credentials:read`, `{service}:*`, `vault:{service}:read`, `vault:{service}:*`, `vault:credentials:exchange`, `*`. An expired token with a refresh token is refreshed first (502 when the provider refuses). Emits `vault.credential.exchanged`. The vault names the person `principalId`, as grants do.",
    request: { service: "github" },
    response: { accessToken: "gho_16C7e42F292c6912E7710c838347Ae178B4a", service: "github", credentialType: "oauth2", tokenExpiresAt: "2026-11-24T17:30:00.000Z", metadata: { login: "octocat" } }
  },
  "GET /v1/vault/credentials/{id}": { summary: "Read a credential", description: "One credential's metadata (no tokens).", response: credential },
  "DELETE /v1/vault/credentials/{id}": { summary: "Delete a credential", description: "Deletes the stored tokens; later exchanges for that person and service answer 404." },

  "POST /v1/dpdp/breaches": {
    summary: "Record a breach",
    description: "Records a personal data breach; the Board's detailed report is due 72 hours after `awareAt` (default now). Give the affected principals' ids (`affectedDataPrincipalIds`, up to 10,000; never echoed in events or lists) or only `affectedCount`. Emits `dpdp.breach.recorded` and `dpdp.breach.principal_intimation_due` (ids and times only, no breach text). The service notifies no one. Unknown fields answer 400: the body is checked by the handler, the schema here describes it. This resource's id is `breachId`.",
    request: { description: "A laptop with a customer export was stolen", nature: "Loss of device", extent: "Names and email addresses", occurredAt: "2026-11-23T18:00:00Z", location: "Pune office", affectedDataPrincipalIds: ["user_42", "user_43"] },
    response: { ...breach, affectedDataPrincipalIds: ["user_42", "user_43"], principalIntimations: [] }
  },
  "GET /v1/dpdp/breaches": { summary: "List breaches", description: "Newest first, without principal ids; filter by `status`; page with `cursor` / `limit`. `boardDetailedReportOverdue` is computed now.", response: { breaches: [breach], nextCursor: null } },
  "GET /v1/dpdp/breaches/{breachId}": { summary: "Read a breach", description: "One breach with its principal intimations (newest first, at most 200).", response: { ...breach, affectedDataPrincipalIds: ["user_42", "user_43"], principalIntimations: [intimation] } },
  "PATCH /v1/dpdp/breaches/{breachId}": {
    summary: "Update a breach",
    description: "Moves the status one step (open → initial_intimated → reported → closed; anything else 409 `INVALID_TRANSITION`), fills the detailed report (all five fields are needed to reach `reported`: 400 `REPORT_INCOMPLETE`), records when the Board was told, or an extension (a granted `newDueAt` moves the deadline). A closed breach refuses every update (409 `BREACH_CLOSED`). A status change emits `dpdp.breach.updated { breachId, status, previousStatus }`. The body is checked by the handler; the schema here describes it.",
    request: { status: "initial_intimated", boardInitialIntimationSentAt: "2026-11-24T11:00:00Z" },
    response: { ...breach, status: "initial_intimated", boardInitialIntimationSentAt: "2026-11-24T11:00:00.000Z", affectedDataPrincipalIds: ["user_42", "user_43"], updatedAt: T }
  },
  "POST /v1/dpdp/breaches/{breachId}/principal-intimations": {
    summary: "Record principals intimated",
    description: "Records that you told these data principals, by which channel and with which of the five required content items (`contentMissing` lists the ones left out). When the breach listed ids, each intimated id must be one of them. The body is checked by the handler; the schema here describes it.",
    request: { dataPrincipalIds: ["user_42", "user_43"], channel: "email", contentIncluded: ["description", "likely_consequences", "mitigation", "safety_measures", "contact"] },
    response: { breachId: BREACH, ...intimation, principalIntimation: { due: "without_delay", intimatedCount: 2, pendingCount: 0, lastIntimatedAt: T } }
  },

  "POST /v1/budget/allocate": {
    summary: "Allocate a budget to a grant",
    description: "One budget per grant (409 `CONFLICT` for a second). Amounts are JSON numbers with at most 4 decimals. The allocation's `id` is its own; the other budget calls take the `grantId`.",
    request: { grantId: GRANT, initialBudget: 100, currency: "USD" },
    response: allocation
  },
  "POST /v1/budget/debit": {
    summary: "Debit a budget",
    description: "Called by your backend before the agent spends: atomic under concurrency, never below zero (402 `INSUFFICIENT_BUDGET`, nothing debited); 409 `GRANT_NOT_ACTIVE` once the grant is revoked or expired. Emits `budget.threshold` when spending crosses 50 % or 80 % and `budget.exhausted` at zero.",
    request: { grantId: GRANT, amount: 12.5, description: "Flight search API", metadata: { provider: "skyscanner" } },
    response: { remaining: 87.5, transactionId: "btx_01JDQ9KW0XYZABCDEFGHJKMNPQ", grantId: GRANT }
  },
  "GET /v1/budget/balance/{grantId}": { summary: "Budget balance", description: "Initial, remaining and spent amounts of a grant's budget.", response: { ...allocation, remainingBudget: 87.5, spent: 12.5, updatedAt: T } },
  "GET /v1/budget/transactions/{grantId}": {
    summary: "Budget transactions",
    description: "A grant's debits, newest first; page with `cursor` / `limit`.",
    response: { transactions: [{ id: "btx_01JDQ9KW0XYZABCDEFGHJKMNPQ", grantId: GRANT, amount: 12.5, remaining: 87.5, description: "Flight search API", metadata: { provider: "skyscanner" }, createdAt: T }], nextCursor: null }
  }
}
