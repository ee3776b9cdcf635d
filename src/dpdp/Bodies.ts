/**
 * The DPDP request bodies for the OpenAPI document only (openapi/Document.ts's hand-read table): the
 * services check them by hand (Validate.ts, RecordInput.ts), so the platform must not decode them.
 */
import { Schema } from "effect"

const Text = (max: number) => Schema.String.pipe(Schema.minLength(1), Schema.maxLength(max))
const Instant = Schema.String.annotations({ description: "ISO 8601 date-time with `Z` or an offset, with or without milliseconds" })
const Purpose = Schema.Struct({
  code: Schema.optional(Text(64).annotations({ description: "A-Z a-z 0-9 . _ : -; unique in the notice" })),
  purposeId: Schema.optional(Text(64).annotations({ description: "@grantex/dpdp's name for code" })),
  description: Schema.optional(Schema.String.pipe(Schema.maxLength(1000))),
  name: Schema.optional(Text(200)),
  legalBasis: Schema.optional(Text(200)),
  dataCategories: Schema.optional(Schema.Array(Text(200)).pipe(Schema.maxItems(50))),
  retentionPeriod: Schema.optional(Text(200)),
  thirdPartySharing: Schema.optional(Schema.Boolean)
})
const Purposes = Schema.Array(Purpose).pipe(Schema.minItems(1), Schema.maxItems(50))
const Https = Schema.String.annotations({ description: "an https URL" })

export const NoticeBody = Schema.Struct({
  noticeId: Schema.optional(Text(100).annotations({ description: "A-Z a-z 0-9 . _ : -; absent: the new notice_ id" })),
  version: Text(32),
  language: Schema.optional(Text(35).annotations({ description: "BCP 47 tag, default en" })),
  title: Text(200),
  content: Schema.String.pipe(Schema.minLength(1)).annotations({ description: "at most 64 KiB" }),
  contentHash: Schema.optional(Schema.String.annotations({ description: "when given, must be the SHA-256 hex of content" })),
  purposes: Purposes,
  dataItems: Schema.optional(Schema.Array(Text(200)).pipe(Schema.maxItems(200))),
  dataFiduciaryContact: Schema.optional(Text(500)),
  grievanceOfficer: Schema.optional(Schema.Struct({ name: Text(200), email: Text(320), phone: Schema.optional(Text(50)) })),
  withdrawalUrl: Schema.optional(Https),
  rightsUrl: Schema.optional(Https),
  boardComplaintUrl: Schema.optional(Https)
})

export const RecordBody = Schema.Struct({
  grantId: Text(100),
  dataPrincipalId: Text(256),
  purposes: Purposes,
  consentNoticeId: Text(100).annotations({ description: "the noticeId (or the notice_ id)" }),
  processingExpiresAt: Instant.annotations({ description: "after now, at most 10 years ahead" }),
  language: Schema.optional(Text(35)),
  consentNoticeVersion: Schema.optional(Text(32)),
  consentNoticeHash: Schema.optional(Schema.String.annotations({ description: "binds the version whose contentHash it is (422 NOTICE_HASH_MISMATCH)" })),
  consentMethod: Schema.optional(Schema.Literal("explicit-click", "consent_manager", "written", "verbal", "developer-attested")),
  consentGivenAt: Schema.optional(Instant.annotations({ description: "at most 24 hours in the past; default now" })),
  consentManagerRef: Schema.optional(Text(200)),
  principalType: Schema.optional(Schema.Literal("adult", "child", "guardian_of_pwd")),
  guardianVerification: Schema.optional(Schema.Struct({
    method: Schema.Literal("reliable_details", "voluntary_details", "virtual_token", "digital_locker"),
    reference: Text(200),
    verifiedAt: Instant
  }))
}).annotations({ description: "Fields @grantex/dpdp computes itself (scopes, retentionUntil, consentProof, dataFiduciaryId/Name, dataPrincipalDID) are accepted and ignored." })

export const WithdrawBody = Schema.Struct({
  reason: Text(1000),
  revokeGrant: Schema.optional(Schema.Boolean.annotations({ description: "default true; only an explicit false keeps the grants" })),
  deleteProcessedData: Schema.optional(Schema.Boolean)
})

export const GrievanceBody = Schema.Struct({
  dataPrincipalId: Text(256),
  type: Text(64).annotations({ description: "a-z 0-9 _ -, e.g. consent-violation, data-breach" }),
  description: Text(5000),
  recordId: Schema.optional(Text(100)),
  evidence: Schema.optional(Schema.Unknown.annotations({ description: "any JSON, at most 16 KiB" }))
})

export const GrievanceUpdateBody = Schema.Struct({
  status: Schema.Literal("under_review", "resolved", "escalated"),
  resolution: Schema.optional(Text(5000).annotations({ description: "required to resolve" })),
  outcome: Schema.optional(Schema.Literal("upheld", "partially_upheld", "rejected").annotations({ description: "required to resolve" })),
  note: Schema.optional(Text(1000))
}).annotations({ description: "Unknown fields are refused (400 BAD_REQUEST)." })

export const NominationBody = Schema.Struct({
  nomineePrincipalId: Text(256).annotations({ description: "your id for the nominee: another person than the data principal" }),
  effectiveOn: Schema.Literal("death_or_incapacity")
}).annotations({ description: "Unknown fields are refused (400 BAD_REQUEST)." })

export const SettingsBody = Schema.Struct({
  grievanceResponseDays: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, 90))),
  erasureLogHoldDays: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(0, 3650))),
  consentRecordRetentionDays: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(30, 3650))),
  defaultConsentNoticeId: Schema.optional(Schema.NullOr(Text(100))),
  strictWithdrawal: Schema.optional(Schema.Boolean),
  requireCompleteNotices: Schema.optional(Schema.Boolean),
  withdrawalUrl: Schema.optional(Schema.NullOr(Https)),
  boardComplaintUrl: Schema.optional(Schema.NullOr(Https))
}).annotations({ description: "Only the fields given change; unknown fields are refused (400 BAD_REQUEST)." })
