-- decisions §20: every grant records how it was approved (approval_method) and the policy that
-- approved it (policy_id, null when none). Grants made before this were stamped only when a policy
-- or SSO approved them; the others get the method their authorization request shows (a passkey,
-- an SSO sign-in, a person's consent), else "sandbox" (a sandbox developer's automatic approval)
-- or "developer" (made by the application: a bundle without consent, a delegation).
UPDATE grants g SET approval_method = COALESCE(
  (SELECT CASE WHEN r.fido_verified_at IS NOT NULL THEN 'passkey'
               WHEN r.sso_session_id IS NOT NULL THEN 'sso'
               WHEN d.mode = 'sandbox' THEN 'sandbox'
               ELSE 'consent' END
   FROM auth_requests r JOIN developers d ON d.id = r.developer_id
   WHERE r.grant_id = g.id LIMIT 1),
  (SELECT 'consent' FROM auth_requests r WHERE r.consumed_by_bundle_id IN (SELECT b.id FROM consent_bundles b WHERE b.grant_id = g.id) LIMIT 1),
  'developer')
WHERE g.approval_method IS NULL;

ALTER TABLE grants ADD CONSTRAINT grants_approval_method_known
  CHECK (approval_method IN ('consent', 'sso', 'passkey', 'policy', 'developer', 'sandbox'));
