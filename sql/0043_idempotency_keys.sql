-- Idempotent retries (decisions §2, revised): the first answer to a POST with an Idempotency-Key,
-- kept 24 h per developer and key. `committed` is set inside the operation's own transaction, so a
-- crash between its commit and the answer being stored can never let a retry run it a second time.
CREATE TABLE idempotency_keys (
  developer_id text NOT NULL,
  key text NOT NULL,
  request_hash text NOT NULL,
  status text NOT NULL CHECK (status IN ('running', 'done')),
  committed boolean NOT NULL DEFAULT false,
  locked_until timestamptz NOT NULL,
  response_status integer,
  response_headers jsonb,
  response_body text,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (developer_id, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
