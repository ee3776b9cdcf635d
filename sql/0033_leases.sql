-- One lease mechanism for every scheduled job (decisions §14, §15, §16; src/platform/Leases.ts):
-- a row per (kind, key) says who holds the work (a random token per claim), until when (renewed
-- while the work runs), how many times it was claimed since it last succeeded, and why the last
-- attempt failed. A claim is one INSERT ... ON CONFLICT DO UPDATE that succeeds only on a free or
-- expired lease, so two instances never hold one at once; once `attempts` reaches the caller's cap
-- the lease is `failed` and is never claimed again.
CREATE TABLE leases (
  kind        text NOT NULL,
  key         text NOT NULL,
  holder      text,
  lease_until timestamptz,
  attempts    integer NOT NULL DEFAULT 0,
  state       text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'failed')),
  last_error  text,
  updated_at  timestamptz NOT NULL,
  PRIMARY KEY (kind, key)
);
CREATE INDEX leases_held ON leases (kind, lease_until) WHERE lease_until IS NOT NULL;

-- The hand-written leases these replace (export jobs, anomaly passes); the billing close held a row lock.
ALTER TABLE compliance_exports DROP COLUMN lease_until;
ALTER TABLE compliance_exports DROP COLUMN attempts;
ALTER TABLE anomaly_runs DROP COLUMN lease_until;
