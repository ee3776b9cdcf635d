/** Summaries, descriptions and examples of the DPDP notices, consent records and grievances (decisions §21). */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { T } from "../platform/DocExamples.ts"

const NOTICE = "notice_01JDQ97G8H9J0K1M2N3P4Q5R6S"
const RECORD = "crec_01JDQ9HT8V9W0XYZABCDEFGHJK"
const GRANT = "grnt_01JDQ8ZK2M3N4P5Q6R7S8T9V0W"
const GRIEVANCE = "grv_01JDQ9M2N3P4Q5R6S7T8V9W0XY"
const purposes = [{ code: "calendar-sync", description: "Read your calendar to schedule meetings" }]
const notice = {
  id: NOTICE, noticeId: "privacy-notice", version: "2026-11", language: "en", title: "How we use your data",
  contentHash: "9f2c…", noticeDigest: "41ab…", purposes, dataItems: ["calendar events", "email address"],
  dataFiduciaryContact: "privacy@example.com", grievanceOfficer: { name: "A. Rao", email: "grievance@example.com" },
  withdrawalUrl: "https://example.com/consent", rightsUrl: "https://example.com/rights", boardComplaintUrl: null,
  completeness: { rule3: false, missing: ["boardComplaint"] }, retiredAt: null, createdAt: T
}
const record = {
  recordId: RECORD, grantId: GRANT, grantIds: [GRANT], grantStatus: "active", dataPrincipalId: "user_42", dataFiduciaryName: "Acme",
  purposes, scopes: ["calendar:read"], consentNoticeId: "privacy-notice", consentNoticeVersion: "2026-11", language: "en",
  consentNoticeHash: "9f2c…", noticeDigest: "41ab…", consentMethod: "developer-attested", consentManagerRef: null, principalType: "adult",
  authRequestId: null, consentProof: { type: "Ed25519Signature2020", proofJwt: "eyJhbGciOiJFZERTQSIs…", signedAt: T }, status: "active",
  consentGivenAt: T, processingExpiresAt: "2027-11-24T09:30:00.000Z", retentionUntil: "2034-11-22T09:30:00.000Z", accessCount: 0,
  lastAccessedAt: null, withdrawnAt: null, withdrawnReason: null, withdrawnBy: null, createdAt: T
}
const grievance = {
  grievanceId: GRIEVANCE, referenceNumber: "GRV-2026-01JDQ9M2N3P4Q5R6S7T8V9W0XY", dataPrincipalId: "user_42", recordId: RECORD,
  type: "consent-violation", description: "My data was used after I withdrew", evidence: null, status: "submitted", outcome: null,
  resolution: null, expectedResolutionBy: "2026-12-01T09:30:00.000Z", statutoryDueAt: "2027-02-22T09:30:00.000Z", resolvedAt: null,
  updatedAt: null, createdAt: T
}

export const DPDP_NOTICES_DOCS = {
  register: {
    summary: "Register a consent notice version",
    description: "Stores one immutable version of a notice in one language (key: noticeId, version, language; a repeat answers 409 `CONFLICT`). `noticeId` is optional: without it the new `notice_` id is the noticeId. `contentHash` is the SHA-256 hex of `content` (a given one must match, else 400); `noticeDigest` covers every field shown. `completeness.missing` lists what DPDP Rule 3 asks that the notice lacks (`dataItems`, `purposes`, `withdrawal`, `rights`, `boardComplaint`, `contact`). Emits `dpdp.consent_notice.registered`.",
    request: { noticeId: "privacy-notice", version: "2026-11", title: "How we use your data", content: "We read your calendar…", purposes, dataItems: ["calendar events", "email address"], dataFiduciaryContact: "privacy@example.com", withdrawalUrl: "https://example.com/consent", rightsUrl: "https://example.com/rights" },
    response: notice
  },
  list: { summary: "List notices", description: "The newest version of each notice (any language), newest first; page with `cursor` / `limit` (default 50, at most 100).", response: { notices: [notice], nextCursor: null } },
  versions: { summary: "A notice's versions", description: "Every version and language of one notice, newest first, without the full text.", response: { noticeId: "privacy-notice", versions: [notice] } },
  version: { summary: "Read a notice version", description: "One version with its full `content`; `language` picks the variant (default: English when present, else the first registered).", response: { ...notice, content: "We read your calendar…" } },
  retire: {
    summary: "Retire a notice version",
    description: "Stops new consent records from binding to this version (all its languages): they answer 409 `NOTICE_RETIRED`. Existing records keep it. Idempotent: a repeat answers the first retirement time and emits nothing. Emits `dpdp.consent_notice.retired`.",
    response: { noticeId: "privacy-notice", version: "2026-11", languages: ["en", "hi"], retiredAt: T }
  }
} satisfies Record<string, OperationDoc>

