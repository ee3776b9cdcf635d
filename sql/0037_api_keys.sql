-- Several named API keys per developer (decisions §2, revised): `full` or `read`, each stored only as
-- SHA-256. A rotated key keeps answering until expires_at (its grace period), then is refused.
CREATE TABLE api_keys (
  id            text PRIMARY KEY,
  developer_id  text NOT NULL REFERENCES developers(id),
  name          text NOT NULL,
  scope         text NOT NULL CHECK (scope IN ('full', 'read')),
  key_hash      text NOT NULL UNIQUE,
  -- the key's first 12 characters; a key moved here from developers has only its mode's 8 until it is next used
  prefix        text NOT NULL,
  created_at    timestamptz NOT NULL,
  -- written at most once a minute per key (src/platform/Auth.ts), never on every request
  last_used_at  timestamptz,
  expires_at    timestamptz
);
CREATE INDEX api_keys_developer ON api_keys (developer_id, created_at DESC, id DESC);

-- Each developer's one key becomes its first full key, under the same hash: it keeps working.
INSERT INTO api_keys (id, developer_id, name, scope, key_hash, prefix, created_at)
SELECT 'key_' || substr(id, 5), id, 'Default', 'full', api_key_hash,
       CASE mode WHEN 'live' THEN 'sk_live_' ELSE 'sk_test_' END, created_at
FROM developers;
ALTER TABLE developers DROP COLUMN api_key_hash;

-- Instances cache resolved keys (sql/0011): a key deleted, rotated or changed drops its developer's
-- entries everywhere when the change commits. last_used_at and prefix writes notify nobody.
CREATE FUNCTION notify_api_key_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('developer_changes', CASE TG_OP WHEN 'DELETE' THEN OLD.developer_id ELSE NEW.developer_id END);
  RETURN NULL;
END
$$;
CREATE TRIGGER api_key_changed AFTER DELETE OR UPDATE OF key_hash, scope, expires_at ON api_keys
  FOR EACH ROW EXECUTE FUNCTION notify_api_key_change();
