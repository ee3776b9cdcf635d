-- DPDP consent notices and consent records (decisions §21).

-- One row per (developer, noticeId, version, language): a version is immutable once written; only
-- retired_at is ever set on it.
CREATE TABLE dpdp_consent_notices (
  id                     text PRIMARY KEY,
  developer_id           text NOT NULL REFERENCES developers(id),
  notice_id              text NOT NULL,
  version                text NOT NULL,
  language               text NOT NULL,
  title                  text NOT NULL,
  content                text NOT NULL,
  content_hash           text NOT NULL,
  notice_digest          text NOT NULL,
  purposes               jsonb NOT NULL,
  data_items             text[] NOT NULL DEFAULT '{}',
  data_fiduciary_contact text,
  grievance_officer      jsonb,
  withdrawal_url         text,
  rights_url             text,
  board_complaint_url    text,
  missing                text[] NOT NULL,
  retired_at             timestamptz,
  created_at             timestamptz NOT NULL,
  UNIQUE (developer_id, notice_id, version, language)
);
CREATE INDEX dpdp_consent_notices_list ON dpdp_consent_notices (developer_id, created_at DESC, id DESC);
CREATE INDEX dpdp_consent_notices_hash ON dpdp_consent_notices (developer_id, notice_id, content_hash);

CREATE TABLE dpdp_consent_records (
  id                    text PRIMARY KEY,
  developer_id          text NOT NULL REFERENCES developers(id),
  grant_id              text NOT NULL REFERENCES grants(id),
  data_principal_id     text NOT NULL,
  grant_principal_id    text NOT NULL,
  notice_row_id         text NOT NULL REFERENCES dpdp_consent_notices(id),
  consent_notice_id     text NOT NULL,
  consent_notice_version text NOT NULL,
  language              text NOT NULL,
  consent_notice_hash   text NOT NULL,
  notice_digest         text NOT NULL,
  purposes              jsonb NOT NULL,
  scopes                text[] NOT NULL,
  consent_method        text NOT NULL,
  consent_manager_ref   text,
  principal_type        text NOT NULL CHECK (principal_type IN ('adult', 'child', 'guardian_of_pwd')),
  guardian_verification jsonb,
  auth_request_id       text,
  status                text NOT NULL CHECK (status IN ('active', 'withdrawn', 'erased')),
  consent_given_at      timestamptz NOT NULL,
  processing_expires_at timestamptz NOT NULL,
  retention_until       timestamptz NOT NULL,
  proof_jwt             text NOT NULL,
  proof_signed_at       timestamptz NOT NULL,
  access_count          integer NOT NULL DEFAULT 0,
  last_accessed_at      timestamptz,
  withdrawn_at          timestamptz,
  withdrawn_reason      text,
  withdrawn_by          text CHECK (withdrawn_by IN ('developer', 'principal')),
  grant_revoked         boolean,
  data_deletion         text CHECK (data_deletion IN ('completed', 'processing')),
  created_at            timestamptz NOT NULL
);
CREATE INDEX dpdp_consent_records_list ON dpdp_consent_records (developer_id, created_at DESC, id DESC);
CREATE INDEX dpdp_consent_records_principal ON dpdp_consent_records (developer_id, data_principal_id, created_at DESC, id DESC);
CREATE INDEX dpdp_consent_records_grant_principal ON dpdp_consent_records (developer_id, grant_principal_id);

-- the grants a record covers (the grant it was made for first; delegated descendants through the cascade)
CREATE TABLE dpdp_consent_record_grants (
  record_id text NOT NULL REFERENCES dpdp_consent_records(id),
  grant_id  text NOT NULL REFERENCES grants(id),
  PRIMARY KEY (record_id, grant_id)
);
CREATE INDEX dpdp_consent_record_grants_grant ON dpdp_consent_record_grants (grant_id);
