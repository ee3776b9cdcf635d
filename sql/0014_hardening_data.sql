-- Derived counts kept on the row (decisions §19): a breach list reads them instead of recounting
-- up to 10,000 listed ids per breach. Maintained in the transaction of every intimation.
ALTER TABLE breaches
  ADD COLUMN intimated_count   integer NOT NULL DEFAULT 0,
  ADD COLUMN pending_count     integer NOT NULL DEFAULT 0,
  ADD COLUMN last_intimated_at timestamptz;

UPDATE breaches b SET
  intimated_count = (SELECT count(*)::int FROM breach_intimated_principals p WHERE p.breach_id = b.id),
  pending_count = (SELECT count(*)::int FROM unnest(b.affected_principal_ids) AS l(pid)
                     WHERE NOT EXISTS (SELECT 1 FROM breach_intimated_principals p WHERE p.breach_id = b.id AND p.principal_id = l.pid)),
  last_intimated_at = (SELECT max(intimated_at) FROM breach_intimations i WHERE i.breach_id = b.id);

-- Fair webhook claims (decisions §19) in bounded work: developers with pending deliveries are
-- skipped through, each endpoint's due rows read as a range, in-flight rows found by their lease.
CREATE INDEX webhook_deliveries_pending_developer ON webhook_deliveries (developer_id, next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_pending_endpoint ON webhook_deliveries (endpoint_id, next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (lease_until) WHERE status = 'pending' AND lease_until IS NOT NULL;

-- Filtered list pages read only the rows they return (decisions §19): each filter a list offers
-- by id has an index in the list's order, so a rare value does not scan the developer's history.
CREATE INDEX audit_log_agent ON audit_log (developer_id, agent_id, created_at DESC, id DESC) WHERE agent_id IS NOT NULL;
CREATE INDEX audit_log_grant ON audit_log (developer_id, grant_id, created_at DESC, id DESC) WHERE grant_id IS NOT NULL;
CREATE INDEX audit_log_principal ON audit_log (developer_id, principal_id, created_at DESC, id DESC) WHERE principal_id IS NOT NULL;
CREATE INDEX audit_log_action ON audit_log (developer_id, action, created_at DESC, id DESC);
CREATE INDEX grants_agent ON grants (developer_id, agent_id, created_at DESC, id DESC);
CREATE INDEX grants_principal ON grants (developer_id, principal_id, created_at DESC, id DESC);
CREATE INDEX consent_bundles_agent ON consent_bundles (developer_id, agent_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_status ON webhook_deliveries (endpoint_id, status, created_at DESC, id DESC);
