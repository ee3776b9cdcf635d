-- Developers, the audit chain, the event outbox and webhook delivery rows.

CREATE TABLE developers (
  id             text PRIMARY KEY,
  name           text NOT NULL,
  email          text UNIQUE,
  mode           text NOT NULL CHECK (mode IN ('live', 'sandbox')),
  plan           text NOT NULL DEFAULT 'free' CHECK (plan IN ('free', 'pro', 'enterprise')),
  api_key_hash   text NOT NULL UNIQUE,
  fido_required  boolean NOT NULL DEFAULT false,
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL
);

-- The per-developer hash chain. audit_heads holds the head of each chain; appending locks that row,
-- so concurrent writers on any number of instances append one after another and the chain never forks.
CREATE TABLE audit_heads (
  developer_id text PRIMARY KEY REFERENCES developers(id),
  seq          bigint NOT NULL,
  hash         text
);

CREATE TABLE audit_log (
  id           text PRIMARY KEY,
  developer_id text NOT NULL REFERENCES developers(id),
  seq          bigint NOT NULL,
  agent_id     text,
  agent_did    text,
  grant_id     text,
  principal_id text,
  action       text NOT NULL,
  metadata     jsonb NOT NULL DEFAULT '{}'::jsonb,
  status       text NOT NULL,
  timestamp    text NOT NULL,
  prev_hash    text,
  hash         text NOT NULL,
  created_at   timestamptz NOT NULL,
  UNIQUE (developer_id, seq)
);
CREATE INDEX audit_log_list ON audit_log (developer_id, created_at DESC, id DESC);

-- Outbox: an event and its delivery rows are written in the transaction of the change they report.
CREATE TABLE events (
  id           text PRIMARY KEY,
  developer_id text NOT NULL REFERENCES developers(id),
  type         text NOT NULL,
  data         jsonb NOT NULL,
  created_at   timestamptz NOT NULL
);
CREATE INDEX events_developer ON events (developer_id, created_at DESC);

CREATE TABLE webhook_endpoints (
  id                text PRIMARY KEY,
  developer_id      text NOT NULL REFERENCES developers(id),
  url               text NOT NULL,
  events            text[] NOT NULL,
  secret_ciphertext text NOT NULL,
  created_at        timestamptz NOT NULL,
  deleted_at        timestamptz
);
CREATE INDEX webhook_endpoints_developer ON webhook_endpoints (developer_id) WHERE deleted_at IS NULL;

CREATE TABLE webhook_deliveries (
  id                   text PRIMARY KEY,
  endpoint_id          text NOT NULL REFERENCES webhook_endpoints(id),
  event_id             text NOT NULL REFERENCES events(id),
  developer_id         text NOT NULL REFERENCES developers(id),
  status               text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts             integer NOT NULL DEFAULT 0,
  max_attempts         integer NOT NULL,
  next_attempt_at      timestamptz NOT NULL,
  lease_until          timestamptz,
  last_error           text,
  last_response_status integer,
  created_at           timestamptz NOT NULL,
  delivered_at         timestamptz,
  updated_at           timestamptz NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_list ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
