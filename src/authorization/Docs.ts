/**
 * Summaries, descriptions and examples of the consent flow (authorize, code exchange, refresh, the
 * consent page); AuthorizationApi carries them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { AGENT, AREQ, DID, GRANT, JWT, LATER, PRINCIPAL } from "../platform/DocExamples.ts"
import { passkeyAssertion, passkeyOptions } from "../passkeys/Docs.ts"

const token = { grantToken: JWT, expiresAt: LATER, scopes: ["email:read"], refreshToken: "ref_01JDQ93N4P5Q6R7S8T9V0WXYZA.k3Jd9sLq0Vb2", grantId: GRANT }

export const AUTHORIZATION_DOCS = {
  authorize: {
    summary: "Start an authorization request",
    description: "Called by your backend to ask a person (`principalId`: your own id for the user) to approve scopes for an agent. Send the person to `consentUrl`; on approval your `redirectUri` (one registered on the agent) gets `?code=…&state=…`, or read the code from the consent page's answer. The request expires after 10 minutes. Sandbox developers get `{ sandbox: true, code }` at once, with no consent step. PKCE: `codeChallenge` with `codeChallengeMethod` `S256`. `expiresIn` (`90s`, `15m`, `24h`, `7d`; default 24h) is the grant's lifetime. Note: the person is `principalId` here and in grants and the vault, but `userId` in consent bundles (the interface fixed both names). DPDP: `consentNoticeId` (or your `defaultConsentNoticeId` setting), with `consentNoticeVersion` (default the newest unretired), `purposes` (codes of that notice; default all) and `language` (default `en`), pins a notice version on the request (unknown: 400 `INVALID_NOTICE`; retired: 409 `NOTICE_RETIRED`); a `child` or `guardian_of_pwd` `principalType` needs `guardianVerification` (422 `VERIFIABLE_CONSENT_REQUIRED`). When a person approves such a request, the consent record (`consentMethod` `explicit-click`, `sso` or `passkey`) is made in the same transaction as the grant and `dpdp.consent.created` is emitted; policy and sandbox approvals make no record.",
    request: { agentId: AGENT, principalId: PRINCIPAL, scopes: ["email:read"], redirectUri: "https://app.acme.example/agent/callback", state: "xyz123", expiresIn: "24h" },
    response: { authRequestId: AREQ, consentUrl: `http://localhost:3001/consent?req=${AREQ}`, expiresAt: "2026-11-24T09:40:00.000Z" }
  },
  token: {
    summary: "Exchange a code for a grant token",
    description: "Called by your backend with the code from consent: answers a grant token (RS256 JWT: `sub` the principal, `agt` the agent DID, `scp` the scopes; verify it offline with the JWKS), a refresh token and the grant id. A code is single-use and valid 10 minutes; **presenting a used code revokes the grant issued from it** (a stolen code is worth nothing). Send `codeVerifier` when the request had a PKCE challenge. Emits `token.issued`.",
    request: { code: "ac_7Jk2Lm9QxR4tVb8nWc3yZp", agentId: AGENT },
    response: token
  },
  refresh: {
    summary: "Refresh a grant token",
    description: "Answers a new grant token and a new refresh token. A refresh token is single-use: **presenting one twice revokes the grant** (reuse detection). Fails with 400 `INVALID_GRANT` once the grant is revoked or expired.",
    request: { refreshToken: token.refreshToken, agentId: AGENT },
    response: { ...token, refreshToken: "ref_01JDQ96P7Q8R9S0T1V2W3X4Y5Z.p0Lm3Nq8Rt2W" }
  },
  consentJson: {
    summary: "Read a pending authorization request (consent page)",
    description: "Public, keyed by the unguessable request id: what the consent page shows (agent, DID, each scope with a readable description, expiry, and the DPDP notice the request is pinned to: `notice`, in `?lang=` when the version has that language). 410 `GONE` once approved, denied or expired.",
    response: {
      id: AREQ, agentName: "Inbox helper", agentDid: DID, agentDescription: "Sorts and summarises email", scopes: ["email:read"],
      scopeDescriptions: { "email:read": "Read your email" }, expiresAt: "2026-11-24T09:40:00.000Z", status: "pending", fidoRequired: false
    }
  },
  approve: {
    summary: "Approve (consent page)",
    description: "Public: the person approves. Creates the grant (`grant.created`) and a single-use code (10 minutes) for `POST /v1/token`, and answers it with the request's `redirectUri` and `state` (absent when the request had none). 403 `FIDO_REQUIRED` when the developer requires a passkey (use the passkey endpoints instead).",
    response: { code: "ac_7Jk2Lm9QxR4tVb8nWc3yZp", redirectUri: "https://app.acme.example/agent/callback", state: "xyz123" }
  },
  deny: {
    summary: "Deny (consent page)",
    description: "Public: the person refuses. No grant is created; answers the request's `redirectUri` and `state` to return to.",
    response: { redirectUri: "https://app.acme.example/agent/callback", state: "xyz123" }
  },
  passkeyOptions: {
    summary: "Passkey challenge for consent (consent page)",
    description: "Public: WebAuthn assertion options bound to this request (5 minutes, single use), for the consent page's passkey approval. 422 `NO_CREDENTIALS` when the person has no passkey.",
    response: passkeyOptions
  },
  passkeyVerify: {
    summary: "Approve with a passkey (consent page)",
    description: "Public: verifies the assertion (user verification required, signature counter checked) and approves the request, as approve does.",
    request: { challengeId: passkeyOptions.challengeId, response: passkeyAssertion },
    response: { verified: true, grantId: GRANT, location: "https://app.acme.example/agent/callback?code=ac_7Jk2Lm9QxR4tVb8nWc3yZp&state=xyz123" }
  },
  consentPage: {
    summary: "Consent page",
    description: "The HTML page a person approves or denies on (`consentUrl`). Server-rendered, no third-party assets, strict CSP; works without JavaScript (forms), uses it for passkeys.",
    response: "<!doctype html><html lang=\"en\">…</html>"
  },
  approveForm: {
    summary: "Approve (consent page form)",
    description: "The consent page's form post (`req` = the request id), answered with a page that continues to the redirect. Same rules as `POST /v1/consent/{id}/approve`.",
    request: { req: AREQ },
    response: "<!doctype html><html lang=\"en\">…</html>"
  },
  denyForm: {
    summary: "Deny (consent page form)",
    description: "The consent page's form post (`req` = the request id). Same rules as `POST /v1/consent/{id}/deny`.",
    request: { req: AREQ },
    response: "<!doctype html><html lang=\"en\">…</html>"
  },
  passkeyScript: { summary: "Consent page script", description: "The consent page's own script for passkey approval (served from here: the page loads nothing from elsewhere).", response: "\"use strict\";…" }
} satisfies Record<string, OperationDoc>
