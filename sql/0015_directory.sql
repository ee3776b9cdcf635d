-- Directory and SCIM 2.0 provisioning (decisions §11).
CREATE TABLE scim_tokens (
  id            text PRIMARY KEY,
  developer_id  text NOT NULL REFERENCES developers(id),
  token_hash    text NOT NULL UNIQUE,
  label         text NOT NULL,
  created_at    timestamptz NOT NULL,
  last_used_at  timestamptz,
  expires_at    timestamptz,
  revoked_at    timestamptz
);
CREATE INDEX scim_tokens_developer ON scim_tokens (developer_id, created_at DESC);

CREATE TABLE scim_settings (
  developer_id           text PRIMARY KEY REFERENCES developers(id),
  principal_id_attribute text NOT NULL DEFAULT 'userName',
  deprovision            text NOT NULL DEFAULT 'revoke',
  updated_at             timestamptz NOT NULL
);

-- One row per provisioned user. Indexed attributes are columns; the rest of the resource is `resource`.
-- A deleted user keeps its row (deleted_at) for 90 days for audit; its userName is free again.
CREATE TABLE scim_users (
  id            text PRIMARY KEY,
  developer_id  text NOT NULL REFERENCES developers(id),
  principal_id  text NOT NULL,
  user_name     text NOT NULL,
  external_id   text,
  display_name  text,
  active        boolean NOT NULL DEFAULT true,
  resource      jsonb NOT NULL DEFAULT '{}',
  version       integer NOT NULL DEFAULT 1,
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL,
  deleted_at    timestamptz
);
-- userName is unique per developer compared case-insensitively (RFC 7643: caseExact false), externalId exactly.
CREATE UNIQUE INDEX scim_users_user_name ON scim_users (developer_id, lower(user_name)) WHERE deleted_at IS NULL;
CREATE UNIQUE INDEX scim_users_external_id ON scim_users (developer_id, external_id) WHERE deleted_at IS NULL AND external_id IS NOT NULL;
CREATE INDEX scim_users_principal ON scim_users (developer_id, principal_id);
CREATE INDEX scim_users_list ON scim_users (developer_id, created_at, id) WHERE deleted_at IS NULL;
CREATE INDEX scim_users_display_name ON scim_users (developer_id, lower(display_name)) WHERE deleted_at IS NULL;

CREATE TABLE scim_groups (
  id            text PRIMARY KEY,
  developer_id  text NOT NULL REFERENCES developers(id),
  display_name  text NOT NULL,
  external_id   text,
  version       integer NOT NULL DEFAULT 1,
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL,
  deleted_at    timestamptz
);
CREATE INDEX scim_groups_display_name ON scim_groups (developer_id, lower(display_name)) WHERE deleted_at IS NULL;
CREATE INDEX scim_groups_external_id ON scim_groups (developer_id, external_id) WHERE deleted_at IS NULL;
CREATE INDEX scim_groups_list ON scim_groups (developer_id, created_at, id) WHERE deleted_at IS NULL;

CREATE TABLE scim_group_members (
  group_id      text NOT NULL REFERENCES scim_groups(id),
  user_id       text NOT NULL REFERENCES scim_users(id),
  developer_id  text NOT NULL,
  PRIMARY KEY (group_id, user_id)
);
CREATE INDEX scim_group_members_user ON scim_group_members (user_id);
