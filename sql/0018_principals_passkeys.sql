-- Principal sessions (decisions §12) and passkey management (decisions §17).

-- A principal's own short-lived session: the token is stored only as its SHA-256.
CREATE TABLE principal_sessions (
  id           text PRIMARY KEY,
  developer_id text NOT NULL REFERENCES developers(id),
  principal_id text NOT NULL,
  token_hash   text NOT NULL UNIQUE,
  created_at   timestamptz NOT NULL,
  expires_at   timestamptz NOT NULL
);
CREATE INDEX principal_sessions_expiry ON principal_sessions (expires_at);

-- How a grant was made (consent, sso, passkey, policy, developer); NULL on grants made before this
-- column, whose method the principal views derive from the request or bundle that made them.
ALTER TABLE grants ADD COLUMN approval_method text;
-- a principal's own lists read only their rows (grants_principal and audit_log_principal come with
-- 0014); the approval method is read from the request that made the grant
CREATE INDEX auth_requests_grant ON auth_requests (grant_id) WHERE grant_id IS NOT NULL;
-- a bundle's grant: the approval its consentRequestId consumed (decisions §12)
CREATE INDEX consent_bundles_grant ON consent_bundles (grant_id);
CREATE INDEX auth_requests_bundle ON auth_requests (consumed_by_bundle_id) WHERE consumed_by_bundle_id IS NOT NULL;

-- WebAuthn user handles: 32 random bytes per (developer, principal), never the principal id.
CREATE TABLE webauthn_user_handles (
  developer_id text NOT NULL REFERENCES developers(id),
  principal_id text NOT NULL,
  user_handle  text NOT NULL,
  created_at   timestamptz NOT NULL,
  PRIMARY KEY (developer_id, principal_id),
  UNIQUE (developer_id, user_handle)
);
-- Principals that already hold passkeys keep the handle their authenticators stored (the SHA-256
-- of developer id, NUL, principal id, as part one derived it).
INSERT INTO webauthn_user_handles (developer_id, principal_id, user_handle, created_at)
SELECT developer_id, principal_id,
       rtrim(translate(encode(sha256(convert_to(developer_id, 'UTF8') || '\x00'::bytea || convert_to(principal_id, 'UTF8')), 'base64'), '+/', '-_'), '='),
       min(created_at)
FROM webauthn_credentials GROUP BY developer_id, principal_id;

ALTER TABLE webauthn_credentials
  ADD COLUMN provider_name      text,
  ADD COLUMN backup_eligible    boolean NOT NULL DEFAULT false,
  ADD COLUMN use_count          bigint NOT NULL DEFAULT 0,
  ADD COLUMN attestation_format text,
  ADD COLUMN deleted_at         timestamptz;
UPDATE webauthn_credentials SET backup_eligible = (device_type = 'multiDevice');
CREATE INDEX webauthn_credentials_deleted ON webauthn_credentials (deleted_at) WHERE deleted_at IS NOT NULL;
CREATE INDEX webauthn_credentials_credential ON webauthn_credentials (credential_id);

-- A developer's attestation policy (absent: attestation "none", any authenticator).
CREATE TABLE webauthn_policies (
  developer_id            text PRIMARY KEY REFERENCES developers(id),
  attestation             text NOT NULL CHECK (attestation IN ('none', 'direct')),
  allowed_aaguids         text[],
  require_backup_eligible boolean NOT NULL DEFAULT false,
  updated_at              timestamptz NOT NULL
);
CREATE INDEX webauthn_challenges_created ON webauthn_challenges (created_at);
