-- decisions §22.3, §22.9: the checked part of each fetched client ID metadata document, kept as a row so
-- any instance can serve any step of a flow. Fresh until `fresh_until` (Cache-Control within [5 min, 24 h]);
-- a copy whose refetch fails in transport is still used for 24 h past that. The raw document is never stored.
CREATE TABLE oauth_cimd_documents (
  url          text PRIMARY KEY,
  document     jsonb NOT NULL,
  fetched_at   timestamptz NOT NULL,
  fresh_until  timestamptz NOT NULL
);
CREATE INDEX oauth_cimd_documents_fresh ON oauth_cimd_documents (fresh_until);
