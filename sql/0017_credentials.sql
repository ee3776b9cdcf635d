-- Verifiable credentials and their status lists (decisions §18).
--
-- Status lists come in pairs (a revocation list and a suspension list) that share their indices, so
-- one random index places a credential in both, and the IETF token status list view of a pair carries
-- both purposes in two bits. `bits` is the W3C bitstring (index 0 = the most significant bit of the
-- first byte); `version` grows with every change, so a signed list is made at most once per change.
CREATE TABLE vc_status_lists (
  id text PRIMARY KEY,
  developer_id text NOT NULL REFERENCES developers(id) ON DELETE CASCADE,
  purpose text NOT NULL CHECK (purpose IN ('revocation', 'suspension')),
  partner_id text NOT NULL,
  size integer NOT NULL,
  bits bytea NOT NULL,
  version integer NOT NULL DEFAULT 0,
  open boolean NOT NULL DEFAULT true,
  signed jsonb,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
-- one open pair per developer: indices are drawn from it until it is 90 % full
CREATE UNIQUE INDEX vc_status_lists_open ON vc_status_lists (developer_id, purpose) WHERE open;

-- Indices used per list, counted in shards so concurrent issuances do not queue on one row.
CREATE TABLE vc_status_counters (
  list_id text NOT NULL REFERENCES vc_status_lists(id) ON DELETE CASCADE,
  shard smallint NOT NULL,
  used integer NOT NULL DEFAULT 0,
  PRIMARY KEY (list_id, shard)
);

CREATE TABLE vc_credentials (
  id text PRIMARY KEY,
  uuid text NOT NULL UNIQUE,
  developer_id text NOT NULL REFERENCES developers(id) ON DELETE CASCADE,
  grant_id text NOT NULL REFERENCES grants(id) ON DELETE CASCADE,
  agent_id text NOT NULL,
  principal_id text NOT NULL,
  format text NOT NULL CHECK (format IN ('vc+jwt', 'dc+sd-jwt')),
  credential text NOT NULL,
  kid text NOT NULL,
  revocation_list_id text NOT NULL REFERENCES vc_status_lists(id),
  suspension_list_id text NOT NULL REFERENCES vc_status_lists(id),
  status_idx integer NOT NULL,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
  suspended boolean NOT NULL DEFAULT false,
  issued_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz,
  UNIQUE (revocation_list_id, status_idx)
);
CREATE INDEX vc_credentials_developer ON vc_credentials (developer_id, issued_at DESC, id DESC);
CREATE INDEX vc_credentials_grant ON vc_credentials (grant_id);
CREATE INDEX vc_credentials_agent ON vc_credentials (agent_id);
CREATE INDEX vc_credentials_kid ON vc_credentials (kid, expires_at);

-- Sets (or clears) the bits of the given indices, W3C order: index i is bit 7 - i % 8 of byte i / 8
-- counted from the least significant bit, which is set_bit's numbering.
CREATE FUNCTION vc_set_bits(b bytea, idx integer[], v integer) RETURNS bytea LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE i integer;
BEGIN
  FOREACH i IN ARRAY idx LOOP
    b := set_bit(b, (i / 8) * 8 + (7 - i % 8), v);
  END LOOP;
  RETURN b;
END
$$;

-- Every instance caches status lists. A change commits a notification, so each drops its copy at
-- once (src/credentials/Service.ts listens; the payload is the list's id and its partner's).
CREATE FUNCTION notify_vc_status_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('vc_status_changes', NEW.id || ' ' || NEW.partner_id);
  RETURN NULL;
END
$$;
CREATE TRIGGER vc_status_changed AFTER UPDATE ON vc_status_lists FOR EACH ROW
  WHEN (OLD.version IS DISTINCT FROM NEW.version) EXECUTE FUNCTION notify_vc_status_change();
