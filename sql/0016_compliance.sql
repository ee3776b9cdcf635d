-- Compliance export jobs (decisions §15). A job is claimed with FOR UPDATE SKIP LOCKED and a lease,
-- so one instance runs it; a crashed instance's job comes back when its lease runs out and is run
-- again from the start (its partial chunks are replaced). The result is kept as ordered chunks, so
-- neither writing nor downloading it holds the whole file in memory.
CREATE TABLE compliance_exports (
  id           text PRIMARY KEY,
  developer_id text NOT NULL REFERENCES developers(id),
  kind         text NOT NULL CHECK (kind IN ('evidence-pack', 'grants', 'audit', 'dpdp')),
  format       text NOT NULL,
  params       jsonb NOT NULL,
  status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'running', 'complete', 'failed')),
  attempts     integer NOT NULL DEFAULT 0,
  lease_until  timestamptz,
  row_counts   jsonb,
  sha256       text,
  signature    text,
  bytes        bigint,
  chunks       integer,
  error        text,
  created_at   timestamptz NOT NULL,
  completed_at timestamptz,
  expires_at   timestamptz,
  updated_at   timestamptz NOT NULL
);
CREATE INDEX compliance_exports_due ON compliance_exports (created_at) WHERE status IN ('pending', 'running');
CREATE INDEX compliance_exports_developer ON compliance_exports (developer_id, created_at DESC);
CREATE INDEX compliance_exports_expired ON compliance_exports (expires_at) WHERE status = 'complete';

CREATE TABLE compliance_export_chunks (
  export_id text NOT NULL REFERENCES compliance_exports(id) ON DELETE CASCADE,
  n         integer NOT NULL,
  data      bytea NOT NULL,
  PRIMARY KEY (export_id, n)
);
