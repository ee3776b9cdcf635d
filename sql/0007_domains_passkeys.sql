-- Custom domains (verified through a DNS TXT record) and passkeys (WebAuthn credentials and the
-- single-use challenges of their ceremonies), decisions §9.

CREATE TABLE domains (
  id                 text PRIMARY KEY,
  developer_id       text NOT NULL REFERENCES developers(id),
  domain             text NOT NULL,
  verification_token text NOT NULL,
  verified_at        timestamptz,
  created_at         timestamptz NOT NULL,
  UNIQUE (developer_id, domain)
);
-- One domain belongs to one developer: at most one verified claim per name, and a name another
-- developer has verified cannot be claimed.
CREATE UNIQUE INDEX domains_verified_once ON domains (domain) WHERE verified_at IS NOT NULL;
CREATE INDEX domains_developer ON domains (developer_id, created_at DESC, id DESC);

CREATE TABLE webauthn_credentials (
  id                       text PRIMARY KEY,
  developer_id             text NOT NULL REFERENCES developers(id),
  principal_id             text NOT NULL,
  credential_id            text NOT NULL,
  public_key               text NOT NULL,
  counter                  bigint NOT NULL DEFAULT 0,
  transports               text[] NOT NULL DEFAULT '{}',
  device_type              text NOT NULL,
  backed_up                boolean NOT NULL DEFAULT false,
  authenticator_attachment text,
  aaguid                   text,
  device_name              text,
  created_at               timestamptz NOT NULL,
  last_used_at             timestamptz,
  UNIQUE (developer_id, credential_id)
);
CREATE INDEX webauthn_credentials_principal ON webauthn_credentials (developer_id, principal_id, created_at DESC, id DESC);

CREATE TABLE webauthn_challenges (
  id              text PRIMARY KEY,
  developer_id    text NOT NULL REFERENCES developers(id),
  kind            text NOT NULL CHECK (kind IN ('registration', 'authentication')),
  challenge       text NOT NULL,
  principal_id    text NOT NULL,
  auth_request_id text,
  user_id         text,
  expires_at      timestamptz NOT NULL,
  used_at         timestamptz,
  created_at      timestamptz NOT NULL
);
CREATE INDEX webauthn_challenges_expiry ON webauthn_challenges (expires_at);
