/**
 * Automatic consent records (decisions §21, ours). `POST /v1/authorize` may name a notice
 * (`consentNoticeId`, `consentNoticeVersion`, `purposes`, or the developer's `defaultConsentNoticeId`
 * setting): the version is pinned on the request at authorize time. When a person approves it
 * (`consent`, `sso` or `passkey`), the approval's own transaction (the §20 gate's) also writes the
 * record, its proof, its audit entry and `dpdp.consent.created`: the grant and its record commit or
 * roll back together. Policy, developer and sandbox approvals make no record (nobody consented).
 *
 * Below authorization in src/Server.ts (authorization calls it); it needs only the chain, events and
 * the §18 key.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { VcKeys } from "../credentials/Keys.ts"
import type { ApprovalMethod } from "../grants/Record.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { BadRequest } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { type InvalidNotice, type NoticeHashMismatch, type NoticeRetired, VerifiableConsentRequired } from "./Errors.ts"
import { makeNotices, type NoticeRow } from "./Notices.ts"
import { guardian, PRINCIPAL_TYPES, retentionUntil } from "./RecordInput.ts"
import { writeRecord } from "./RecordWrite.ts"
import { readSettings } from "./SettingsRead.ts"
import { validated } from "./Validate.ts"

/** what authorize takes to name a notice */
export interface NoticeRequest {
  readonly consentNoticeId?: string | undefined
  readonly consentNoticeVersion?: string | undefined
  readonly purposes?: ReadonlyArray<string> | undefined
  readonly language?: string | undefined
  readonly principalType?: string | undefined
  readonly guardianVerification?: unknown
}

/** what the request row keeps (auth_requests.dpdp_consent) */
export interface NoticeBinding {
  readonly noticeRowId: string
  readonly purposes: ReadonlyArray<string>
  readonly principalType: string
  readonly guardianVerification: unknown
}

/**
 * The pinned notice as the consent page shows it (decisions §21: language choice among the
 * version's variants, the purposes asked for, data items, how to withdraw, grievance contact, the
 * Board complaint link).
 */
export interface PageNotice {
  readonly noticeId: string
  readonly version: string
  readonly language: string
  /** every language this version has, the shown one included */
  readonly languages: ReadonlyArray<string>
  readonly title: string
  readonly content: string
  readonly purposes: NoticeRow["purposes"]
  readonly dataItems: ReadonlyArray<string>
  readonly dataFiduciaryContact: string | null
  readonly grievanceOfficer: NoticeRow["grievanceOfficer"]
  readonly withdrawalUrl: string | null
  readonly rightsUrl: string | null
  readonly boardComplaintUrl: string | null
}

export interface ApprovedGrant {
  readonly requestId: string
  /** the notice pinned at authorize (`bind`), read with the request under its lock; null when none */
  readonly binding: NoticeBinding | null
  /** the language the person read the notice in on the consent page, when they chose another variant */
  readonly language?: string | undefined
  readonly developerId: string
  readonly grantId: string
  readonly principalId: string
  readonly scopes: ReadonlyArray<string>
  readonly expiresAt: Date
  readonly approvalMethod: ApprovalMethod
}

export type BindRefusal = BadRequest | InvalidNotice | NoticeRetired | NoticeHashMismatch | VerifiableConsentRequired

export interface DpdpApprovalService {
  /** authorize: the notice version the request is pinned to (null: no notice named, nothing changes) */
  readonly bind: (developerId: string, input: NoticeRequest) => Effect.Effect<NoticeBinding | null, BindRefusal>
  /** in the approval's transaction, after the grant was made: the record when a person approved a request naming a notice */
  readonly recordApproval: (grant: ApprovedGrant) => Effect.Effect<string | null>
  /**
   * decisions §21: a bundle that consumed an approved request (§12) is covered by the request's
   * record too, so withdrawing it revokes the bundle's grant; in the bundle's transaction
   */
  readonly coverConsumedApproval: (developerId: string, authRequestId: string, grantId: string) => Effect.Effect<void>
  /** the consent page's notice: the pinned version, in `language` when it has that variant */
  readonly noticeForPage: (developerId: string, binding: NoticeBinding, language: string | undefined) => Effect.Effect<PageNotice | null>
}

export class DpdpApproval extends Context.Tag("agent-auth/DpdpApproval")<DpdpApproval, DpdpApprovalService>() {}

/**
 * The variant in `language` when the version has one that holds every purpose asked for (the
 * person chose it on the consent page), else the variant pinned at authorize.
 */
const chooseVariant = (variants: ReadonlyArray<NoticeRow>, binding: NoticeBinding, language: string | undefined) => {
  const chosen = language === undefined ? undefined : variants.find((v) => v.language === language)
  if (chosen !== undefined && binding.purposes.every((code) => chosen.purposes.some((p) => p.code === code))) return chosen
  return variants.find((v) => v.id === binding.noticeRowId)
}

/** who consented, and how (decisions §21: only a person's approval makes a record) */
const CONSENT_METHOD: Partial<Record<ApprovalMethod, string>> = { consent: "explicit-click", sso: "sso", passkey: "passkey" }

