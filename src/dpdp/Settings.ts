/**
 * The developer's DPDP settings (decisions §21): `GET /v1/dpdp/settings` and `PATCH` (unknown fields
 * 400; each change writes `service.dpdp.settings_changed` with the changed field names only, §19).
 * The other DPDP parts read them through SettingsRead.ts.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { AuditChain } from "../platform/AuditChain.ts"
import { nowMillis } from "../platform/Time.ts"
import { InvalidNotice } from "./Errors.ts"
import { DEFAULT_SETTINGS, type DpdpSettings, readSettings } from "./SettingsRead.ts"
import { bool, fail, httpsUrl, objectBody, pattern, validated } from "./Validate.ts"

const FIELDS = Object.keys(DEFAULT_SETTINGS) as ReadonlyArray<keyof DpdpSettings>
const NUMBERS: Partial<Record<keyof DpdpSettings, readonly [number, number]>> = {
  grievanceResponseDays: [1, 90],
  erasureLogHoldDays: [0, 3650],
  consentRecordRetentionDays: [30, 3650]
}

const parsePatch = (raw: unknown): Partial<DpdpSettings> => {
  const body = objectBody(raw)
  const unknown = Object.keys(body).filter((k) => !(FIELDS as ReadonlyArray<string>).includes(k))
  if (unknown.length > 0) fail(unknown[0]!, `Unknown setting ${unknown[0]} (settings: ${FIELDS.join(", ")})`)
  const out: Record<string, unknown> = {}
  for (const [field, [min, max]] of Object.entries(NUMBERS) as Array<[string, readonly [number, number]]>) {
    const v = body[field]
    if (v === undefined) continue
    if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) fail(field, `${field} must be a whole number from ${min} to ${max}`)
    out[field] = v
  }
  for (const field of ["strictWithdrawal", "requireCompleteNotices"] as const) {
    if (body[field] === undefined) continue
    if (body[field] === null) fail(field, `${field} must be true or false`)
    out[field] = bool(body, field)
  }
  for (const field of ["withdrawalUrl", "boardComplaintUrl"] as const) {
    if (body[field] === undefined) continue
    out[field] = body[field] === null ? null : httpsUrl(body, field)
  }
  if (body.defaultConsentNoticeId !== undefined) {
    out.defaultConsentNoticeId = body.defaultConsentNoticeId === null
      ? null
      : pattern(body, "defaultConsentNoticeId", /^[A-Za-z0-9._:-]{1,100}$/, true, "1 to 100 of A-Z a-z 0-9 . _ : -")
  }
  return out as Partial<DpdpSettings>
}

const COLUMN: Record<keyof DpdpSettings, string> = {
  grievanceResponseDays: "grievance_response_days",
  erasureLogHoldDays: "erasure_log_hold_days",
  consentRecordRetentionDays: "consent_record_retention_days",
  defaultConsentNoticeId: "default_consent_notice_id",
  strictWithdrawal: "strict_withdrawal",
  requireCompleteNotices: "require_complete_notices",
  withdrawalUrl: "withdrawal_url",
  boardComplaintUrl: "board_complaint_url"
}

export const makeSettings = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const audit = yield* AuditChain

  const get = (developerId: string) => readSettings(sql, developerId)

  const update = (developerId: string, raw: unknown) =>
    Effect.gen(function*() {
      const patch = yield* validated(() => parsePatch(raw))
      const ms = yield* nowMillis
      return yield* sql.withTransaction(Effect.gen(function*() {
        if (patch.defaultConsentNoticeId !== undefined && patch.defaultConsentNoticeId !== null) {
          const found = yield* sql`SELECT 1 FROM dpdp_consent_notices WHERE developer_id = ${developerId}
                                     AND (notice_id = ${patch.defaultConsentNoticeId} OR id = ${patch.defaultConsentNoticeId}) LIMIT 1`
          if (found.length === 0) return yield* Effect.fail(new InvalidNotice({ message: "defaultConsentNoticeId names no notice of yours" }))
        }
        yield* sql`INSERT INTO dpdp_settings (developer_id, updated_at) VALUES (${developerId}, ${new Date(ms)}) ON CONFLICT (developer_id) DO NOTHING`
        const before = yield* sql.unsafe<DpdpSettings>(
          `SELECT ${FIELDS.map((f) => COLUMN[f]).join(", ")} FROM dpdp_settings WHERE developer_id = $1 FOR UPDATE`, [developerId])
        const changed = (Object.keys(patch) as Array<keyof DpdpSettings>).filter((f) => before[0]![f] !== patch[f]).sort()
        if (changed.length > 0) {
          const params: Array<unknown> = [developerId, new Date(ms)]
          const sets = changed.map((f) => {
            params.push(patch[f])
            return `${COLUMN[f]} = $${params.length}`
          })
          yield* sql.unsafe(`UPDATE dpdp_settings SET ${sets.join(", ")}, updated_at = $2 WHERE developer_id = $1`, params as any)
          // the field names only: values may be URLs or ids, and the chain keeps no free text
          yield* audit.append({ developerId, action: "service.dpdp.settings_changed", metadata: { changed } })
        }
        return yield* readSettings(sql, developerId)
      }))
    }).pipe(Effect.catchTag("SqlError", Effect.die))

  return { get, update }
})
