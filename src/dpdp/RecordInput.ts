/**
 * The bodies of the consent-record routes (decisions §21): the published POST, with what
 * `@grantex/dpdp` adds, and the withdrawal.
 */
import { bool, fail, isObject, isoTime, objectBody, type Purpose, purposes, text } from "./Validate.ts"

export const CONSENT_METHODS = ["explicit-click", "consent_manager", "written", "verbal", "developer-attested"] as const
export type ConsentMethod = typeof CONSENT_METHODS[number] | "sso" | "passkey"
export const PRINCIPAL_TYPES = ["adult", "child", "guardian_of_pwd"] as const
export const GUARDIAN_METHODS = ["reliable_details", "voluntary_details", "virtual_token", "digital_locker"] as const

const DAY_MS = 86_400_000
/** a record's processing may run at most 10 years ahead */
export const MAX_PROCESSING_MS = 3653 * DAY_MS
/** a developer-given consentGivenAt may be at most 24 h in the past */
export const MAX_CONSENT_AGE_MS = DAY_MS
/** consentRecordRetentionDays' default (decisions §21: 7 years) */
export const RETENTION_DAYS = 2555
const SKEW_MS = 5 * 60_000

export interface RecordInput {
  readonly grantId: string
  readonly dataPrincipalId: string
  readonly purposes: ReadonlyArray<Purpose>
  readonly consentNoticeId: string
  readonly consentNoticeVersion: string | undefined
  readonly consentNoticeHash: string | undefined
  readonly language: string
  readonly processingExpiresAt: Date
  readonly consentGivenAt: Date
  readonly consentMethod: ConsentMethod
  readonly consentManagerRef: string | null
  readonly principalType: typeof PRINCIPAL_TYPES[number]
  readonly guardianVerification: { method: string; reference: string; verifiedAt: string } | null
}

const oneOf = <T extends string>(body: Record<string, unknown>, field: string, values: ReadonlyArray<T>): T | undefined => {
  const value = body[field]
  if (value === undefined || value === null) return undefined
  if (typeof value !== "string" || !(values as ReadonlyArray<string>).includes(value)) {
    return fail(field, `${field} must be one of ${values.join(", ")}`)
  }
  return value as T
}

export const guardian = (value: unknown, nowMs: number): RecordInput["guardianVerification"] => {
  if (value === undefined || value === null) return null
  if (!isObject(value)) return fail("guardianVerification", "guardianVerification must be an object { method, reference, verifiedAt }")
  const method = oneOf(value, "method", GUARDIAN_METHODS)
  if (method === undefined) return fail("guardianVerification.method", "guardianVerification.method is required")
  const reference = text(value, "reference", 200, true)!
  const verifiedAt = isoTime(value, "verifiedAt", true)!
  if (verifiedAt.getTime() > nowMs + SKEW_MS) fail("guardianVerification.verifiedAt", "guardianVerification.verifiedAt must not be in the future")
  return { method, reference, verifiedAt: verifiedAt.toISOString() }
}

/**
 * Server-computed fields `@grantex/dpdp` sends (scopes, retentionUntil, consentProof, dataFiduciaryId
 * and Name, dataPrincipalDID) are accepted and ignored: they are ours to compute.
 */
export const parseRecordBody = (raw: unknown, nowMs: number): RecordInput => {
  const body = objectBody(raw)
  const grantId = text(body, "grantId", 100, true)!
  const dataPrincipalId = text(body, "dataPrincipalId", 256, true)!
  const list = purposes(body)
  const consentNoticeId = text(body, "consentNoticeId", 100, true)!
  const processingExpiresAt = isoTime(body, "processingExpiresAt", true)!
  if (processingExpiresAt.getTime() <= nowMs) fail("processingExpiresAt", "processingExpiresAt must be in the future")
  if (processingExpiresAt.getTime() > nowMs + MAX_PROCESSING_MS) fail("processingExpiresAt", "processingExpiresAt may be at most 10 years ahead")
  const givenAt = isoTime(body, "consentGivenAt", false)
  if (givenAt !== undefined && givenAt.getTime() < nowMs - MAX_CONSENT_AGE_MS) fail("consentGivenAt", "consentGivenAt may be at most 24 hours in the past")
  if (givenAt !== undefined && givenAt.getTime() > nowMs + SKEW_MS) fail("consentGivenAt", "consentGivenAt must not be in the future")
  const hash = text(body, "consentNoticeHash", 64, false)
  if (hash !== undefined && !/^[0-9a-fA-F]{64}$/.test(hash)) fail("consentNoticeHash", "consentNoticeHash must be a SHA-256 hex digest")
  const principalType = oneOf(body, "principalType", PRINCIPAL_TYPES) ?? "adult"
  return {
    grantId,
    dataPrincipalId,
    purposes: list,
    consentNoticeId,
    consentNoticeVersion: text(body, "consentNoticeVersion", 32, false),
    consentNoticeHash: hash,
    language: text(body, "language", 35, false) ?? "en",
    processingExpiresAt,
    consentGivenAt: givenAt ?? new Date(nowMs),
    consentMethod: oneOf(body, "consentMethod", CONSENT_METHODS) ?? "developer-attested",
    consentManagerRef: text(body, "consentManagerRef", 200, false) ?? null,
    principalType,
    guardianVerification: guardian(body.guardianVerification, nowMs)
  }
}

export interface WithdrawInput {
  readonly reason: string
  readonly revokeGrant: boolean | undefined
  readonly deleteProcessedData: boolean
}

export const parseWithdrawBody = (raw: unknown): WithdrawInput => {
  const body = objectBody(raw)
  return {
    reason: text(body, "reason", 1000, true)!,
    revokeGrant: bool(body, "revokeGrant"),
    deleteProcessedData: bool(body, "deleteProcessedData") ?? false
  }
}

export const retentionUntil = (processingExpiresAt: Date, days: number = RETENTION_DAYS) => new Date(processingExpiresAt.getTime() + days * DAY_MS)
