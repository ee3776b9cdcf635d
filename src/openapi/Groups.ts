/**
 * The document's groups (OpenAPI tags) with readable names and what each is for, the event
 * catalogue (every event type with its `data` fields) and the vault's accepted scope forms, and
 * the security schemes. Read by Document.ts.
 */
import { EVENT_TYPES, type EventType } from "../platform/Events.ts"
import { acceptedScopes } from "../vault/Service.ts"

/** each event type's `data` fields (ids, statuses and times only; never breach text or principal lists) */
export const EVENT_DATA: Record<EventType, string> = {
  "grant.created": "`grantId`, `agentId`, `principalId`, `scopes`, `expiresAt`, `approvalMethod` (`consent`, `sso`, `passkey`, `policy`, `developer` or `sandbox`), `policyId` (the approving policy, else null)",
  "grant.revoked": "`grantId`, `cascade` (true when descendants were revoked by the same call)",
  "token.issued": "`tokenId` (the token's jti), `grantId`, `agentId`, `principalId`, `scopes`, `expiresAt`",
  "dpdp.breach.recorded": "`breachId`, `status` (`open`), `awareAt`, `affectedCount`, `boardDetailedReportDueAt`",
  "dpdp.breach.updated": "`breachId`, `status`, `previousStatus` (sent when the status changes)",
  "dpdp.breach.principal_intimation_due": "`breachId`, `awareAt`, `affectedCount`, `due` (`without_delay`)",
  "dpdp.breach.board_report_due": "`breachId`, `stage` (`approaching` or `overdue`), `overdue`, `boardDetailedReportDueAt`",
  "dpdp.consent_notice.registered": "`noticeId`, `version`, `language`, `id` (the `notice_` id)",
  "dpdp.consent_notice.retired": "`noticeId`, `version`, `languages`, `retiredAt`",
  "dpdp.consent.created": "`recordId`, `grantId`, `grantIds`, `dataPrincipalId`, `consentMethod`, `automatic`",
  "dpdp.consent.withdrawn": "`recordId`, `grantRevoked`, `dataDeleted`, `revokedGrantIds`, `grantsLeftActive`, `withdrawnBy` (never the reason)",
  "dpdp.grievance.filed": "`grievanceId`, `referenceNumber`, `type`, `dataPrincipalId`",
  "dpdp.grievance.updated": "`grievanceId`, `status`, `previousStatus`",
  "dpdp.grievance.due": "`grievanceId`, `referenceNumber`, `stage` (`target_missed`, `statutory_approaching` or `statutory_overdue`), `dueAt`",
  "dpdp.nomination.updated": "`nominationId`, `change` (`set` or `removed`)",
  "dpdp.erasure.scheduled": "`requestId`, `pseudonym`, `scheduledFor` (decisions §21, Rule 8(2))",
  "dpdp.erasure.due": "`requestId`, `pseudonym`, `scheduledFor`: 48 hours before a scheduled erasure runs",
  "dpdp.erasure.completed": "`requestId`, `dataPrincipalId` (the pseudonym), `recordsErased`, `grantsRevoked`, `status`, `heldUntil`",
  "dpdp.erasure.hold_purged": "`requestId`: the sealed one-year log hold of an erasure was purged",
  "consent_bundle.created": "`bundleId`, `agentId`, `userId`, `scopes`, `grantId`, `offlineExpiresAt`",
  "consent_bundle.revoked": "`bundleId`, `grantId`, `revokedAt`",
  "vault.credential.exchanged": "`credentialId`, `service`, `principalId`, `grantId`, `agentId`, `tokenId`, `refreshed`",
  "budget.threshold": "`grantId`, `pct` (the share spent that was crossed: 50 or 80)",
  "budget.exhausted": "`grantId`",
  "vc.issued": "`credentialId`, `grantId`, `agentId`, `format` (`vc+jwt`), `expiresAt`",
  "vc.revoked": "`credentialId`, `grantId`, `statusPurpose` (`revocation` or `suspension`), `statusSet` (true when the bit was set, false when cleared)",
  "sd-jwt.issued": "`credentialId`, `grantId`, `agentId`, `format` (`dc+sd-jwt`), `expiresAt`",
  "sd-jwt.presented": "`credentialId`, `grantId`, `disclosed` (the names of the disclosed claims, never their values)",
  "principal.grant_revoked": "`grantId` (revoked by the person from their permissions page or session)",
  "fido.registered": "`id` (the passkey credential's id)",
  "fido.assertion": "`id` (the passkey used), `authRequestId`, `grantId` (the grant the assertion approved)",
  "fido.credential.deleted": "`id` (the passkey removed)",
  "policy.denied": "`decisionId` (the `pdec_` decision-log entry), `action` (where: authorize, delegate, bundle, refresh, vault exchange), `agentId`, `principalId`, `policyId` (the deciding policy, when one decided)",
  "scim.user.provisioned": "`scimUserId`, `principalId`",
  "sso.login": "`connectionId`, `protocol` (`oidc` or `saml`), `sessionId` (a person signed in through SSO)",
  "sso.connection.created": "`connectionId`, `name`, `protocol`",
  "sso.connection.updated": "`connectionId`, `changed` (the names of the fields that changed)",
  "sso.connection.deleted": "`connectionId`",
  "scim.user.updated": "`scimUserId`, `changedAttributes` (attribute names only, never their values)",
  "scim.user.deprovisioned": "`scimUserId`, `principalId`, `revokedGrants` (how many of the principal's grants were revoked)",
  "scim.group.updated": "`groupId`, `added` and `removed` (SCIM user ids)",
  "billing.quota.threshold": "`meter` (`authorizations` or `token_exchanges`), `pct` (80 or 100), `period` (`YYYY-MM`); once per period",
  "billing.invoice.created": "`invoiceId`, `period` (`YYYY-MM`)",
  "billing.subscription.updated": "`plan`, `status`",
  "anomaly.detected": "`alertId`, `ruleId`, `severity`, `agentId` (null for a developer-wide rule), `occurrences` (1 when the alert opens, then one more per further trigger); also delivered to your anomaly channels (`/v1/anomaly/channels`)",
  "anomaly.auto_revoked": "`alertId`, `revokedGrants` (ids of the grants an enforce-mode response revoked, descendants included)",
  "resource_server.created": "`resourceServerId`",
  "resource_server.updated": "`resourceServerId`, `changed` (the names of the fields that changed)",
  "resource_server.deleted": "`resourceServerId`, `grantsRevoked`",
  "oauth.client.registered": "`agentId`, `origin` (`dcr`, `cimd` or `api`)"
}

