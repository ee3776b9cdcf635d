/**
 * Every column that holds a principal id, and what erasure (decisions §21) does with it. The test
 * test/dpdp/erasure-map.test.ts reads the database's own columns and fails when a column that looks
 * like a principal id is neither here nor in NOT_PRINCIPAL_IDS: a new table cannot skip erasure.
 *
 *   delete        the rows go (credentials, sessions, nominations)
 *   pseudonymise  the id is replaced by the principal's `prn_` pseudonym (rows kept for accountability)
 */
export interface ErasureMapEntry {
  readonly table: string
  readonly column: string
  readonly action: "delete" | "pseudonymise"
}

export const ERASURE_MAP: ReadonlyArray<ErasureMapEntry> = [
  { table: "vault_credentials", column: "principal_id", action: "delete" },
  { table: "webauthn_credentials", column: "principal_id", action: "delete" },
  { table: "webauthn_user_handles", column: "principal_id", action: "delete" },
  { table: "webauthn_challenges", column: "principal_id", action: "delete" },
  { table: "webauthn_challenges", column: "user_id", action: "delete" },
  { table: "principal_sessions", column: "principal_id", action: "delete" },
  { table: "sso_sessions", column: "principal_id", action: "delete" },
  { table: "sso_identities", column: "principal_id", action: "delete" },
  { table: "dpdp_nominations", column: "data_principal_id", action: "delete" },
  { table: "dpdp_nominations", column: "nominee_principal_id", action: "delete" },
  { table: "grants", column: "principal_id", action: "pseudonymise" },
  { table: "auth_requests", column: "principal_id", action: "pseudonymise" },
  { table: "consent_bundles", column: "user_id", action: "pseudonymise" },
  { table: "vc_credentials", column: "principal_id", action: "pseudonymise" },
  { table: "dpdp_consent_records", column: "data_principal_id", action: "pseudonymise" },
  { table: "dpdp_consent_records", column: "grant_principal_id", action: "pseudonymise" },
  { table: "dpdp_grievances", column: "data_principal_id", action: "pseudonymise" },
  { table: "policy_decisions", column: "principal_id", action: "pseudonymise" },
  { table: "policies", column: "principal_id", action: "pseudonymise" },
  { table: "anomaly_alerts", column: "principal_id", action: "pseudonymise" },
  { table: "breach_intimated_principals", column: "principal_id", action: "pseudonymise" },
  { table: "breaches", column: "affected_principal_ids", action: "pseudonymise" },
  { table: "scim_users", column: "principal_id", action: "pseudonymise" },
  { table: "scim_users", column: "user_name", action: "pseudonymise" },
  { table: "audit_log", column: "principal_id", action: "pseudonymise" },
  { table: "events", column: "data", action: "pseudonymise" },
  { table: "dpdp_erasures", column: "pending_principal_id", action: "delete" }
]

/** columns whose names look like a principal id but hold none */
export const NOT_PRINCIPAL_IDS: ReadonlyArray<{ readonly table: string; readonly column: string; readonly why: string }> = [
  { table: "scim_settings", column: "principal_id_attribute", why: "the name of a SCIM attribute" },
  { table: "breach_intimations", column: "principal_count", why: "a count" },
  { table: "policies", column: "principal_groups", why: "directory group names" },
  { table: "dpdp_consent_records", column: "principal_type", why: "adult, child or guardian_of_pwd" },
  { table: "audit_log", column: "principal_digest", why: "a salted digest (hash version 2)" },
  { table: "scim_group_members", column: "user_id", why: "the scim_users row id, not the principal id" }
]

/** the jsonb columns known to carry principal ids inside (checked by the erasure test's scan) */
export const JSON_WITH_PRINCIPAL_IDS: ReadonlyArray<{ readonly table: string; readonly column: string }> = [
  { table: "events", column: "data" }
]
