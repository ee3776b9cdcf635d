-- Credential vault (decisions §9). One row per (developer, principal, service). The secrets
-- (access token, refresh token, upstream client id and secret) are one AES-256-GCM ciphertext whose
-- additional authenticated data is the row's id, developer, principal and service; key_id names the
-- key that sealed it, so rows under an old key keep decrypting until `agent-auth vault rekey`.
CREATE TABLE vault_credentials (
  id                text PRIMARY KEY,
  developer_id      text NOT NULL REFERENCES developers(id),
  principal_id      text NOT NULL,
  service           text NOT NULL,
  credential_type   text NOT NULL,
  token_expires_at  timestamptz,
  metadata          jsonb NOT NULL DEFAULT '{}'::jsonb,
  token_endpoint    text,
  has_refresh_token boolean NOT NULL DEFAULT false,
  key_id            text NOT NULL,
  iv                text NOT NULL,
  ciphertext        text NOT NULL,
  refreshed_at      timestamptz,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL,
  UNIQUE (developer_id, principal_id, service)
);
CREATE INDEX vault_credentials_list ON vault_credentials (developer_id, created_at DESC, id DESC);
-- rekey walks the rows not under the active key
CREATE INDEX vault_credentials_key ON vault_credentials (key_id, id);
