-- OAuth 2.1 authorization server for agents and MCP servers (decisions §22).

-- Resource servers (22.2): an API registered by a developer; its identifier is the `aud` of its tokens.
CREATE TABLE resource_servers (
  id                        text PRIMARY KEY,
  developer_id              text NOT NULL REFERENCES developers(id),
  identifier                text NOT NULL UNIQUE,
  name                      text NOT NULL,
  scopes                    jsonb NOT NULL,
  default_scopes            text[] NOT NULL DEFAULT '{}',
  access_token_ttl_seconds  integer NOT NULL,
  grant_ttl_seconds         integer NOT NULL,
  open_dcr                  boolean NOT NULL DEFAULT false,
  open_cimd                 boolean NOT NULL DEFAULT false,
  cimd_allowed_hosts        text[],
  login                     jsonb NOT NULL,
  secret_hash               text NOT NULL,
  previous_secret_hash      text,
  previous_secret_until     timestamptz,
  created_at                timestamptz NOT NULL,
  updated_at                timestamptz NOT NULL
);
CREATE INDEX resource_servers_developer ON resource_servers (developer_id, created_at DESC, id DESC);

-- An agent's OAuth client profile (22.3).
CREATE TABLE oauth_clients (
  agent_id                    text PRIMARY KEY REFERENCES agents(id),
  developer_id                text NOT NULL REFERENCES developers(id),
  client_id                   text NOT NULL,
  origin                      text NOT NULL CHECK (origin IN ('api', 'dcr', 'cimd')),
  client_type                 text NOT NULL CHECK (client_type IN ('public', 'confidential')),
  token_endpoint_auth_method  text NOT NULL,
  redirect_uris               text[] NOT NULL,
  grant_types                 text[] NOT NULL,
  application_type            text NOT NULL,
  client_name                 text,
  client_uri                  text,
  scope                       text,
  metadata                    jsonb NOT NULL DEFAULT '{}',
  secret_hash                 text,
  previous_secret_hash        text,
  previous_secret_until       timestamptz,
  token_exchange              boolean NOT NULL DEFAULT false,
  verified                    boolean NOT NULL,
  authorized_at               timestamptz,
  created_at                  timestamptz NOT NULL,
  UNIQUE (developer_id, client_id)
);
CREATE INDEX oauth_clients_unauthorized ON oauth_clients (created_at) WHERE origin = 'dcr' AND authorized_at IS NULL;

-- An OAuth authorization is a section-3 request that first waits for the person to sign in.
ALTER TABLE auth_requests DROP CONSTRAINT IF EXISTS auth_requests_status_check;
ALTER TABLE auth_requests ADD CONSTRAINT auth_requests_status_check CHECK (status IN ('authenticating', 'pending', 'approved', 'denied'));
ALTER TABLE auth_requests ADD COLUMN oauth jsonb;
ALTER TABLE auth_requests ADD COLUMN interaction_cookie_hash text;
ALTER TABLE auth_requests ADD COLUMN interaction_token_hash text;
ALTER TABLE auth_requests ADD COLUMN interaction_token_expires_at timestamptz;
ALTER TABLE auth_requests ADD COLUMN auth_method text;
ALTER TABLE auth_requests ADD COLUMN auth_time timestamptz;

-- Codes and refresh tokens of the OAuth token endpoint are not redeemable at /v1/token, and the reverse.
ALTER TABLE auth_codes ADD COLUMN oauth boolean NOT NULL DEFAULT false;
ALTER TABLE refresh_tokens ADD COLUMN oauth boolean NOT NULL DEFAULT false;

-- What an OAuth grant was made for (22.5).
ALTER TABLE grants ADD COLUMN resource_server_id text;
ALTER TABLE grants ADD COLUMN resource text;
ALTER TABLE grants ADD COLUMN client_id text;
ALTER TABLE grants ADD COLUMN auth_method text;
ALTER TABLE grants ADD COLUMN auth_time timestamptz;
CREATE INDEX grants_resource_server ON grants (resource_server_id) WHERE resource_server_id IS NOT NULL;
