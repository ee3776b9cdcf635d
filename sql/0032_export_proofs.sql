-- Detached proofs of streamed exports (decisions §15, revised): a streamed NDJSON/CSV body holds only
-- rows; its proof (digest, rows, anchor, last hash, detached JWS) is kept here once the stream ends
-- and served at GET /v1/compliance/exports/:exportId. Job results keep theirs here too (same id).
CREATE TABLE compliance_export_proofs (
  id text PRIMARY KEY,
  developer_id text NOT NULL REFERENCES developers(id) ON DELETE CASCADE,
  proof jsonb NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX compliance_export_proofs_developer ON compliance_export_proofs (developer_id, created_at DESC);
