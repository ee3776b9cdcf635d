/**
 * Every migration, embedded as text so the single binary carries them (fromGlob does not see .sql
 * under Bun). Add a new file here with the next number.
 */
// @ts-ignore text import
import m0001 from "./0001_platform.sql" with { type: "text" }
// @ts-ignore text import
import m0002 from "./0002_core.sql" with { type: "text" }
// @ts-ignore text import
import m0003 from "./0003_consent_bundles.sql" with { type: "text" }
// @ts-ignore text import
import m0004 from "./0004_vault.sql" with { type: "text" }
// @ts-ignore text import
import m0005 from "./0005_breaches.sql" with { type: "text" }
// @ts-ignore text import
import m0006 from "./0006_budgets.sql" with { type: "text" }
// @ts-ignore text import
import m0007 from "./0007_domains_passkeys.sql" with { type: "text" }
// @ts-ignore text import
import m0008 from "./0008_core_extra.sql" with { type: "text" }
// @ts-ignore text import
import m0009 from "./0009_webhooks.sql" with { type: "text" }
// @ts-ignore text import
import m0010 from "./0010_vault_refresh_lease.sql" with { type: "text" }
// @ts-ignore text import
import m0011 from "./0011_developer_changes.sql" with { type: "text" }
// @ts-ignore text import
import m0012 from "./0012_audit_key_generation.sql" with { type: "text" }
// @ts-ignore text import
import m0013 from "./0013_grant_hardening.sql" with { type: "text" }
// @ts-ignore text import
import m0014 from "./0014_hardening_data.sql" with { type: "text" }
// @ts-ignore text import
import m0015 from "./0015_directory.sql" with { type: "text" }
// @ts-ignore text import
import m0016 from "./0016_compliance.sql" with { type: "text" }
// @ts-ignore text import
import m0017 from "./0017_credentials.sql" with { type: "text" }
// @ts-ignore text import
import m0018 from "./0018_principals_passkeys.sql" with { type: "text" }
// @ts-ignore text import
import m0019 from "./0019_webhook_rotation.sql" with { type: "text" }
// @ts-ignore text import
import m0020 from "./0020_operator_gauges.sql" with { type: "text" }
// @ts-ignore text import
import m0022 from "./0022_policies.sql" with { type: "text" }
// @ts-ignore text import
import m0023 from "./0023_billing.sql" with { type: "text" }
// @ts-ignore text import
import m0024 from "./0024_sso.sql" with { type: "text" }
// @ts-ignore text import
import m0025 from "./0025_sso_saml.sql" with { type: "text" }
// @ts-ignore text import
import m0026 from "./0026_anomalies.sql" with { type: "text" }
// @ts-ignore text import
import m0027 from "./0027_anomaly_channels.sql" with { type: "text" }
// @ts-ignore text import
import m0030 from "./0030_sso_identity_trust.sql" with { type: "text" }
// @ts-ignore text import
import m0032 from "./0032_export_proofs.sql" with { type: "text" }
// @ts-ignore text import
import m0033 from "./0033_leases.sql" with { type: "text" }
// @ts-ignore text import
import m0034 from "./0034_plan_history.sql" with { type: "text" }
// @ts-ignore text import
import m0035 from "./0035_grant_approval.sql" with { type: "text" }
// @ts-ignore text import
import m0037 from "./0037_api_keys.sql" with { type: "text" }
// @ts-ignore text import
import m0038 from "./0038_webhook_pause.sql" with { type: "text" }
// @ts-ignore text import
import m0039 from "./0039_live_meter_counts.sql" with { type: "text" }
// @ts-ignore text import
import m0040 from "./0040_dpdp_consent.sql" with { type: "text" }
// @ts-ignore text import
import m0041 from "./0041_dpdp_grievances.sql" with { type: "text" }
// @ts-ignore text import
import m0042 from "./0042_dpdp_nominations.sql" with { type: "text" }
// @ts-ignore text import
import m0043 from "./0043_idempotency_keys.sql" with { type: "text" }
// @ts-ignore text import
import m0044 from "./0044_dpdp_automatic_consent.sql" with { type: "text" }
// @ts-ignore text import
import m0045 from "./0045_dpdp_erasure.sql" with { type: "text" }
// @ts-ignore text import
import m0046 from "./0046_dpdp_retention.sql" with { type: "text" }
// @ts-ignore text import
import m0047 from "./0047_oauth.sql" with { type: "text" }
// @ts-ignore text import
import m0050 from "./0050_event_stream.sql" with { type: "text" }
// @ts-ignore text import
import m0051 from "./0051_console_sessions.sql" with { type: "text" }
// @ts-ignore text import
import m0052 from "./0052_oauth_cimd.sql" with { type: "text" }
// @ts-ignore text import
import m0054 from "./0054_registration_flood.sql" with { type: "text" }
// @ts-ignore text import
import m0055 from "./0055_audit_head_prev.sql" with { type: "text" }

export const migrations: Record<string, string> = {
  "0001_platform": m0001,
  "0002_core": m0002,
  "0003_consent_bundles": m0003,
  "0004_vault": m0004,
  "0005_breaches": m0005,
  "0006_budgets": m0006,
  "0007_domains_passkeys": m0007,
  "0008_core_extra": m0008,
  "0009_webhooks": m0009,
  "0010_vault_refresh_lease": m0010,
  "0011_developer_changes": m0011,
  "0012_audit_key_generation": m0012,
  "0013_grant_hardening": m0013,
  "0014_hardening_data": m0014,
  "0015_directory": m0015,
  "0016_compliance": m0016,
  "0017_credentials": m0017,
  "0018_principals_passkeys": m0018,
  "0019_webhook_rotation": m0019,
  "0020_operator_gauges": m0020,
  "0022_policies": m0022,
  "0023_billing": m0023,
  "0024_sso": m0024,
  "0025_sso_saml": m0025,
  "0026_anomalies": m0026,
  "0027_anomaly_channels": m0027,
  "0030_sso_identity_trust": m0030,
  "0032_export_proofs": m0032,
  "0033_leases": m0033,
  "0034_plan_history": m0034,
  "0035_grant_approval": m0035,
  "0037_api_keys": m0037,
  "0038_webhook_pause": m0038,
  "0039_live_meter_counts": m0039,
  "0040_dpdp_consent": m0040,
  "0041_dpdp_grievances": m0041,
  "0042_dpdp_nominations": m0042,
  "0043_idempotency_keys": m0043,
  "0044_dpdp_automatic_consent": m0044,
  "0045_dpdp_erasure": m0045,
  "0046_dpdp_retention": m0046,
  "0047_oauth": m0047,
  "0050_event_stream": m0050,
  "0051_console_sessions": m0051,
  "0052_oauth_cimd": m0052,
  "0054_registration_flood": m0054,
  "0055_audit_head_prev": m0055
}
