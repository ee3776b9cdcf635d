/** Summaries, descriptions and examples: agents, authorization and consent, grants, audit log, passkeys (see Document.ts). */
import type { OperationDoc } from "./Document.ts"
import { AGENT, AREQ, CURSOR, DEV, DID, GRANT, JWT, LATER, PRINCIPAL, T } from "./Examples.ts"

const agent = {
  agentId: AGENT, did: DID, developerId: DEV, name: "Inbox helper", description: "Sorts and summarises email",
  scopes: ["email:read", "calendar:read"], status: "active", redirectUris: ["https://app.acme.example/agent/callback"], createdAt: T, updatedAt: T
}
const token = { grantToken: JWT, expiresAt: LATER, scopes: ["email:read"], refreshToken: "ref_01JDQ93N4P5Q6R7S8T9V0WXYZA.k3Jd9sLq0Vb2", grantId: GRANT }
const grant = {
  grantId: GRANT, agentId: AGENT, principalId: PRINCIPAL, developerId: DEV, scopes: ["email:read"], status: "active",
  issuedAt: T, expiresAt: LATER, revokedAt: null, parentGrantId: null, delegationDepth: 0
}
const auditEntry = {
  entryId: "alog_01JDQ94D5E6F7G8H9J0K1M2N3P", agentId: AGENT, agentDid: DID, grantId: GRANT, principalId: PRINCIPAL, developerId: DEV,
  action: "email.send", metadata: { to: "team@acme.example" }, hash: "9f2c…e41a", prevHash: "5b7d…c0f3", timestamp: T, status: "success"
}
const passkey = {
  id: "pkc_01JDQ9BM2N3P4Q5R6S7T8V9W0X", credentialId: "q83vEjRWeJA", principalId: PRINCIPAL, deviceName: "Work laptop", providerName: "iCloud Keychain",
  aaguid: "fbfc3007-154e-4ecc-8c0b-6e020557d7bd", authenticatorType: "platform", deviceType: "multiDevice", backupEligible: true, backedUp: true,
  transports: ["internal", "hybrid"], useCount: 0, createdAt: T, lastUsedAt: null
}
const assertion = {
  id: "q83vEjRWeJA", rawId: "q83vEjRWeJA", type: "public-key",
  response: { clientDataJSON: "eyJ0eXBlIjoid2ViYXV0aG4uZ2V0In0", authenticatorData: "SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MFAAAAAQ", signature: "MEUCIQDx…" }
}
const options = { challengeId: "wac_01JDQ9CN3P4Q5R6S7T8V9W0XYZ", publicKey: { challenge: "p5d2mXz0…", rpId: "auth.acme.example", timeout: 300000, userVerification: "required" } }