export const DPDP_RECORDS_DOCS = {
  create: {
    summary: "Record a consent",
    description: "Records the data principal's consent to an active grant of yours (unknown or another developer's grant: 400 `INVALID_GRANT`; revoked or expired: 409 `GRANT_NOT_ACTIVE`), bound to the newest unretired version of `consentNoticeId` in `language` (default `en`), or to `consentNoticeVersion`, or to the version whose `contentHash` is `consentNoticeHash` (no match: 422 `NOTICE_HASH_MISMATCH`; no notice: 400 `INVALID_NOTICE`; retired: 409 `NOTICE_RETIRED`). Every purpose code must be one of the notice's. `consentProof.proofJwt` is always an EdDSA JWS by the service's credential key (its `kid` is in `/.well-known/did.json`) over the record id, grants, principal, notice digest, purposes, scopes, method and time. `retentionUntil` = `processingExpiresAt` + 7 years. A `child` or `guardian_of_pwd` principal needs `guardianVerification` (422 `VERIFIABLE_CONSENT_REQUIRED`). Emits `dpdp.consent.created`.",
    request: { grantId: GRANT, dataPrincipalId: "user_42", purposes, consentNoticeId: "privacy-notice", processingExpiresAt: "2027-11-24T09:30:00Z" },
    response: record
  },
  list: { summary: "List consent records", description: "Newest first, 100 a page (at most 100); filter by `dataPrincipalId`, `grantId` (any covered grant) or `status` (`expired` is an active record past `processingExpiresAt`). `totalRecords` is the page's length, as published; page on with `nextCursor`.", response: { records: [record], totalRecords: 1, nextCursor: null } },
  get: { summary: "Read a consent record", description: "One record; each read counts in `accessCount` (as published). Another developer's id answers 404 like an unknown one.", response: { ...record, accessCount: 1, lastAccessedAt: T } },
  withdraw: {
    summary: "Withdraw a consent",
    description: "Withdraws the record and, unless `revokeGrant` is explicitly false, revokes every grant it covers in the same transaction through the one revocation path (delegated grants, consent bundles, credential status bits, `grant.revoked`); `revokedGrantIds` names them, `grantsLeftActive` the grants kept. A record already withdrawn or erased answers 409 `ALREADY_WITHDRAWN`. With your `strictWithdrawal` setting on, the grants are revoked even then (`grantRevoked: true`). `deleteProcessedData: true` erases, in the same transaction, what was processed under the covered grants and their delegated grants: their audit entries' metadata (the chain still verifies on its digests), their bundles' offline entries' metadata, budget transactions' descriptions and metadata; principal ids are kept; answered `dataDeletion: \"completed\"`. Emits `dpdp.consent.withdrawn` (without the reason).",
    request: { reason: "The user withdrew consent in the app" },
    response: { recordId: RECORD, status: "withdrawn", withdrawnAt: T, grantRevoked: true, dataDeleted: false, revokedGrantIds: [GRANT], grantsLeftActive: [], dataDeletion: null }
  },
  principalRecords: {
    summary: "A data principal's records",
    description: "Every consent record of one data principal (100 a page, `nextCursor`); `totalRecords` and `totalCount` are the principal's full count. An unknown principal answers an empty list. `summary` (ours, the right of access) is what the service holds about them: grants by state, the agents that held one (delegated ones too, at most 100), the scopes granted, their audit entries (count, first, last), vault services (names only), passkeys, consent bundles and grievances. Counts an access of each returned record and appends `service.dpdp.records_accessed` to the audit chain.",
    response: {
      dataPrincipalId: "user_42", records: [record], totalRecords: 1, totalCount: 1, nextCursor: null,
      summary: {
        grants: { active: 1, revoked: 0, expired: 0 }, agents: [{ agentId: "ag_01JDQ9A1B2C3D4E5F6G7H8J9KM", name: "Mail helper", did: "did:service:ag_01JDQ9A1B2C3D4E5F6G7H8J9KM" }],
        scopes: ["calendar:read"], auditEntries: { count: 4, first: T, last: T }, vaultServices: ["google"], passkeys: 1, consentBundles: 0,
        grievances: [], nomination: null, erasures: []
      }
    }
  },
  setNomination: {
    summary: "Set a data principal's nominee",
    description: "Ours (DPDP Act s.14): names the person who may exercise the data principal's rights on their death or incapacity; a second call replaces the nominee. `nomineePrincipalId` 1–256 characters, another person than the principal; `effectiveOn` `death_or_incapacity`; other fields 400. Shown in the access summary. You authenticate the nominee and act for them with this API. Emits `dpdp.nomination.updated` and writes `service.dpdp.nomination_changed` to your audit chain.",
    request: { nomineePrincipalId: "user_43", effectiveOn: "death_or_incapacity" },
    response: { nominationId: "nom_01JDQ9NM0ABCDEFGHJKMNPQRST", dataPrincipalId: "user_42", nomineePrincipalId: "user_43", effectiveOn: "death_or_incapacity", createdAt: T, updatedAt: T }
  },
  removeNomination: {
    summary: "Remove a data principal's nominee",
    description: "Removes the nomination (204); 404 when the principal has none. Emits `dpdp.nomination.updated` (`change: \"removed\"`)."
  },
  settings: {
    summary: "Read your DPDP settings",
    description: "Ours: `grievanceResponseDays` (the grievance target, default 7), `erasureLogHoldDays` (the sealed one-year log hold of erased entries, default 365; 0 none), `consentRecordRetentionDays` (records are kept this long past `processingExpiresAt`, default 2,555 = 7 years), `defaultConsentNoticeId` (the notice an authorization request names when it names none), `strictWithdrawal` (a withdrawal always revokes the covered grants, even with `revokeGrant: false`), `requireCompleteNotices` (a notice lacking what Rule 3 asks is refused 422 `NOTICE_INCOMPLETE`), `withdrawalUrl`, `boardComplaintUrl`.",
    response: { grievanceResponseDays: 7, erasureLogHoldDays: 365, consentRecordRetentionDays: 2555, defaultConsentNoticeId: null, strictWithdrawal: false, requireCompleteNotices: false, withdrawalUrl: null, boardComplaintUrl: null }
  },
  updateSettings: {
    summary: "Change your DPDP settings",
    description: "Changes the fields given (see the read): `grievanceResponseDays` 1–90, `erasureLogHoldDays` 0–3,650, `consentRecordRetentionDays` 30–3,650, URLs https or null, `defaultConsentNoticeId` one of your notices (400 `INVALID_NOTICE`) or null; unknown fields 400. Writes `service.dpdp.settings_changed` naming the changed fields. Answers the settings.",
    request: { grievanceResponseDays: 10, strictWithdrawal: true },
    response: { grievanceResponseDays: 10, erasureLogHoldDays: 365, consentRecordRetentionDays: 2555, defaultConsentNoticeId: null, strictWithdrawal: true, requireCompleteNotices: false, withdrawalUrl: null, boardComplaintUrl: null }
  },
  erase: {
    summary: "Erase a data principal",
    description: "DPDP Act s.12. In one transaction: the principal's pending consent requests are denied, every active grant (theirs and those their records cover) is revoked through the usual revocation (cascade, bundles, `grant.revoked`, credential status), their consent records become `erased`, vault credentials, passkeys, sessions, SSO links and nominations are deleted, and every other stored trace of the id (grants, requests, bundles, records, grievances, policies, alerts, breaches, directory users, stored events, audit entries) is replaced by the pseudonym `prn_…`. Audit entries keep verifying (`GET /v1/audit/verify`): their salted digests stay, their salt goes. What the one-year log duty (Rule 8(3)) keeps is sealed until `heldUntil`. A repeat answers 200 with the same `requestId`; 404 only when nothing is held for the id. `scheduledFor` (48 hours to 3 years ahead, Rule 8(2)) answers `status: \"scheduled\"`, emits `dpdp.erasure.scheduled` at once and `dpdp.erasure.due` 48 hours before; it runs at that time. Emits `dpdp.erasure.completed` (naming the pseudonym).",
    request: { dataPrincipalId: "user_42", reason: "principal_request" },
    response: {
      requestId: "ER-2026-01JDQ9QZ1ABCDEFGHJKMNPQRST", dataPrincipalId: "user_42", status: "completed", recordsErased: 1, grantsRevoked: 1,
      submittedAt: T, expectedCompletionBy: "2026-12-01T09:30:00.000Z", scheduledFor: null, completedAt: T, heldUntil: "2027-11-24T09:30:00.000Z",
      pseudonym: "prn_8M2K4Q7T1V9X3Z5B6C0D2F4G6H", counts: { grantsRevoked: 1, recordsErased: 1, auditEntries: 3, deleted: { vault_credentials: 1 } }
    }
  },
  cancelErasure: {
    summary: "Cancel a scheduled erasure",
    description: "Cancels an erasure still `scheduled` (the person came back): 204; 404 when there is none with that `requestId` or it already ran."
  }
} satisfies Record<string, OperationDoc>

