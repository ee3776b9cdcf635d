/**
 * Summaries, descriptions and examples of principal sessions, the person's own routes and the
 * permissions page (decisions §12); the three groups of Api.ts carry them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { AGENT, BASE, DEV, DID, GRANT, LATER, PASSKEY, PRINCIPAL, T } from "../platform/DocExamples.ts"

const SESSION_TOKEN = "pst_85MKllwH-vnttPtFPDv1nbaWzy1a-f5q5THE3JbY8rQ"
const principalGrant = {
  grantId: GRANT, agentId: AGENT, agentName: "Inbox helper", agentDid: DID, agentStatus: "active", scopes: ["email:read"],
  scopeDescriptions: { "email:read": "Read your email" }, approvalMethod: "consent", issuedAt: T, expiresAt: LATER, parentGrantId: null, delegationDepth: 0
}
const principalAudit = {
  entryId: "alog_01JDQ9KW0XYZABCDEFGHJKMNPQ", agentId: AGENT, agentDid: DID, grantId: GRANT, principalId: PRINCIPAL, developerId: DEV,
  action: "email.read", metadata: { folder: "inbox" }, hash: "7a41…d90c", prevHash: "9f2c…e41a", timestamp: T, status: "success"
}
const page = "<!doctype html><html lang=\"en\">…</html>"

export const PRINCIPAL_SESSIONS_DOCS = {
  create: {
    summary: "Create a session for a person",
    description: "Called by your backend for one of your users (`principalId`, your own id for them, as in authorize; the service does not check it exists): answers a session token (`pst_…`, **shown once**) that lets that person see and revoke what they granted, and `dashboardUrl`, the permissions page with the token in the URL fragment (never sent to a server, not logged). `expiresIn` `90s`, `15m`, `24h`… (default 1h, at most 24h). The token is worth only the person's own views: it works on `/v1/principal/*` and the permissions page, and is refused (401) everywhere else; an API key is refused on those routes. Send your user to `dashboardUrl`, or call the principal routes from your own UI with it.",
    request: { principalId: PRINCIPAL, expiresIn: "1h" },
    response: { sessionToken: SESSION_TOKEN, dashboardUrl: `${BASE}/permissions#session=${SESSION_TOKEN}`, expiresAt: "2026-11-24T10:30:00.000Z" }
  }
} satisfies Record<string, OperationDoc>

export const PRINCIPAL_DOCS = {
  grants: {
    summary: "The person's active grants",
    description: "With the person's session token (`Authorization: Bearer pst_…`): the grants they made that are still active and unexpired, across your agents, with the agent's name and status, each scope in words and how it was approved (`approvalMethod`); delegated grants appear with their `parentGrantId`. Newest first; page with `cursor` / `limit` (1–100). Draws on no developer budget: the limit is per address.",
    response: { principalId: "user_42", grants: [principalGrant], nextCursor: null }
  },
  audit: {
    summary: "The person's audit entries",
    description: "With the person's session token: the entries of your audit chain that name this person (`principalId`), yours and the service's (`service.*`, e.g. their own revocations), newest first; page with `cursor` / `limit` (1–100).",
    response: { entries: [principalAudit], nextCursor: null }
  },
  revoke: {
    summary: "The person revokes a grant",
    description: "With the person's session token: revokes one of their grants through the same path as `DELETE /v1/grants/{id}` (its delegated descendants, bundles and credentials with it; `grant.revoked`), plus `principal.grant_revoked` and an audit entry `service.principal.grant_revoked` naming the session. 204 also when it was already revoked (no second event). 404 for a grant of another person or developer, answered as an unknown one."
  }
} satisfies Record<string, OperationDoc>

export const PERMISSIONS_PAGE_DOCS = {
  page: {
    summary: "Permissions page",
    description: "The page a person opens from `dashboardUrl` (`/permissions#session=pst_…`) to see which agents may act for them, with what scopes and until when, revoke any of them, and rename or remove their passkeys. Server-rendered, no third-party assets, strict CSP. Its script moves the token from the fragment into a form post (`/permissions/view`) so the token never appears in a URL sent to the server; without JavaScript the person pastes the token into the form.",
    response: page
  },
  script: {
    summary: "Permissions page script",
    description: "The permissions page's own script (served from here: the page loads nothing from elsewhere): reads the session token from the fragment, posts it, and tells the authenticator which passkeys are still accepted (WebAuthn Signal API).",
    response: "\"use strict\";…"
  },
  view: {
    summary: "Show the person's permissions (form)",
    description: "The permissions page's form post, `session` = the session token: the page listing the person's active grants (up to 100) and passkeys. Every later step is a form post carrying the token (no cookie, so no cross-site request can act for the person). An unknown or expired token answers 401 with a \"Link expired\" page.",
    request: { session: SESSION_TOKEN },
    response: page
  },
  revokeAsk: {
    summary: "Ask to revoke a grant (form)",
    description: "The first step of revoking from the permissions page: a confirmation page naming the agent, its scopes and the delegated grants that would be revoked with it. Nothing changes yet. A grant already revoked, ended or not the person's shows the list again with a notice.",
    request: { session: SESSION_TOKEN, grantId: GRANT },
    response: page
  },
  revokeConfirm: {
    summary: "Revoke a grant (form)",
    description: "The confirmation's form post: revokes as `DELETE /v1/principal/grants/{id}` does (descendants included, `principal.grant_revoked`) and shows the list with a notice. Safe to repeat.",
    request: { session: SESSION_TOKEN, grantId: GRANT },
    response: page
  },
  renamePasskey: {
    summary: "Rename a passkey (form)",
    description: "The person renames one of their own passkeys (`deviceName`, at most 100 characters, not blank). Another person's passkey is answered as an unknown one. Shows the list with a notice.",
    request: { session: SESSION_TOKEN, passkeyId: PASSKEY, deviceName: "Personal phone" },
    response: page
  },
  removeAsk: {
    summary: "Ask to remove a passkey (form)",
    description: "The first step of removing one of the person's passkeys: a confirmation page. Nothing changes yet.",
    request: { session: SESSION_TOKEN, passkeyId: PASSKEY },
    response: page
  },
  removeConfirm: {
    summary: "Remove a passkey (form)",
    description: "Removes the passkey as `DELETE /v1/webauthn/credentials/{id}` does (`fido.credential.deleted`; it can no longer approve anything) and shows the list with a notice; the page then tells the authenticator the credential is gone (WebAuthn Signal API).",
    request: { session: SESSION_TOKEN, passkeyId: PASSKEY },
    response: page
  }
} satisfies Record<string, OperationDoc>
