-- SSO (decisions §12): connections (OIDC and SAML), login states, sessions, linked identities.

-- One identity provider of a developer. OIDC columns and SAML columns side by side; the client
-- secret is sealed with the vault keys (JSON Sealed, AAD bound to the row), never returned.
CREATE TABLE sso_connections (
  id                         text PRIMARY KEY,
  developer_id               text NOT NULL REFERENCES developers(id),
  name                       text NOT NULL,
  protocol                   text NOT NULL CHECK (protocol IN ('oidc', 'saml')),
  status                     text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive')),
  domains                    text[] NOT NULL DEFAULT '{}',
  jit_provisioning           boolean NOT NULL DEFAULT true,
  enforce                    boolean NOT NULL DEFAULT false,
  groups_claim               text,
  group_mappings             jsonb NOT NULL DEFAULT '{}',
  default_scopes             text[] NOT NULL DEFAULT '{}',
  allowed_redirect_uris      text[] NOT NULL DEFAULT '{}',
  -- OIDC
  issuer_url                 text,
  client_id                  text,
  client_secret_ciphertext   text,
  token_endpoint_auth_method text,
  scopes                     text,
  tenant_mode                text,
  -- SAML (decisions §12; the saml branch reads and extends these)
  idp_entity_id              text,
  idp_sso_url                text,
  idp_certificates           jsonb,
  created_at                 timestamptz NOT NULL,
  updated_at                 timestamptz NOT NULL,
  deleted_at                 timestamptz
);
CREATE INDEX sso_connections_developer ON sso_connections (developer_id, created_at, id) WHERE deleted_at IS NULL;
-- the legacy /v1/sso/config connection: one per developer
CREATE UNIQUE INDEX sso_connections_legacy ON sso_connections (developer_id) WHERE name = 'legacy' AND deleted_at IS NULL;
-- rekey finds rows not under the active key
CREATE INDEX sso_connections_secret ON sso_connections (id) WHERE client_secret_ciphertext IS NOT NULL;

-- Server-side login state, single use, 10 minutes. Kept here in the embedded mode (REDIS_URL=memory://);
-- with Redis the same record lives under a Redis key.
CREATE TABLE sso_login_states (
  state          text PRIMARY KEY,
  developer_id   text NOT NULL,
  connection_id  text NOT NULL,
  protocol       text NOT NULL,
  nonce          text,
  code_verifier  text,
  request_id     text,           -- the SAML AuthnRequest ID (null for OIDC)
  redirect_uri   text,           -- the stored redirect (one of the connection's allowedRedirectUris)
  target         jsonb,          -- where the browser goes back: { consentRequestId } | { permissions: true } | null
  expires_at     timestamptz NOT NULL,
  created_at     timestamptz NOT NULL
);
CREATE INDEX sso_login_states_expiry ON sso_login_states (expires_at);

-- An identity provider's user linked to a directory principal: keyed by (connection, iss, sub).
CREATE TABLE sso_identities (
  id             text PRIMARY KEY,
  developer_id   text NOT NULL REFERENCES developers(id),
  connection_id  text NOT NULL REFERENCES sso_connections(id),
  issuer         text NOT NULL,
  subject        text NOT NULL,
  principal_id   text NOT NULL,
  email          text,
  created_at     timestamptz NOT NULL,
  last_login_at  timestamptz NOT NULL,
  UNIQUE (connection_id, issuer, subject)
);

-- A person signed in through a connection. The browser holds a random token (the __Host- cookie),
-- stored only as its SHA-256; `id` (ssosess_…) is what the API lists and deletes.
CREATE TABLE sso_sessions (
  id             text PRIMARY KEY,
  developer_id   text NOT NULL REFERENCES developers(id),
  connection_id  text NOT NULL REFERENCES sso_connections(id),
  principal_id   text NOT NULL,
  identity_id    text NOT NULL REFERENCES sso_identities(id),
  token_hash     text NOT NULL UNIQUE,
  groups         text[] NOT NULL DEFAULT '{}',
  mapped_scopes  text[] NOT NULL DEFAULT '{}',
  created_at     timestamptz NOT NULL,
  expires_at     timestamptz NOT NULL,
  revoked_at     timestamptz
);
CREATE INDEX sso_sessions_developer ON sso_sessions (developer_id, created_at DESC, id DESC);
CREATE INDEX sso_sessions_principal ON sso_sessions (developer_id, principal_id, expires_at);

-- An approval made by the principal signed in through SSO (decisions §12): the session it was made
-- in. A consent bundle of a developer that enforces SSO consumes only such approvals.
ALTER TABLE auth_requests ADD COLUMN sso_session_id text;
