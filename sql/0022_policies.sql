-- Policy enforcement (decisions §13): built-in rules, Cedar policy sets, the decision log.
CREATE TABLE policies (
  id text PRIMARY KEY,
  developer_id text NOT NULL REFERENCES developers(id) ON DELETE CASCADE,
  name text NOT NULL,
  description text,
  effect text NOT NULL CHECK (effect IN ('allow', 'deny')),
  priority integer NOT NULL DEFAULT 0,
  agent_id text,
  principal_id text,
  scopes text[],
  time_of_day_start text,
  time_of_day_end text,
  days_of_week integer[],
  time_zone text NOT NULL DEFAULT 'UTC',
  actions text[] NOT NULL DEFAULT '{authorize}',
  principal_groups text[],
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX policies_developer ON policies (developer_id, priority DESC, created_at, id);

CREATE TABLE policy_bundles (
  id text PRIMARY KEY,
  developer_id text NOT NULL REFERENCES developers(id) ON DELETE CASCADE,
  format text NOT NULL CHECK (format IN ('cedar', 'rego')),
  version text NOT NULL,
  sha256 text NOT NULL,
  content bytea NOT NULL,
  policy_count integer NOT NULL,
  active boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL
);
CREATE INDEX policy_bundles_developer ON policy_bundles (developer_id, created_at DESC, id DESC);
CREATE UNIQUE INDEX policy_bundles_one_active ON policy_bundles (developer_id, format) WHERE active;

CREATE TABLE policy_decisions (
  id text PRIMARY KEY,
  developer_id text NOT NULL REFERENCES developers(id) ON DELETE CASCADE,
  effect text NOT NULL,
  action text NOT NULL,
  agent_id text,
  principal_id text,
  scopes text[] NOT NULL,
  policy_id text,
  determining_policies text[] NOT NULL,
  errors jsonb NOT NULL,
  grant_id text,
  created_at timestamptz NOT NULL
);
CREATE INDEX policy_decisions_developer ON policy_decisions (developer_id, created_at DESC, id DESC);

-- How a grant was approved (decisions §12, §13); another capability may add the same columns.
ALTER TABLE grants ADD COLUMN IF NOT EXISTS approval_method text;
ALTER TABLE grants ADD COLUMN IF NOT EXISTS policy_id text;

-- Every instance keeps each developer's parsed rules and Cedar set; a change notifies them all when
-- it commits (src/policies/Service.ts listens), as sql/0011 does for the API-key cache.
CREATE FUNCTION notify_policy_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('policy_changes', COALESCE(NEW.developer_id, OLD.developer_id));
  RETURN NULL;
END
$$;
CREATE TRIGGER policy_changed AFTER INSERT OR UPDATE OR DELETE ON policies FOR EACH ROW EXECUTE FUNCTION notify_policy_change();
CREATE TRIGGER policy_bundle_changed AFTER INSERT OR UPDATE OR DELETE ON policy_bundles FOR EACH ROW EXECUTE FUNCTION notify_policy_change();
