-- A consent bundle's audit keys in the order they were issued: sync verifies against the current
-- and the previous key only (decisions §5), and a create and a refresh in the same millisecond
-- must still be told apart.
ALTER TABLE consent_bundle_audit_keys ADD COLUMN generation bigint GENERATED ALWAYS AS IDENTITY;
CREATE INDEX consent_bundle_audit_keys_generation ON consent_bundle_audit_keys (bundle_id, generation DESC);
