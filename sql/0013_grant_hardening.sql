-- Hardening of grants and agents (decisions §19).

-- The agents a delegated grant descends from (root first), copied from the parent at delegation:
-- the online token check reads their status in the same query, so suspending an agent pauses every
-- token handed on from its grants. Empty for a grant that was not delegated.
ALTER TABLE grants ADD COLUMN ancestor_agent_ids text[] NOT NULL DEFAULT '{}';
WITH RECURSIVE chain AS (
  SELECT g.id, ARRAY[p.agent_id] AS ancestors
  FROM grants g JOIN grants p ON p.id = g.parent_grant_id
  WHERE p.parent_grant_id IS NULL
  UNION ALL
  SELECT g.id, c.ancestors || p.agent_id
  FROM chain c JOIN grants p ON p.id = c.id JOIN grants g ON g.parent_grant_id = c.id
)
UPDATE grants SET ancestor_agent_ids = chain.ancestors FROM chain WHERE grants.id = chain.id;

-- The redirect URIs an agent registered; when any, an authorize's redirectUri must be one of them.
ALTER TABLE agents ADD COLUMN redirect_uris text[] NOT NULL DEFAULT '{}';

-- An approved authorization request used by a consent bundle (decisions §12) is consumed: one bundle each.
ALTER TABLE auth_requests ADD COLUMN consumed_by_bundle_id text;
