-- Agents, authorization requests, grants, grant tokens, codes and refresh tokens.

CREATE TABLE agents (
  id           text PRIMARY KEY,
  developer_id text NOT NULL REFERENCES developers(id),
  name         text NOT NULL,
  description  text,
  scopes       text[] NOT NULL DEFAULT '{}',
  status       text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL,
  deleted_at   timestamptz
);
CREATE INDEX agents_developer ON agents (developer_id, created_at DESC, id DESC);

CREATE TABLE auth_requests (
  id                    text PRIMARY KEY,
  developer_id          text NOT NULL REFERENCES developers(id),
  agent_id              text NOT NULL REFERENCES agents(id),
  principal_id          text NOT NULL,
  scopes                text[] NOT NULL,
  grant_ttl_seconds     integer NOT NULL,
  redirect_uri          text,
  state                 text,
  audience              text,
  code_challenge        text,
  code_challenge_method text,
  status                text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'denied')),
  expires_at            timestamptz NOT NULL,
  created_at            timestamptz NOT NULL,
  decided_at            timestamptz,
  grant_id              text,
  fido_verified_at      timestamptz
);

CREATE TABLE grants (
  id               text PRIMARY KEY,
  developer_id     text NOT NULL REFERENCES developers(id),
  agent_id         text NOT NULL REFERENCES agents(id),
  principal_id     text NOT NULL,
  scopes           text[] NOT NULL,
  status           text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
  audience         text,
  issued_at        timestamptz NOT NULL,
  expires_at       timestamptz NOT NULL,
  revoked_at       timestamptz,
  parent_grant_id  text REFERENCES grants(id),
  delegation_depth integer NOT NULL DEFAULT 0,
  created_at       timestamptz NOT NULL
);
CREATE INDEX grants_developer ON grants (developer_id, created_at DESC, id DESC);
CREATE INDEX grants_parent ON grants (parent_grant_id) WHERE parent_grant_id IS NOT NULL;

CREATE TABLE auth_codes (
  code_hash       text PRIMARY KEY,
  auth_request_id text NOT NULL REFERENCES auth_requests(id),
  grant_id        text NOT NULL REFERENCES grants(id),
  developer_id    text NOT NULL REFERENCES developers(id),
  agent_id        text NOT NULL,
  expires_at      timestamptz NOT NULL,
  used_at         timestamptz
);

-- One row per issued grant token (its jti), so a single token can be revoked online.
CREATE TABLE grant_tokens (
  jti          text PRIMARY KEY,
  grant_id     text NOT NULL REFERENCES grants(id),
  developer_id text NOT NULL REFERENCES developers(id),
  issued_at    timestamptz NOT NULL,
  expires_at   timestamptz NOT NULL,
  revoked_at   timestamptz
);
CREATE INDEX grant_tokens_grant ON grant_tokens (grant_id);

CREATE TABLE refresh_tokens (
  id           text PRIMARY KEY,
  token_hash   text NOT NULL UNIQUE,
  grant_id     text NOT NULL REFERENCES grants(id),
  developer_id text NOT NULL REFERENCES developers(id),
  agent_id     text NOT NULL,
  created_at   timestamptz NOT NULL,
  expires_at   timestamptz NOT NULL,
  used_at      timestamptz
);
