/** A consent record as stored and as answered (the published shape plus decisions §21's fields). */
import type { Purpose } from "./Validate.ts"

export interface RecordRow {
  readonly id: string
  readonly developerId: string
  readonly grantId: string
  readonly grantIds: ReadonlyArray<string>
  readonly grantStatus: "active" | "revoked"
  readonly grantExpiresAt: Date
  readonly dataPrincipalId: string
  readonly grantPrincipalId: string
  readonly dataFiduciaryName: string
  readonly consentNoticeId: string
  readonly consentNoticeVersion: string
  readonly language: string
  readonly consentNoticeHash: string
  readonly noticeDigest: string
  readonly purposes: ReadonlyArray<Purpose>
  readonly scopes: ReadonlyArray<string>
  readonly consentMethod: string
  readonly consentManagerRef: string | null
  readonly principalType: string
  readonly guardianVerification: unknown
  readonly authRequestId: string | null
  readonly status: "active" | "withdrawn" | "erased"
  readonly consentGivenAt: Date
  readonly processingExpiresAt: Date
  readonly retentionUntil: Date
  readonly proofJwt: string
  readonly proofSignedAt: Date
  readonly accessCount: number
  readonly lastAccessedAt: Date | null
  readonly withdrawnAt: Date | null
  readonly withdrawnReason: string | null
  readonly withdrawnBy: string | null
  readonly createdAt: Date
}

/** the record with its grants, fiduciary name and first grant's status (one row per record) */
export const RECORD_SELECT = `
  SELECT r.id, r.developer_id, r.grant_id, r.data_principal_id, r.grant_principal_id, d.name AS data_fiduciary_name,
         r.consent_notice_id, r.consent_notice_version, r.language, r.consent_notice_hash, r.notice_digest, r.purposes,
         r.scopes, r.consent_method, r.consent_manager_ref, r.principal_type, r.guardian_verification, r.auth_request_id,
         r.status, r.consent_given_at, r.processing_expires_at, r.retention_until, r.proof_jwt, r.proof_signed_at,
         r.access_count, r.last_accessed_at, r.withdrawn_at, r.withdrawn_reason, r.withdrawn_by, r.created_at,
         g.status AS grant_status, g.expires_at AS grant_expires_at,
         ARRAY(SELECT c.grant_id FROM dpdp_consent_record_grants c WHERE c.record_id = r.id
               ORDER BY c.grant_id = r.grant_id DESC, c.grant_id) AS grant_ids
  FROM dpdp_consent_records r
  JOIN developers d ON d.id = r.developer_id
  JOIN grants g ON g.id = r.grant_id`

const iso = (d: Date | null) => d?.toISOString() ?? null

export const recordView = (r: RecordRow, nowMs: number) => ({
  recordId: r.id,
  grantId: r.grantId,
  grantIds: [...r.grantIds],
  grantStatus: r.grantStatus === "active" && r.grantExpiresAt.getTime() <= nowMs ? "expired" as const : r.grantStatus,
  dataPrincipalId: r.dataPrincipalId,
  ...(r.grantPrincipalId !== r.dataPrincipalId ? { grantPrincipalId: r.grantPrincipalId } : {}),
  dataFiduciaryName: r.dataFiduciaryName,
  purposes: r.purposes,
  scopes: [...r.scopes],
  consentNoticeId: r.consentNoticeId,
  consentNoticeVersion: r.consentNoticeVersion,
  language: r.language,
  consentNoticeHash: r.consentNoticeHash,
  noticeDigest: r.noticeDigest,
  consentMethod: r.consentMethod,
  consentManagerRef: r.consentManagerRef,
  principalType: r.principalType,
  ...(r.guardianVerification !== null ? { guardianVerification: r.guardianVerification } : {}),
  authRequestId: r.authRequestId,
  consentProof: { type: "Ed25519Signature2020" as const, proofJwt: r.proofJwt, signedAt: r.proofSignedAt.toISOString() },
  // expired is derived: an active record whose processing time has passed
  status: r.status === "active" && r.processingExpiresAt.getTime() <= nowMs ? "expired" as const : r.status,
  consentGivenAt: r.consentGivenAt.toISOString(),
  processingExpiresAt: r.processingExpiresAt.toISOString(),
  retentionUntil: r.retentionUntil.toISOString(),
  accessCount: r.accessCount,
  lastAccessedAt: iso(r.lastAccessedAt),
  withdrawnAt: iso(r.withdrawnAt),
  withdrawnReason: r.withdrawnReason,
  withdrawnBy: r.withdrawnBy,
  createdAt: r.createdAt.toISOString()
})

export type RecordView = ReturnType<typeof recordView>