const eventCatalogue = () =>
  [
    "Every delivery is a POST of `{ id, type, createdAt, data }`. Event types and their `data`:",
    "",
    "| type | data |",
    "| - | - |",
    ...EVENT_TYPES.map((type) => `| \`${type}\` | ${EVENT_DATA[type]} |`),
    "",
    "Signatures: `X-Service-Signature: sha256=<hex HMAC-SHA256 of the raw body>` keyed with the secret string's UTF-8 bytes; the Standard Webhooks " +
    "headers `webhook-id` (the event id), `webhook-timestamp`, `webhook-signature: v1,<base64>` over `id.timestamp.body`, keyed with the bytes " +
    "base64-encoded after `whsec_`, so Standard Webhooks libraries verify deliveries as they are. After `rotate-secret` the old secret signs too " +
    "for 24 hours (one `v1,` entry per secret). Attempts: 5 in all, 30/60/120/240 s apart; any 2xx succeeds; redirects are not followed."
  ].join("\n")

const scopeForms = () =>
  acceptedScopes("{service}").map((s) => `\`${s}\``).join(", ")

export const GROUPS: Record<string, { readonly name: string; readonly description: string }> = {
  system: { name: "System", description: "Health, the token-signing keys (JWKS), Prometheus metrics and this document. No API key; `/metrics` asks for `METRICS_TOKEN` as a bearer when one is configured." },
  developers: {
    name: "Developers and API keys",
    description: "Sign up (the one call without a key: it answers your API key, shown once), read and update your account, hold several named keys (`full`, or `read`: GETs and token verification only) and rotate one with a grace period. " +
      "Every other `/v1` call sends `Authorization: Bearer <API key>`. Sandbox keys (`sk_test_…`) skip the consent step: `POST /v1/authorize` answers the code at once."
  },
  agents: { name: "Agents", description: "The software agents you register, with the scopes they may ever ask for and the redirect URIs consent may return to. Called by your backend." },
  authorization: {
    name: "Authorization and consent",
    description: "The consent flow: your backend asks for authorization (`POST /v1/authorize`), the person approves on the consent page " +
      "(`/consent?req=…`, public, keyed by the unguessable request id), your backend exchanges the code for a grant token (`POST /v1/token`) and refreshes it."
  },
  grants: { name: "Grants and tokens", description: "What a person approved: list, read and revoke grants (with their delegated descendants), delegate to a sub-agent, verify and revoke grant tokens." },
  audit: { name: "Audit log", description: "Your tamper-evident log: one SHA-256 hash chain per developer. Append entries, list and read them, check the chain." },
  consentBundles: {
    name: "Consent bundles",
    description: "Offline authorization for on-device agents: a grant token, a JWKS snapshot to check it offline and an Ed25519 key to sign the audit entries " +
      "the device writes while offline. Your backend creates the bundle and hands it to the device; the device never holds your API key."
  },
  offlineSync: { name: "Offline audit sync", description: "Upload of the signed, hash-chained entries a device wrote offline, relayed by your backend (which adds the API key)." },
  vault: {
    name: "Credential vault",
    description: "Third-party credentials (OAuth tokens) stored encrypted per principal and service; an agent exchanges its grant token for one. " +
      `A grant token may exchange the credential of \`{service}\` when it holds any one of these scopes: ${scopeForms()}. ` +
      "Management answers never carry a token or secret."
  },
  breaches: {
    name: "Breach register (DPDP)",
    description: "Personal data breaches with the Board's 72-hour detailed-report deadline, status moves (open → initial_intimated → reported → closed) " +
      "and the intimations to data principals you report as sent. The service notifies no one and files nothing itself; it records and emits events."
  },
  dpdpNotices: {
    name: "Consent notices (DPDP)",
    description: "Immutable notice versions with language variants and their completeness against DPDP Rule 3; a retired version binds no new consent record."
  },
  dpdpRecords: {
    name: "Consent records (DPDP)",
    description: "Records of a data principal's consent, tied to a grant and a notice version and signed by the service's credential key; " +
      "withdrawal revokes the covered grants through the same path as DELETE /v1/grants/{id}."
  },
  dpdpGrievances: {
    name: "Grievances (DPDP)",
    description: "Data principals' grievances with a 7-day response target and the 90-day outer limit, moved through their states and alerted on a clock."
  },
  budgets: { name: "Budgets", description: "A spending budget per grant: allocate, debit (atomic, never below zero), read the balance and the transactions. Spending past 50 % and 80 % and reaching zero emit events." },
  domains: { name: "Custom domains", description: "Domains you prove you control with a DNS TXT record." },
  passkeys: {
    name: "Passkeys (WebAuthn)",
    description: "Register a principal's passkeys (at most 20 each), list, read, rename and delete them, and approve an authorization request with a " +
      "passkey assertion (required when your account has `fidoRequired`). Your policy can require backup-eligible authenticators or an AAGUID " +
      "allow-list; the Signal API values keep the person's passkey manager in step with what you still accept."
  },
  policies: {
    name: "Policies",
    description: "Rules that decide for you when your agents ask: auto-approve what a person would always approve, refuse what must never " +
      "happen (at night, for a group, above a delegation depth…), as built-in rules or a Cedar policy set. Any matching deny wins over every " +
      "allow; an allow never skips a passkey or SSO requirement. Evaluated on authorize (allow approves, deny answers 403 `POLICY_DENIED`), " +
      "delegate, bundle creation, token refresh and vault exchange; every decision is logged, written to your audit chain, and a deny emits `policy.denied`."
  },
  compliance: {
    name: "Compliance exports",
    description: "Evidence for auditors and regulators: a summary of counts, grant and audit-chain exports (signed JSON pages, or NDJSON / CSV " +
      "files streamed without a row cap), a signed evidence pack, background jobs for the large ones, and the DPDP / GDPR exports of the " +
      "published protocol. NDJSON and CSV files hold only rows, so any reader takes them; their proof (digest, row count, anchor, a detached JWS) " +
      "travels beside them. Every export is signed with the grant-token key and checkable with the public JWKS alone (`scripts/verify-export.ts`), " +
      "audit exports carry the anchor hash that lets a range be checked on its own, and every export is written to your audit chain when it " +
      "starts and when it ends."
  },
  credentials: {
    name: "Verifiable credentials and DIDs",
    description: "W3C Verifiable Credentials for grants, signed by the service's own `did:web` DID: a `vc+jwt` (VCDM 2.0) or an SD-JWT VC whose " +
      "person, scopes and depth the agent discloses selectively. Ask for one with `credentialFormat` on `POST /v1/token` or `/v1/grants/delegate`, " +
      "or issue one for an existing grant. Each carries Bitstring status list entries: revoking the grant or suspending the agent flips its bit in the " +
      "same transaction. Verifiers need no account: they resolve the DID document, fetch the status list, or ask verify / present, which fail closed " +
      "(a status they cannot read is `valid: false`, never \"not revoked\")."
  },
  principalSessions: {
    name: "Principal sessions",
    description: "Let a person see and revoke what they granted: your backend (API key) creates a short-lived session for one of your users and sends " +
      "them to the permissions page, or calls the person's routes from your own UI with the session token."
  },
  principal: {
    name: "The person's own view (session token)",
    description: "What a person reaches with their session token (`Authorization: Bearer pst_…`) and nothing else: their active grants, the audit " +
      "entries that name them, and revoking a grant. An API key or grant token is refused here (401), and a session token everywhere else. " +
      "Limited per address; draws on no developer budget."
  },
  saml: {
    name: "SSO: SAML",
    description: "SAML 2.0 single sign-on for a connection with `protocol: \"saml\"`: the service provider metadata an administrator gives the " +
      "identity provider (Okta, Entra ID, Google Workspace), the assertion consumer service the person's browser posts to, and the JSON callback of the " +
      "published protocol. Public: called by the identity provider and the browser, not with an API key."
  },
  permissionsPage: {
    name: "Permissions page",
    description: "The server-rendered page a person opens from `dashboardUrl`: which agents may act for them, with which scopes and until when, " +
      "revoke with a confirmation, rename or remove their passkeys. No third-party assets, strict CSP, works without JavaScript (form posts " +
      "carrying the session token; no cookie)."
  },
  scimTokens: {
    name: "Directory: SCIM tokens and settings",
    description: "The tokens your identity provider's SCIM client uses, and how directory users map to the principals of your grants. See README \"Identity providers\" for what to paste into Okta and Entra ID."
  },
  scim: {
    name: "Directory: SCIM 2.0",
    description: "RFC 7643/7644 provisioning for Okta, Entra ID and other identity providers: Users and Groups with filters, PATCH and ETags. A user deactivated or deleted is deprovisioned: their grants revoked and their principal refused (403 PRINCIPAL_INACTIVE)."
  },
  anomalies: {
    name: "Anomaly detection",
    description: "Alerts when your agents behave unlike themselves: twelve built-in rules (velocity, scope probing, new network, off-hours, delegation depth, " +
      "mass revocation, budget cliff, suspended-agent use, replay, stale bundle, passkey counter regression, OAuth client registration flood), the published protocol's four, and your own rules. Alerts are " +
      "deduplicated (a repeat counts `occurrences`), never deleted, and each emits `anomaly.detected`. In `monitor` mode (the default) nothing else " +
      "happens; in `enforce` mode a rule's response suspends the agent or revokes its grants through the normal paths (`grant.revoked`, `anomaly.auto_revoked`), " +
      "once per alert (a further occurrence does not respond again)."
  },
  billing: {
    name: "Billing and usage",
    description: "Your plan, its limits and this month's use, invoices issued when a month closes, and usage per day. Quotas of a plan without an overage price " +
      "stop `POST /v1/authorize` and code exchange at 100 % (402 `QUOTA_EXCEEDED`); refresh never stops. Resource caps (agents, webhook endpoints, policies, " +
      "SSO connections, active grants, resource servers) answer 402 `PLAN_LIMIT_EXCEEDED` where one more would be made; active grants are checked where one is asked for " +
      "(`POST /v1/authorize`, delegation, consent bundles). Checkout and portal need a payment provider (503 until one is configured)."
  },
  ssoConnections: {
    name: "SSO connections",
    description: "Your identity providers (OIDC: Okta, Entra ID, Google Workspace…; SAML), the people signed in through them, and `enforce`: " +
      "with it, only the request's principal, signed in at their provider, approves consent, for at most the scopes their groups map to. " +
      "See README \"SSO\" for what to paste into each provider."
  },
  ssoLogin: {
    name: "SSO sign-in",
    description: "The public sign-in routes: start a login (JSON or redirect), the provider's callback (browser, 303 with a session cookie; or JSON " +
      "for applications that relay the code), and the permissions page's sign-in. Refusals answer 401 `SSO_AUTH_FAILED`, provider failures 502 `SSO_ERROR`."
  },
  billingProvider: { name: "Billing provider", description: "The payment provider's event endpoint (no API key). Answers 503 until a provider is configured." },
  anomalyChannels: {
    name: "Anomaly detection: alert channels",
    description: "Webhook and Slack destinations for anomaly alerts, delivered by the webhook machinery (signatures, retries, SSRF rules) with a delivery history per channel."
  },
  console: {
    name: "Developer console",
    description: "The console's pages at `/console` (decisions §23): server-rendered HTML signed in with an API key, acting only through the operations of this document."
  },
  events: {
    name: "Live events",
    description: "Server-sent events from the outbox: the webhook payloads, live, resumable with `Last-Event-ID` (decisions §23)."
  },
  resourceServers: {
    name: "OAuth: resource servers",
    description: "The APIs and MCP servers your OAuth issuer protects (decisions §22): register one (its identifier is the tokens' audience), and finish a sign-in of the developer login bridge."
  },
  oauth: {
    name: "OAuth 2.1 authorization server",
    description: "Your issuer `/oauth/<developerId>`: RFC 8414 and RFC 9728 metadata, dynamic client registration, the authorization endpoint (PKCE S256, `resource`), the token endpoint (RFC 9068 access tokens, rotated refresh tokens), introspection and revocation. Errors are RFC 6749's `{ error, error_description }`."
  },
  oauthSignIn: {
    name: "OAuth: sign-in",
    description: "The person's browser signs in at your issuer during an authorization (decisions §22.5): the chooser at `/login` links here. SSO (your connections, a live session reused), a usernameless passkey, or your own login page; `fidoRequired` adds a passkey after any of them. Every step needs the `__Host-oauth_ix` cookie `/authorize` set."
  },
  webhooks: { name: "Webhooks", description: `Signed notifications of what happened, with retries, history, replay and secret rotation.\n\n${eventCatalogue()}` }
}

