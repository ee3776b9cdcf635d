-- Identity you can trust (decisions §12 revised, issue 33).

-- A first SSO sign-in links to a directory user only through a verified in-domain email equal to the
-- user's userName or primary email: the primary email is looked up by this index, not by scanning
-- every user's emails.
CREATE FUNCTION scim_primary_email(resource jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT lower(e->>'value')
  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(resource->'emails') = 'array' THEN resource->'emails' ELSE '[]'::jsonb END) e
  WHERE e->>'primary' = 'true'
  LIMIT 1
$$;
CREATE INDEX scim_users_primary_email ON scim_users (developer_id, scim_primary_email(resource)) WHERE deleted_at IS NULL;

-- Deprovisioning ends a person's principal sessions (and SSO sessions) in its transaction.
CREATE INDEX principal_sessions_principal ON principal_sessions (developer_id, principal_id);

-- tenantMode "entra-multi" accepts only these Entra tenant ids (the token's tid).
ALTER TABLE sso_connections ADD COLUMN allowed_tenants text[];
