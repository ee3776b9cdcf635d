/**
 * The `data` of a test send (POST /v1/webhooks/:id/test): for each event type a sample with the
 * fields a real event of that type carries (openapi/Groups.ts lists them), filled with values that
 * are plainly samples (`*_sample` ids), so a receiver's handler for the type can be exercised
 * without anything having happened.
 */
import type { EventType } from "../platform/Events.ts"

const AT = "2026-01-01T00:00:00.000Z"
const grantId = "grnt_sample"
const agentId = "ag_sample"
const principalId = "user_sample"
const scopes = ["calendar:read"]
const breachId = "brch_sample"
const credentialId = "cred_sample"

export const SAMPLE_DATA: Record<EventType, Record<string, unknown>> = {
  "grant.created": { grantId, agentId, principalId, scopes, expiresAt: AT },
  "grant.revoked": { grantId, cascade: false },
  "token.issued": { tokenId: "tok_sample", grantId, agentId, principalId, scopes, expiresAt: AT },
  "dpdp.breach.recorded": { breachId, status: "open", awareAt: AT, affectedCount: 1, boardDetailedReportDueAt: AT },
  "dpdp.breach.updated": { breachId, status: "initial_intimated", previousStatus: "open" },
  "dpdp.breach.principal_intimation_due": { breachId, awareAt: AT, affectedCount: 1, due: "without_delay" },
  "dpdp.breach.board_report_due": { breachId, stage: "approaching", overdue: false, boardDetailedReportDueAt: AT },
  "dpdp.consent_notice.registered": { noticeId: "notice-sample", version: "1", language: "en", id: "notice_sample" },
  "dpdp.consent_notice.retired": { noticeId: "notice-sample", version: "1", languages: ["en"], retiredAt: AT },
  "dpdp.consent.created": { recordId: "crec_sample", grantId, grantIds: [grantId], dataPrincipalId: principalId, consentMethod: "explicit", automatic: false },
  "dpdp.consent.withdrawn": { recordId: "crec_sample", grantRevoked: true, dataDeleted: false, revokedGrantIds: [grantId], grantsLeftActive: [], withdrawnBy: "developer" },
  "dpdp.grievance.filed": { grievanceId: "grv_sample", referenceNumber: "GRV-2026-SAMPLE", type: "access", dataPrincipalId: principalId },
  "dpdp.grievance.updated": { grievanceId: "grv_sample", status: "acknowledged", previousStatus: "submitted" },
  "dpdp.grievance.due": { grievanceId: "grv_sample", referenceNumber: "GRV-2026-SAMPLE", stage: "target_missed", dueAt: AT },
  "dpdp.nomination.updated": { nominationId: "nom_sample", change: "set" },
  "dpdp.erasure.scheduled": { requestId: "ER-2026-SAMPLE", pseudonym: "prn_SAMPLE", scheduledFor: AT },
  "dpdp.erasure.due": { requestId: "ER-2026-SAMPLE", pseudonym: "prn_SAMPLE", scheduledFor: AT },
  "dpdp.erasure.completed": { requestId: "ER-2026-SAMPLE", dataPrincipalId: "prn_SAMPLE", recordsErased: 1, grantsRevoked: 1, status: "completed", heldUntil: AT },
  "dpdp.erasure.hold_purged": { requestId: "ER-2026-SAMPLE" },
  "consent_bundle.created": { bundleId: "bundle_sample", agentId, userId: principalId, scopes, grantId, offlineExpiresAt: AT },
  "consent_bundle.revoked": { bundleId: "bundle_sample", grantId, revokedAt: AT },
  "vault.credential.exchanged": { credentialId, service: "sample", principalId, grantId, agentId, tokenId: "tok_sample", refreshed: false },
  "budget.threshold": { grantId, pct: 80 },
  "budget.exhausted": { grantId },
  "scim.user.provisioned": { scimUserId: "scim_sample", principalId },
  "scim.user.updated": { scimUserId: "scim_sample", changedAttributes: ["displayName"] },
  "scim.user.deprovisioned": { scimUserId: "scim_sample", principalId, revokedGrants: 0 },
  "scim.group.updated": { groupId: "grp_sample", added: ["scim_sample"], removed: [] },
  "vc.issued": { credentialId, grantId, agentId, format: "vc+jwt", expiresAt: AT },
  "vc.revoked": { credentialId, grantId, statusPurpose: "revocation", statusSet: true },
  "sd-jwt.issued": { credentialId, grantId, agentId, format: "dc+sd-jwt", expiresAt: AT },
  "sd-jwt.presented": { credentialId, grantId, disclosed: ["email"] },
  "principal.grant_revoked": { grantId },
  "fido.registered": { id: "pkc_sample" },
  "fido.assertion": { id: "pkc_sample", authRequestId: "areq_sample", grantId },
  "fido.credential.deleted": { id: "pkc_sample" },
  "policy.denied": { decisionId: "pdec_sample", action: "authorize", agentId, principalId, policyId: "pol_sample" },
  "sso.login": { connectionId: "sso_sample", protocol: "oidc", sessionId: "psess_sample" },
  "sso.connection.created": { connectionId: "sso_sample", name: "Sample", protocol: "oidc" },
  "sso.connection.updated": { connectionId: "sso_sample", changed: ["name"] },
  "sso.connection.deleted": { connectionId: "sso_sample" },
  "billing.quota.threshold": { meter: "authorizations", pct: 80, period: "2026-01" },
  "billing.invoice.created": { invoiceId: "inv_sample", period: "2026-01" },
  "billing.subscription.updated": { plan: "pro", status: "active" },
  "anomaly.detected": { alertId: "alert_sample", ruleId: "rule_sample", severity: "medium", agentId, occurrences: 1 },
  "anomaly.auto_revoked": { alertId: "alert_sample", revokedGrants: [grantId] },
  "resource_server.created": { resourceServerId: "rs_sample" },
  "resource_server.updated": { resourceServerId: "rs_sample", changed: ["name"] },
  "resource_server.deleted": { resourceServerId: "rs_sample", grantsRevoked: 0 },
  "oauth.client.registered": { agentId: "ag_sample", origin: "dcr" }
}