/**
 * The bearer credentials, one scheme each. An operation attaches one by its authentication
 * middleware's `security` (HttpApiMiddleware.Tag: the API key) or, where the handler reads the
 * credential itself, by `OpenApi.Override` `{ security: [{ <scheme>: [] }] }` on the endpoint, or
 * by SECURED_BY below. A capability adding a credential declares its scheme here.
 */
export const SECURITY_SCHEMES: Record<string, Record<string, unknown>> = {
  apiKey: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "sk_live_… / sk_test_…",
    description: "Your developer API key, from `POST /v1/signup`, `POST /v1/keys` or `POST /v1/keys/rotate` (each shown once). A `read` key is refused anything but GETs, `POST /v1/tokens/verify` and its own rotation (403 `INSUFFICIENT_KEY_SCOPE`). Keep it on your backend; never ship it to a device or browser."
  },
  grantToken: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "JWT (RS256)",
    description: "A grant token (from `POST /v1/token`, a refresh, a delegation or a consent bundle), presented by the agent itself: the vault exchange."
  },
  scimToken: {
    type: "http",
    scheme: "bearer",
    description: "A SCIM provisioning token, for the directory's SCIM 2.0 endpoints."
  },
  principalSession: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "pst_…",
    description: "A person's session token (`pst_…`), from `POST /v1/principal-sessions` (created by your backend for one of your users, at most 24 h). " +
      "Accepted on `/v1/principal/*` only; the permissions page takes it in a form field."
  }
}

/** operations whose handler reads its credential itself, with the scheme they accept */
export const SECURED_BY: Record<string, string> = {
  "POST /v1/vault/credentials/exchange": "grantToken"
}
