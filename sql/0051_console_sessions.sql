-- decisions §23: developer console sessions. The cookie holds a random token; only its SHA-256 is
-- stored, with the API key it was exchanged for encrypted under a key derived from the token itself
-- (so the table alone reveals no API key). A session belongs to one API key: it resolves only while that
-- key exists and is within its rotation grace (src/console/Sessions.ts joins api_keys and deletes a
-- session whose key is gone). No foreign key: api_keys stays free to be rebuilt by its own migrations.
CREATE TABLE console_sessions (
  id_hash        text PRIMARY KEY,
  developer_id   text NOT NULL REFERENCES developers(id),
  key_id         text NOT NULL,
  key_ciphertext text NOT NULL,
  csrf_token     text NOT NULL,
  created_at     timestamptz NOT NULL,
  expires_at     timestamptz NOT NULL
);
CREATE INDEX console_sessions_key ON console_sessions (key_id);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);
