-- DPDP erasure (decisions §21): audit hash version 2, erasure requests, the one-year log hold, and the
-- per-developer pseudonym keys.

-- hash version 2: salted digests of the principal and metadata are hashed instead of the values;
-- erasure deletes the salt and keeps the digests. Entries written before this migration stay version 1.
ALTER TABLE audit_log ADD COLUMN hash_version smallint NOT NULL DEFAULT 1;
ALTER TABLE audit_log ADD COLUMN pii_salt text;
ALTER TABLE audit_log ADD COLUMN principal_digest text;
ALTER TABLE audit_log ADD COLUMN metadata_digest text;
ALTER TABLE audit_log ADD COLUMN erased_at timestamptz;

-- the developer's pseudonym key (32 random bytes), sealed with the vault keys
CREATE TABLE dpdp_pseudonym_keys (
  developer_id text PRIMARY KEY REFERENCES developers(id),
  sealed_key   text NOT NULL,
  created_at   timestamptz NOT NULL
);

CREATE TABLE dpdp_erasures (
  id                     text PRIMARY KEY,          -- ER-<year>-<ULID>
  developer_id           text NOT NULL REFERENCES developers(id),
  pseudonym              text NOT NULL,
  reason                 text CHECK (reason IN ('principal_request', 'retention', 'withdrawal', 'other')),
  status                 text NOT NULL CHECK (status IN ('scheduled', 'processing', 'completed', 'cancelled')),
  scheduled_for          timestamptz,
  due_notified_at        timestamptz,
  submitted_at           timestamptz NOT NULL,
  expected_completion_by timestamptz NOT NULL,
  completed_at           timestamptz,
  held_until             timestamptz,
  counts                 jsonb NOT NULL DEFAULT '{}',
  -- the raw id is kept only while the erasure is scheduled (it is what will be erased), then nulled
  pending_principal_id   text
);
-- one live erasure per pseudonym: a repeat answers the same requestId
CREATE UNIQUE INDEX dpdp_erasures_pseudonym ON dpdp_erasures (developer_id, pseudonym) WHERE status <> 'cancelled';
CREATE INDEX dpdp_erasures_scheduled ON dpdp_erasures (scheduled_for) WHERE status = 'scheduled';

-- Rule 8(3): raw principal ids, metadata and salts of erased entries, sealed, readable by no API
CREATE TABLE dpdp_erasure_holds (
  erasure_id   text PRIMARY KEY REFERENCES dpdp_erasures(id),
  developer_id text NOT NULL REFERENCES developers(id),
  sealed       text NOT NULL,
  held_until   timestamptz NOT NULL,
  created_at   timestamptz NOT NULL
);
CREATE INDEX dpdp_erasure_holds_due ON dpdp_erasure_holds (held_until);

-- stored events are pseudonymised by their data's principalId
CREATE INDEX events_principal ON events (developer_id, (data->>'principalId'));