export const ACCESS_OPERATIONS: Record<string, OperationDoc> = {
  "POST /v1/agents": {
    summary: "Register an agent",
    description: "Registers a software agent with the scopes it may ever ask for (authorization requests for other scopes answer 422 `INVALID_SCOPES`) and the redirect URIs consent may return to (https, or http to a loopback host; no fragment; at most 20). Its DID is `did:<method>:<agentId>`.",
    request: { name: "Inbox helper", description: "Sorts and summarises email", scopes: ["email:read", "calendar:read"], redirectUris: ["https://app.acme.example/agent/callback"] },
    response: agent
  },
  "GET /v1/agents": { summary: "List agents", description: "Your agents, newest first; page with `cursor` / `limit` (1–100).", response: { agents: [agent], nextCursor: CURSOR } },
  "GET /v1/agents/{id}": { summary: "Read an agent", description: "One of your agents by `agentId` (the path's `id` is the `agentId`).", response: agent },
  "PATCH /v1/agents/{id}": {
    summary: "Update or suspend an agent",
    description: "Changes name, description, scopes, redirect URIs or `status`. A `suspended` agent gets no new grants, tokens or bundles (403 `AGENT_SUSPENDED`) until set `active` again; its existing grants stay as they are (revoke them to stop them).",
    request: { status: "suspended" },
    response: { ...agent, status: "suspended" }
  },
  "DELETE /v1/agents/{id}": { summary: "Delete an agent", description: "Deletes the agent; it can no longer be authorized." },

  "POST /v1/authorize": {
    summary: "Start an authorization request",
    description: "Called by your backend to ask a person (`principalId`: your own id for the user) to approve scopes for an agent. Send the person to `consentUrl`; on approval your `redirectUri` (one registered on the agent) gets `?code=…&state=…`, or read the code from the consent page's answer. The request expires after 10 minutes. Sandbox developers get `{ sandbox: true, code }` at once, with no consent step. PKCE: `codeChallenge` with `codeChallengeMethod` `S256`. `expiresIn` (`90s`, `15m`, `24h`, `7d`; default 24h) is the grant's lifetime. Note: the person is `principalId` here and in grants and the vault, but `userId` in consent bundles (the interface fixed both names).",
    request: { agentId: AGENT, principalId: PRINCIPAL, scopes: ["email:read"], redirectUri: "https://app.acme.example/agent/callback", state: "xyz123", expiresIn: "24h" },
    response: { authRequestId: AREQ, consentUrl: `http://localhost:3001/consent?req=${AREQ}`, expiresAt: "2026-11-24T09:40:00.000Z" }
  },
  "POST /v1/token": {
    summary: "Exchange a code for a grant token",
    description: "Called by your backend with the code from consent: answers a grant token (RS256 JWT: `sub` the principal, `agt` the agent DID, `scp` the scopes; verify it offline with the JWKS), a refresh token and the grant id. A code is single-use and valid 10 minutes; **presenting a used code revokes the grant issued from it** (a stolen code is worth nothing). Send `codeVerifier` when the request had a PKCE challenge. Emits `token.issued`.",
    request: { code: "ac_7Jk2Lm9QxR4tVb8nWc3yZp", agentId: AGENT },
    response: token
  },
  "POST /v1/token/refresh": {
    summary: "Refresh a grant token",
    description: "Answers a new grant token and a new refresh token. A refresh token is single-use: **presenting one twice revokes the grant** (reuse detection). Fails with 400 `INVALID_GRANT` once the grant is revoked or expired.",
    request: { refreshToken: token.refreshToken, agentId: AGENT },
    response: { ...token, refreshToken: "ref_01JDQ96P7Q8R9S0T1V2W3X4Y5Z.p0Lm3Nq8Rt2W" }
  },
  "GET /v1/consent/{id}": {
    summary: "Read a pending authorization request (consent page)",
    description: "Public, keyed by the unguessable request id: what the consent page shows (agent, DID, each scope with a readable description, expiry). 410 `GONE` once approved, denied or expired.",
    response: {
      id: AREQ, agentName: "Inbox helper", agentDid: DID, agentDescription: "Sorts and summarises email", scopes: ["email:read"],
      scopeDescriptions: { "email:read": "Read your email" }, expiresAt: "2026-11-24T09:40:00.000Z", status: "pending", fidoRequired: false
    }
  },
  "POST /v1/consent/{id}/approve": {
    summary: "Approve (consent page)",
    description: "Public: the person approves. Creates the grant (`grant.created`) and a single-use code (10 minutes) for `POST /v1/token`, and answers it with the request's `redirectUri` and `state` (absent when the request had none). 403 `FIDO_REQUIRED` when the developer requires a passkey (use the passkey endpoints instead).",
    response: { code: "ac_7Jk2Lm9QxR4tVb8nWc3yZp", redirectUri: "https://app.acme.example/agent/callback", state: "xyz123" }
  },
  "POST /v1/consent/{id}/deny": {
    summary: "Deny (consent page)",
    description: "Public: the person refuses. No grant is created; answers the request's `redirectUri` and `state` to return to.",
    response: { redirectUri: "https://app.acme.example/agent/callback", state: "xyz123" }
  },
  "POST /v1/consent/{id}/passkey/options": {
    summary: "Passkey challenge for consent (consent page)",
    description: "Public: WebAuthn assertion options bound to this request (5 minutes, single use), for the consent page's passkey approval. 422 `NO_CREDENTIALS` when the person has no passkey.",
    response: options
  },
  "POST /v1/consent/{id}/passkey/verify": {
    summary: "Approve with a passkey (consent page)",
    description: "Public: verifies the assertion (user verification required, signature counter checked) and approves the request, as approve does.",
    request: { challengeId: options.challengeId, response: assertion },
    response: { verified: true, grantId: GRANT, location: "https://app.acme.example/agent/callback?code=ac_7Jk2Lm9QxR4tVb8nWc3yZp&state=xyz123" }
  },
  "GET /consent": {
    summary: "Consent page",
    description: "The HTML page a person approves or denies on (`consentUrl`). Server-rendered, no third-party assets, strict CSP; works without JavaScript (forms), uses it for passkeys.",
    response: "<!doctype html><html lang=\"en\">…</html>"
  },
  "POST /consent/approve": {
    summary: "Approve (consent page form)",
    description: "The consent page's form post (`req` = the request id), answered with a page that continues to the redirect. Same rules as `POST /v1/consent/{id}/approve`.",
    request: { req: AREQ },
    response: "<!doctype html><html lang=\"en\">…</html>"
  },
  "POST /consent/deny": {
    summary: "Deny (consent page form)",
    description: "The consent page's form post (`req` = the request id). Same rules as `POST /v1/consent/{id}/deny`.",
    request: { req: AREQ },
    response: "<!doctype html><html lang=\"en\">…</html>"
  },
  "GET /consent/passkey.js": { summary: "Consent page script", description: "The consent page's own script for passkey approval (served from here: the page loads nothing from elsewhere).", response: "\"use strict\";…" },

  "GET /v1/grants": {
    summary: "List grants",
    description: "Grants of your agents, newest first; filter by `agentId`, `principalId`, `status` (`active`, `revoked`, `expired`); page with `cursor` / `limit`.",
    response: { grants: [grant], nextCursor: null }
  },
  "GET /v1/grants/{id}": { summary: "Read a grant", description: "One grant by `grantId` (the path's `id`).", response: grant },
  "DELETE /v1/grants/{id}": {
    summary: "Revoke a grant",
    description: "Revokes the grant and every grant delegated from it, in one transaction; their tokens stop verifying online at once (offline checks see it at the next sync). Emits `grant.revoked { grantId, cascade }`. Draws on the containment budget, so revoking stays possible when the plan's budget is spent."
  },
  "POST /v1/grants/delegate": {
    summary: "Delegate to a sub-agent",
    description: "Called by your backend with an agent's grant token: issues a grant token for another of your agents with a subset of the scopes (asking for more: 400 `SCOPE_ESCALATION`), expiring no later than the parent, at most `MAX_DELEGATION_DEPTH` (3) levels deep (403 `DELEGATION_DEPTH_EXCEEDED`). Revoking the parent revokes it.",
    request: { parentGrantToken: JWT, subAgentId: "ag_01JDQ9DP4Q5R6S7T8V9W0XYZAB", scopes: ["email:read"], expiresIn: "1h" },
    response: { grantToken: JWT, expiresAt: "2026-11-24T10:30:00.000Z", scopes: ["email:read"], grantId: "grnt_01JDQ9EQ5R6S7T8V9W0XYZABCD" }
  },
  "POST /v1/tokens/verify": {
    summary: "Verify a grant token online",
    description: "Checks signature, issuer, expiry **and revocation** (which an offline JWKS check cannot see). Answers 200 either way: `{ valid: false }` for any bad token. The answer names the person `principal` and the agent `agent` (its DID) where grants say `principalId` / `agentId`: the interface fixed both.",
    request: { token: JWT },
    response: { valid: true, grantId: GRANT, scopes: ["email:read"], principal: PRINCIPAL, agent: DID, expiresAt: LATER }
  },
  "POST /v1/tokens/revoke": {
    summary: "Revoke one grant token",
    description: "Revokes a single token by its `jti` (the grant and its other tokens stay valid; revoke the grant to stop them all). 204 also for an unknown jti, so the call is safe to repeat.",
    request: { jti: "tok_01JDQ9FR6S7T8V9W0XYZABCDEF" }
  },

  "POST /v1/audit/log": {
    summary: "Append an audit entry",
    description: "Appends what an agent did to your hash chain (`hash` covers the entry and `prevHash`, so any later change shows in verify). Actions starting with `service.` are reserved for the service.",
    request: { agentId: AGENT, agentDid: DID, grantId: GRANT, principalId: PRINCIPAL, action: "email.send", metadata: { to: "team@acme.example" }, status: "success" },
    response: auditEntry
  },
  "GET /v1/audit/entries": {
    summary: "List audit entries",
    description: "Newest first; filter by `agentId`, `grantId`, `principalId`, `action`; page with `cursor` / `limit`. Includes the service's own entries (`service.*`).",
    response: { entries: [auditEntry], nextCursor: null }
  },
  "GET /v1/audit/verify": {
    summary: "Check the audit chain",
    description: "Recomputes every entry's hash and link; `firstBrokenAt` names the first entry that does not match (null when the chain is intact).",
    response: { valid: true, checkedEntries: 1284, firstBrokenAt: null }
  },
  "GET /v1/audit/{id}": { summary: "Read an audit entry", description: "One entry by `entryId` (the path's `id`).", response: auditEntry },

  "POST /v1/webauthn/register/options": {
    summary: "Passkey registration options",
    description: "Called by your backend for a person (`principalId`) setting up a passkey: WebAuthn creation options for the browser (`navigator.credentials.create`), with a challenge valid 5 minutes, single use. `user.id` is a random handle per person, never the principal id; a discoverable credential and user verification are required; your passkey policy decides the attestation asked for. 409 `TOO_MANY_CREDENTIALS` when the person already holds 20.",
    request: { principalId: PRINCIPAL },
    response: options
  },
  "POST /v1/webauthn/register/verify": {
    summary: "Register a passkey",
    description: "Verifies the browser's registration response and stores the credential for the person, with its provider (from the AAGUID) and backup flags. 400 `INVALID_CHALLENGE` for an unknown, used or expired challenge; 400 `VERIFICATION_FAILED` when the response does not verify; 403 `AUTHENTICATOR_NOT_ALLOWED` when your passkey policy refuses the authenticator; 409 when already registered, 409 `TOO_MANY_CREDENTIALS` at 20. Emits `fido.registered`.",
    request: {
      challengeId: options.challengeId, deviceName: "Work laptop",
      response: { id: "q83vEjRWeJA", rawId: "q83vEjRWeJA", type: "public-key", response: { clientDataJSON: "eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIn0", attestationObject: "o2NmbXRkbm9uZWdhdHRTdG10oGhhdXRoRGF0YVi…", transports: ["internal"] } }
    },
    response: passkey
  },
  "GET /v1/webauthn/credentials": {
    summary: "List a person's passkeys",
    description: "The passkeys registered for `principalId` (required), newest first; page with `cursor` / `limit` (1–100). A person holds at most 20.",
    response: { credentials: [passkey], nextCursor: null }
  },
  "DELETE /v1/webauthn/credentials/{id}": {
    summary: "Delete a passkey",
    description: "Removes one passkey (by the `id` of the list, not the WebAuthn `credentialId`): from then on it is neither listed, offered nor accepted (an assertion with it answers 403 `UNKNOWN_CREDENTIAL`). Kept 30 days for the record, then purged. Emits `fido.credential.deleted`. The person can also remove it on the permissions page."
  },
  "POST /v1/webauthn/assert/options": {
    summary: "Passkey approval options",
    description: "For a pending authorization request (`authRequestId`): WebAuthn assertion options listing the person's passkeys, bound to that request (5 minutes, single use). 422 `NO_CREDENTIALS` when the person has none.",
    request: { authRequestId: AREQ },
    response: options
  },
  "POST /v1/webauthn/assert/verify": {
    summary: "Approve a request with a passkey",
    description: "Verifies the assertion (user verification required, counter checked) and approves the request: the grant is created and the code answered, as consent approval does, with FIDO evidence. 403 `CREDENTIAL_NOT_ALLOWED` for a passkey not registered to the request's person; 410 `REQUEST_NOT_PENDING` when it was decided or expired meanwhile.",
    request: { challengeId: options.challengeId, response: assertion },
    response: {
      verified: true, grantId: GRANT, fidoEvidence: { credentialId: "q83vEjRWeJA", authenticatorType: "platform", userVerified: true, assertedAt: T },
      code: "ac_7Jk2Lm9QxR4tVb8nWc3yZp", redirectUri: "https://app.acme.example/agent/callback", state: "xyz123"
    }
  }
}
