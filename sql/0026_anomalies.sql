-- Anomaly detection (decisions §14): settings, rule overrides and custom rules, deduplicated alerts,
-- the inline rules' signals, network sightings (AD-003) and the detection fiber's claims.
CREATE TABLE anomaly_settings (
  developer_id text PRIMARY KEY REFERENCES developers(id) ON DELETE CASCADE,
  mode         text NOT NULL DEFAULT 'monitor' CHECK (mode IN ('off', 'monitor', 'enforce')),
  allow_list   text[] NOT NULL DEFAULT '{}',
  off_hours    jsonb,
  updated_at   timestamptz NOT NULL
);

-- A built-in rule has a row only once it is changed; a custom rule always has one. alert_channels
-- (channel ids) is read by sql/0027's anomaly_alert_channels when an alert is delivered.
CREATE TABLE anomaly_rules (
  developer_id   text NOT NULL REFERENCES developers(id) ON DELETE CASCADE,
  rule_id        text NOT NULL,
  built_in       boolean NOT NULL DEFAULT false,
  name           text,
  description    text,
  condition      jsonb,
  severity       text CHECK (severity IN ('low', 'medium', 'high', 'critical')),
  response       text CHECK (response IN ('alert', 'suspend_agent', 'revoke_grants')),
  threshold      jsonb,
  enabled        boolean,
  alert_channels text[] NOT NULL DEFAULT '{}',
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (developer_id, rule_id)
);

CREATE TABLE anomaly_alerts (
  id              text PRIMARY KEY,
  developer_id    text NOT NULL REFERENCES developers(id) ON DELETE CASCADE,
  rule_id         text NOT NULL,
  rule_name       text NOT NULL,
  severity        text NOT NULL CHECK (severity IN ('low', 'medium', 'high', 'critical')),
  status          text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'acknowledged', 'resolved')),
  -- the fingerprint is (developer_id, rule_id, subject)
  subject         text NOT NULL,
  agent_id        text,
  principal_id    text,
  occurrences     integer NOT NULL DEFAULT 1,
  first_seen_at   timestamptz NOT NULL,
  last_seen_at    timestamptz NOT NULL,
  -- the newest triggering fact counted (a windowed pass that sees nothing newer counts nothing)
  evidence_at     timestamptz NOT NULL,
  description     text NOT NULL,
  context         jsonb NOT NULL DEFAULT '{}'::jsonb,
  response        text NOT NULL DEFAULT 'none' CHECK (response IN ('none', 'suspended_agent', 'revoked_grants')),
  response_refs   text[] NOT NULL DEFAULT '{}',
  acknowledged_at timestamptz,
  resolved_at     timestamptz,
  note            text,
  created_at      timestamptz NOT NULL
);
-- one open or acknowledged alert per fingerprint; a resolved one leaves room for a new alert
CREATE UNIQUE INDEX anomaly_alerts_fingerprint ON anomaly_alerts (developer_id, rule_id, subject) WHERE status <> 'resolved';
CREATE INDEX anomaly_alerts_resolved ON anomaly_alerts (developer_id, rule_id, subject, evidence_at) WHERE status = 'resolved';
CREATE INDEX anomaly_alerts_list ON anomaly_alerts (developer_id, created_at DESC, id DESC);

-- Refusals counted by the inline rules (AD-002): short-lived, trimmed by the fiber.
CREATE TABLE anomaly_signals (
  developer_id text NOT NULL REFERENCES developers(id) ON DELETE CASCADE,
  agent_id     text NOT NULL,
  kind         text NOT NULL,
  created_at   timestamptz NOT NULL
);
CREATE INDEX anomaly_signals_window ON anomaly_signals (developer_id, kind, agent_id, created_at);

-- Networks (IPv4 /24, IPv6 /48) each agent's tokens were used from (AD-003). first_seen_at restarts
-- when a network comes back after 30 days unseen.
CREATE TABLE anomaly_networks (
  developer_id  text NOT NULL REFERENCES developers(id) ON DELETE CASCADE,
  agent_id      text NOT NULL,
  network       text NOT NULL,
  first_seen_at timestamptz NOT NULL,
  last_seen_at  timestamptz NOT NULL,
  PRIMARY KEY (developer_id, agent_id, network)
);
CREATE INDEX anomaly_networks_new ON anomaly_networks (developer_id, first_seen_at);

-- The detection fiber's claims: one row per developer, claimed FOR UPDATE SKIP LOCKED with a lease.
CREATE TABLE anomaly_runs (
  developer_id text PRIMARY KEY REFERENCES developers(id) ON DELETE CASCADE,
  next_run_at  timestamptz NOT NULL,
  last_run_at  timestamptz,
  lease_until  timestamptz
);
CREATE INDEX anomaly_runs_due ON anomaly_runs (next_run_at);

-- What the windowed rules read, by developer and time (no full scans)
CREATE INDEX IF NOT EXISTS grants_developer_revoked ON grants (developer_id, revoked_at) WHERE revoked_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS budget_transactions_developer_created ON budget_transactions (developer_id, created_at);
CREATE INDEX IF NOT EXISTS consent_bundles_active ON consent_bundles (developer_id) WHERE status = 'active';
