/**
 * Writes one consent record (decisions §21) in the caller's transaction: its signed proof (an EdDSA
 * JWS by the §18 credential key, never `type: "none"`), the row, the grants it covers, the
 * `dpdp.consent.created` event and the `service.dpdp.consent_recorded` audit entry. Used by the
 * developer's POST (Records.ts) and by a person's approval of a request that names a notice
 * (ApprovalConsent.ts), so both make the same record.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { VcKeyService } from "../credentials/Keys.ts"
import type { AuditChainService } from "../platform/AuditChain.ts"
import type { EventsService } from "../platform/Events.ts"
import type { NoticeRow } from "./Notices.ts"
import type { Purpose } from "./Validate.ts"

export interface RecordWrite {
  readonly recordId: string
  readonly developerId: string
  readonly grantId: string
  readonly grantPrincipalId: string
  readonly dataPrincipalId: string
  readonly scopes: ReadonlyArray<string>
  readonly notice: NoticeRow
  readonly purposes: ReadonlyArray<Purpose>
  readonly consentMethod: string
  readonly consentManagerRef: string | null
  readonly principalType: string
  readonly guardianVerification: unknown
  readonly authRequestId: string | null
  readonly consentGivenAt: Date
  readonly processingExpiresAt: Date
  readonly retentionUntil: Date
  readonly automatic: boolean
  readonly nowMs: number
}

export interface RecordWriter {
  readonly sql: SqlClient.SqlClient
  readonly keys: VcKeyService
  readonly audit: AuditChainService
  readonly events: EventsService
}

export const writeRecord = ({ sql, keys, audit, events }: RecordWriter, w: RecordWrite) =>
  Effect.gen(function*() {
    const grantIds = [w.grantId]
    const notice = w.notice
    const proofJwt = yield* keys.sign({
      iss: keys.did,
      jti: w.recordId,
      grantIds,
      sub: w.dataPrincipalId,
      noticeDigest: notice.noticeDigest,
      consentNoticeHash: notice.contentHash,
      purposes: w.purposes.map((p) => p.code),
      scopes: [...w.scopes],
      consentMethod: w.consentMethod,
      consentGivenAt: w.consentGivenAt.toISOString(),
      iat: Math.floor(w.nowMs / 1000)
    }, { typ: "JWT" })
    yield* sql.unsafe(
      `INSERT INTO dpdp_consent_records (id, developer_id, grant_id, data_principal_id, grant_principal_id, notice_row_id,
         consent_notice_id, consent_notice_version, language, consent_notice_hash, notice_digest, purposes, scopes,
         consent_method, consent_manager_ref, principal_type, guardian_verification, auth_request_id, status, consent_given_at,
         processing_expires_at, retention_until, proof_jwt, proof_signed_at, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13, $14, $15, $16, $17::jsonb, $18, 'active', $19, $20, $21, $22, $23, $23)`,
      [w.recordId, w.developerId, w.grantId, w.dataPrincipalId, w.grantPrincipalId, notice.id, notice.noticeId, notice.version,
        notice.language, notice.contentHash, notice.noticeDigest, JSON.stringify(w.purposes), [...w.scopes] as any,
        w.consentMethod, w.consentManagerRef, w.principalType,
        w.guardianVerification === null || w.guardianVerification === undefined ? null : JSON.stringify(w.guardianVerification),
        w.authRequestId, w.consentGivenAt, w.processingExpiresAt, w.retentionUntil, proofJwt, new Date(w.nowMs)]
    )
    yield* sql`INSERT INTO dpdp_consent_record_grants (record_id, grant_id) VALUES (${w.recordId}, ${w.grantId})`
    yield* events.emit(w.developerId, "dpdp.consent.created", {
      recordId: w.recordId, grantId: w.grantId, grantIds, dataPrincipalId: w.dataPrincipalId, consentMethod: w.consentMethod, automatic: w.automatic
    })
    yield* audit.append({
      developerId: w.developerId,
      action: "service.dpdp.consent_recorded",
      grantId: w.grantId,
      principalId: w.dataPrincipalId,
      metadata: {
        recordId: w.recordId, grantIds, noticeId: notice.noticeId, noticeVersion: notice.version, language: notice.language,
        noticeDigest: notice.noticeDigest, consentMethod: w.consentMethod, purposes: w.purposes.map((p) => p.code),
        automatic: w.automatic, ...(w.authRequestId !== null ? { authRequestId: w.authRequestId } : {})
      }
    })
  })