export const DpdpApprovalLive = Layer.effect(
  DpdpApproval,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const audit = yield* AuditChain
    const events = yield* Events
    const keys = yield* VcKeys
    const notices = yield* makeNotices

    const bind: DpdpApprovalService["bind"] = (developerId, input) =>
      Effect.gen(function*() {
        const noticeId = input.consentNoticeId ?? (yield* readSettings(sql, developerId)).defaultConsentNoticeId ?? undefined
        if (noticeId === undefined) return null
        const principalType = input.principalType ?? "adult"
        if (!(PRINCIPAL_TYPES as ReadonlyArray<string>).includes(principalType)) {
          return yield* Effect.fail(new BadRequest({
            message: `principalType must be one of ${PRINCIPAL_TYPES.join(", ")}`,
            details: [{ path: "principalType", message: `one of ${PRINCIPAL_TYPES.join(", ")}` }]
          }))
        }
        const ms = yield* nowMillis
        const verification = yield* validated(() => guardian(input.guardianVerification, ms))
        if (principalType !== "adult" && verification === null) {
          return yield* Effect.fail(new VerifiableConsentRequired({
            message: `A ${principalType} principal needs guardianVerification { method, reference, verifiedAt } (DPDP Rules 10 and 11)`
          }))
        }
        const notice = yield* notices.choose(developerId, { noticeId, version: input.consentNoticeVersion, language: input.language ?? "en" })
        const known = notice.purposes.map((p) => p.code)
        const chosen = input.purposes === undefined ? known : [...new Set(input.purposes)]
        const unknown = chosen.filter((c) => !known.includes(c))
        if (unknown.length > 0 || chosen.length === 0) {
          return yield* Effect.fail(new BadRequest({
            message: unknown.length > 0 ? `purposes not in notice ${notice.noticeId} version ${notice.version}: ${unknown.join(", ")}` : "purposes must not be empty",
            details: [{ path: "purposes", message: unknown.length > 0 ? `unknown codes: ${unknown.join(", ")}` : "at least one code" }]
          }))
        }
        return { noticeRowId: notice.id, purposes: chosen, principalType, guardianVerification: verification }
      })

    const recordApproval: DpdpApprovalService["recordApproval"] = (grant) =>
      Effect.gen(function*() {
        const method = CONSENT_METHOD[grant.approvalMethod]
        if (method === undefined) return null
        const binding = grant.binding
        if (binding === null) return null
        // pinned at authorize: the version shown, even if retired since, in the language the person read
        const notice = chooseVariant(yield* variantsOf(grant.developerId, binding), binding, grant.language)
        if (notice === undefined) return null
        const ms = yield* nowMillis
        const recordId = newId("crec", ms)
        const days = (yield* readSettings(sql, grant.developerId)).consentRecordRetentionDays
        yield* writeRecord({ sql, keys, audit, events }, {
          recordId, developerId: grant.developerId, grantId: grant.grantId, grantPrincipalId: grant.principalId,
          dataPrincipalId: grant.principalId, scopes: grant.scopes, notice,
          purposes: notice.purposes.filter((p) => binding.purposes.includes(p.code)), consentMethod: method, consentManagerRef: null,
          principalType: binding.principalType, guardianVerification: binding.guardianVerification, authRequestId: grant.requestId,
          consentGivenAt: new Date(ms), processingExpiresAt: grant.expiresAt, retentionUntil: retentionUntil(grant.expiresAt, days),
          automatic: true, nowMs: ms
        })
        return recordId
      }).pipe(Effect.orDie)

    const noticeForPage: DpdpApprovalService["noticeForPage"] = (developerId, binding, language) =>
      Effect.map(variantsOf(developerId, binding), (variants): PageNotice | null => {
        const shown = chooseVariant(variants, binding, language)
        if (shown === undefined) return null
        return {
          noticeId: shown.noticeId, version: shown.version, language: shown.language, languages: variants.map((v) => v.language).sort(),
          title: shown.title, content: shown.content, purposes: shown.purposes.filter((p) => binding.purposes.includes(p.code)),
          dataItems: shown.dataItems, dataFiduciaryContact: shown.dataFiduciaryContact, grievanceOfficer: shown.grievanceOfficer,
          withdrawalUrl: shown.withdrawalUrl, rightsUrl: shown.rightsUrl, boardComplaintUrl: shown.boardComplaintUrl
        }
      }).pipe(Effect.orDie)

    /** every language variant of the pinned notice version (one read) */
    const variantsOf = (developerId: string, binding: NoticeBinding) =>
      sql.unsafe<NoticeRow>(
        `SELECT v.id, v.notice_id, v.version, v.language, v.title, v.content, v.content_hash, v.notice_digest, v.purposes, v.data_items,
           v.data_fiduciary_contact, v.grievance_officer, v.withdrawal_url, v.rights_url, v.board_complaint_url, v.missing, v.retired_at, v.created_at
         FROM dpdp_consent_notices p
         JOIN dpdp_consent_notices v ON v.developer_id = p.developer_id AND v.notice_id = p.notice_id AND v.version = p.version
         WHERE p.id = $1 AND p.developer_id = $2`,
        [binding.noticeRowId, developerId]
      )

    const coverConsumedApproval: DpdpApprovalService["coverConsumedApproval"] = (developerId, authRequestId, grantId) =>
      sql`INSERT INTO dpdp_consent_record_grants (record_id, grant_id)
          SELECT id, ${grantId} FROM dpdp_consent_records
          WHERE developer_id = ${developerId} AND auth_request_id = ${authRequestId} AND status = 'active'`.pipe(Effect.asVoid, Effect.orDie)

    return { bind, recordApproval, noticeForPage, coverConsumedApproval }
  })
)
