-- DPDP (decisions §21): the notice an authorization request names, pinned at authorize time, so the
-- person's approval makes the consent record in the same transaction as the grant; and the
-- developer's DPDP settings.

-- { noticeRowId, purposes, language, principalType, guardianVerification } or null (no notice named)
ALTER TABLE auth_requests ADD COLUMN dpdp_consent jsonb;

CREATE TABLE dpdp_settings (
  developer_id                 text PRIMARY KEY REFERENCES developers(id),
  grievance_response_days      integer NOT NULL DEFAULT 7 CHECK (grievance_response_days BETWEEN 1 AND 90),
  erasure_log_hold_days        integer NOT NULL DEFAULT 365 CHECK (erasure_log_hold_days BETWEEN 0 AND 3650),
  consent_record_retention_days integer NOT NULL DEFAULT 2555 CHECK (consent_record_retention_days BETWEEN 30 AND 3650),
  default_consent_notice_id    text,
  strict_withdrawal            boolean NOT NULL DEFAULT false,
  require_complete_notices     boolean NOT NULL DEFAULT false,
  withdrawal_url               text,
  board_complaint_url          text,
  updated_at                   timestamptz NOT NULL
);