export const DPDP_GRIEVANCES_DOCS = {
  file: {
    summary: "File a grievance",
    description: "Files a data principal's grievance: 202 with a `GRV-<year>-<ULID>` reference, `expectedResolutionBy` 7 days ahead and `statutoryDueAt` 90 days ahead (the outer limit). `recordId`, when given, must be your record for the same principal (400 `INVALID_RECORD`). At most 100 open grievances per principal (409 `TOO_MANY_OPEN_GRIEVANCES`). Emits `dpdp.grievance.filed` (no description or evidence).",
    request: { dataPrincipalId: "user_42", type: "consent-violation", description: "My data was used after I withdrew", recordId: RECORD },
    response: { grievanceId: GRIEVANCE, referenceNumber: grievance.referenceNumber, type: "consent-violation", status: "submitted", expectedResolutionBy: grievance.expectedResolutionBy, statutoryDueAt: grievance.statutoryDueAt, createdAt: T }
  },
  list: { summary: "List grievances", description: "Newest first; filter by `status`, `dataPrincipalId`, `overdue=true` (open and past `statutoryDueAt`); page with `cursor` / `limit`.", response: { grievances: [grievance], nextCursor: null } },
  get: { summary: "Read a grievance", description: "One grievance with its `history` of statuses.", response: { ...grievance, history: [{ status: "submitted", at: T }] } },
  update: {
    summary: "Move a grievance",
    description: "submitted → under_review → resolved; `escalated` (the person went to the Board) from any open state or from resolved. `resolved` needs `resolution` and `outcome` (`upheld`, `partially_upheld`, `rejected`); any other move answers 409 `INVALID_TRANSITION`. Emits `dpdp.grievance.updated`.",
    request: { status: "resolved", resolution: "Processing stopped and the data deleted", outcome: "upheld" },
    response: { ...grievance, status: "resolved", outcome: "upheld", resolution: "Processing stopped and the data deleted", resolvedAt: T, updatedAt: T, history: [{ status: "submitted", at: T }, { status: "under_review", at: T }, { status: "resolved", at: T }] }
  }
} satisfies Record<string, OperationDoc>
