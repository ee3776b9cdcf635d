-- Consent bundles, their audit public keys (current and previous) and the entries devices sync back.

CREATE TABLE consent_bundles (
  id                   text PRIMARY KEY,
  developer_id         text NOT NULL REFERENCES developers(id),
  agent_id             text NOT NULL REFERENCES agents(id),
  user_id              text NOT NULL,
  scopes               text[] NOT NULL,
  grant_id             text NOT NULL REFERENCES grants(id),
  offline_ttl_seconds  integer NOT NULL,
  offline_expires_at   timestamptz NOT NULL,
  status               text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
  revoked_at           timestamptz,
  checkpoint_at        bigint NOT NULL,
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL,
  last_sync_at         timestamptz,
  audit_entry_count    integer NOT NULL DEFAULT 0,
  -- the chain head: highest stored seq and its hash (seq 0 and the genesis value when none)
  head_seq             bigint NOT NULL DEFAULT 0,
  head_hash            text NOT NULL DEFAULT '0000000000000000'
);
CREATE INDEX consent_bundles_list ON consent_bundles (developer_id, created_at DESC, id DESC);

-- Every audit key a bundle has had: entries signed before a refresh still verify after it.
CREATE TABLE consent_bundle_audit_keys (
  bundle_id      text NOT NULL REFERENCES consent_bundles(id),
  public_key_pem text NOT NULL,
  created_at     timestamptz NOT NULL,
  PRIMARY KEY (bundle_id, public_key_pem)
);

-- Keyed by (bundle, seq): the idempotency key of the interface, and the only index a sync maintains.
-- No foreign key: every insert runs under the bundle's row lock, and a per-row trigger check would
-- cost more than the insert itself on a 1000-entry batch.
CREATE TABLE offline_audit_entries (
  bundle_id    text NOT NULL,
  seq          bigint NOT NULL,
  developer_id text NOT NULL,
  timestamp    text NOT NULL,
  action       text NOT NULL,
  agent_did    text NOT NULL,
  grant_id     text NOT NULL,
  scopes       jsonb NOT NULL,
  result       text NOT NULL,
  metadata     text,
  prev_hash    text NOT NULL,
  hash         text NOT NULL,
  signature    text NOT NULL,
  received_at  timestamptz NOT NULL,
  PRIMARY KEY (bundle_id, seq)
);
