/**
 * The developer's DPDP settings (decisions §21) as the other DPDP parts read them, with their
 * defaults when the developer never set any (no row). The routes that change them are Settings.ts.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export interface DpdpSettings {
  readonly grievanceResponseDays: number
  readonly erasureLogHoldDays: number
  readonly consentRecordRetentionDays: number
  readonly defaultConsentNoticeId: string | null
  readonly strictWithdrawal: boolean
  readonly requireCompleteNotices: boolean
  readonly withdrawalUrl: string | null
  readonly boardComplaintUrl: string | null
}

export const DEFAULT_SETTINGS: DpdpSettings = {
  grievanceResponseDays: 7,
  erasureLogHoldDays: 365,
  consentRecordRetentionDays: 2555,
  defaultConsentNoticeId: null,
  strictWithdrawal: false,
  requireCompleteNotices: false,
  withdrawalUrl: null,
  boardComplaintUrl: null
}

export const SETTINGS_COLUMNS = `grievance_response_days, erasure_log_hold_days, consent_record_retention_days, default_consent_notice_id,
  strict_withdrawal, require_complete_notices, withdrawal_url, board_complaint_url`

export const readSettings = (sql: SqlClient.SqlClient, developerId: string) =>
  sql.unsafe<DpdpSettings>(`SELECT ${SETTINGS_COLUMNS} FROM dpdp_settings WHERE developer_id = $1`, [developerId]).pipe(
    Effect.map((rows) => rows[0] ?? DEFAULT_SETTINGS),
    Effect.orDie
  )

export const retentionDays = (sql: SqlClient.SqlClient, developerId: string) =>
  Effect.map(readSettings(sql, developerId), (s) => s.consentRecordRetentionDays)
