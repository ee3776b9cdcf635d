/**
 * Summaries, descriptions and examples of part two (see Document.ts): verifiable credentials and the
 * service's DID (decisions §18), principal sessions, the person's own routes and the permissions page
 * (§12), passkey management (§17).
 */
import type { OperationDoc } from "./Document.ts"
import { AGENT, DEV, DID, GRANT, LATER, PRINCIPAL, T } from "./Examples.ts"

/** the service's own DID when PUBLIC_BASE_URL is http://localhost:3001 (the port is percent-encoded) */
const BASE = "http://localhost:3001"
const SERVICE_DID = "did:web:localhost%3A3001"
const VC_KID = "tU7Qm4vHc9xK2bNw1LpR8sYd3fJ6aZg0eXo5iCqWkE4"
const REVOCATION_LIST = "vcsl_01JDQ9HT8V9W0XYZABCDEFGHJK"
const SUSPENSION_LIST = "vcsl_01JDQ9HT8V9W0XYZABCDEFGHJM"
const VC = "vc_01JDQ9JV9W0XYZABCDEFGHJKMN"
const UUID = "3f6c2a9e-8b41-4d7a-9c0e-5a1b2c3d4e5f"
const VC_JWT =
  "eyJhbGciOiJFZERTQSIsImtpZCI6ImRpZDp3ZWI6bG9jYWxob3N0JTNBMzAwMSN0VTdRbTR2SGM5eEsyYk53MUxwUjhzWWQzZko2YVpnMGVYbzVpQ3FXa0U0IiwidHlwIjoidmMrand0IiwiY3R5IjoidmMifQ" +
  ".eyJAY29udGV4dCI6WyJodHRwczovL3d3dy53My5vcmcvbnMvY3JlZGVudGlhbHMvdjIiXX0.Z3Jr8wQ1m5bT0c2vN7xL4pA9sD6fH3kJ1eY8uR2iO0w"
const DISCLOSURES = ["WyJRZzdrTDJtTjlwUjRzVDF2Vzh4WTN6IiwicHJpbmNpcGFsSWQiLCJ1c2VyXzQyIl0", "WyJoRjVqSzhuUDJxUzZ1Vjl5QjNjRTdnIiwic2NvcGVzIixbImVtYWlsOnJlYWQiXV0"]
const SD_JWT_ISSUED =
  "eyJhbGciOiJFZERTQSIsImtpZCI6ImRpZDp3ZWI6bG9jYWxob3N0JTNBMzAwMSN0VTdRbTR2SGM5eEsyYk53MUxwUjhzWWQzZko2YVpnMGVYbzVpQ3FXa0U0IiwidHlwIjoiZGMrc2Qtand0In0" +
  ".eyJpc3MiOiJkaWQ6d2ViOmxvY2FsaG9zdCUzQTMwMDEiLCJ2Y3QiOiJodHRw.N2ZxV0s4bUwzcVI5dFk1dkIxbkM0eEg2akQwZkc3aEs"
const KB_JWT = "eyJhbGciOiJFZERTQSIsInR5cCI6ImtiK2p3dCJ9.eyJub25jZSI6Im4tMFM2X1d6QTJNaiIsImF1ZCI6Imh0dHBzOi8vdmVyaWZpZXIuZXhhbXBsZSJ9.a2ItU2lnbmF0dXJl"
const SD_JWT_PRESENTED = `${SD_JWT_ISSUED}~${DISCLOSURES.join("~")}~${KB_JWT}`
const HOLDER_JWK = { kty: "OKP", crv: "Ed25519", x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" }

const credentialView = {
  id: VC, grantId: GRANT, developerId: DEV, principalId: PRINCIPAL, agentDid: DID, format: "vc+jwt", credential: VC_JWT, status: "active",
  statusListIdx: 48213, revocationListId: REVOCATION_LIST, suspensionListId: SUSPENSION_LIST, issuedAt: T, expiresAt: LATER, revokedAt: null
}
const vcClaims = {
  "@context": ["https://www.w3.org/ns/credentials/v2", `${BASE}/ns/agent-auth/v1`],
  id: `urn:uuid:${UUID}`,
  type: ["VerifiableCredential", "AgentGrantCredential"],
  issuer: SERVICE_DID,
  validFrom: "2026-11-24T09:30:00.000Z",
  validUntil: "2026-11-25T09:30:00.000Z",
  credentialSubject: { id: DID, principalId: PRINCIPAL, grantId: GRANT, scopes: ["email:read"], delegationDepth: 0 },
  credentialStatus: ["revocation", "suspension"].map((purpose) => {
    const url = `${BASE}/v1/credentials/status/${purpose === "revocation" ? REVOCATION_LIST : SUSPENSION_LIST}`
    return { id: `${url}#48213`, type: "BitstringStatusListEntry", statusPurpose: purpose, statusListIndex: "48213", statusListCredential: url }
  }),
  iss: SERVICE_DID, jti: `urn:uuid:${UUID}`, sub: DID, iat: 1795512600, nbf: 1795512600, exp: 1795599000
}
const checked = { format: "vc+jwt", signature: true, issuer: true, validity: true, status: true }

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
const PASSKEY = "pkc_01JDQ9BM2N3P4Q5R6S7T8V9W0X"

export const passkeyView = {
  id: PASSKEY, credentialId: "q83vEjRWeJA", principalId: PRINCIPAL, deviceName: "Work laptop", providerName: "iCloud Keychain",
  aaguid: "fbfc3007-154e-4ecc-8c0b-6e020557d7bd", authenticatorType: "platform", deviceType: "multiDevice", backupEligible: true, backedUp: true,
  transports: ["internal", "hybrid"], useCount: 3, createdAt: T, lastUsedAt: "2026-11-24T11:02:00.000Z"
}
const policy = { attestation: "none", allowedAaguids: null, requireBackupEligible: true, updatedAt: T }

export const PART_TWO_OPERATIONS: Record<string, OperationDoc> = {
  "GET /.well-known/did.json": {
    summary: "The service's DID document (did:web)",
    description: "Public, for verifiers: the document that resolves the service's DID, `did:web:<host of PUBLIC_BASE_URL>` (a port is percent-encoded; `DID_WEB_DOMAIN` overrides the host). The Ed25519 keys that sign credentials are `Multikey` methods and the `assertionMethod`; the RSA grant-token keys are `JsonWebKey` methods; the JWKS is a `JsonWebKeySet` service. A previous credential key stays published while a credential it signed is unexpired, so rotating `VC_SIGNING_KEY` breaks no credential. Served as `application/did+json`, cacheable 5 minutes; no key, no rate limit.",
    responseType: "application/did+json",
    response: {
      "@context": ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1", "https://w3id.org/security/jwk/v1"],
      id: SERVICE_DID,
      verificationMethod: [
        { id: `${SERVICE_DID}#${VC_KID}`, type: "Multikey", controller: SERVICE_DID, publicKeyMultibase: "z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK" },
        { id: `${SERVICE_DID}#NjU4MTA`, type: "JsonWebKey", controller: SERVICE_DID, publicKeyJwk: { kty: "RSA", n: "0vx7agoebGcQSuu…", e: "AQAB", alg: "RS256", kid: "NjU4MTA" } }
      ],
      assertionMethod: [`${SERVICE_DID}#${VC_KID}`],
      service: [{ id: `${SERVICE_DID}#jwks`, type: "JsonWebKeySet", serviceEndpoint: `${BASE}/.well-known/jwks.json` }]
    }
  },
  "GET /ns/agent-auth/v1": {
    summary: "JSON-LD context of agent credentials",
    description: "Public: the JSON-LD context our credentials name in `@context`, defining `AgentGrantCredential`, `principalId`, `grantId`, `scopes`, `delegationDepth` and `FidoEvidence`, so JSON-LD processors and VCDM 2.0 validators read them. Served as `application/ld+json`, cacheable a day; no key, no rate limit.",
    responseType: "application/ld+json",
    response: {
      "@context": {
        "@protected": true,
        AgentGrantCredential: `${BASE}/ns/agent-auth/v1#AgentGrantCredential`,
        principalId: `${BASE}/ns/agent-auth/v1#principalId`,
        grantId: `${BASE}/ns/agent-auth/v1#grantId`,
        scopes: { "@id": `${BASE}/ns/agent-auth/v1#scopes`, "@container": "@set" }
      }
    }
  },
  "GET /vct/agent-grant": {
    summary: "SD-JWT VC type metadata",
    description: "Public: the type metadata of our SD-JWT VCs (their `vct`), for wallets and verifiers: claim labels and which claims are selectively disclosable (`principalId`, `scopes`, `delegationDepth` always; `grantId` never). No key, no rate limit.",
    response: {
      vct: `${BASE}/vct/agent-grant`, name: "Agent grant", description: "A person's grant of scopes to a software agent, issued by agent-auth-service",
      claims: [{ path: ["grantId"], sd: "never", display: [{ lang: "en", label: "Grant" }] }, { path: ["scopes"], sd: "always", display: [{ lang: "en", label: "Scopes" }] }]
    }
  },
  "GET /v1/credentials/status/{listId}": {
    summary: "Read a status list",
    description: "Public, fetched by verifiers through a credential's `credentialStatus` (or an SD-JWT VC's `status.status_list.uri`): the signed `BitstringStatusListCredential` (`application/vc+jwt`) whose `encodedList` is multibase base64url of the GZIP'd bits. `Accept: application/json` answers its claims plus the JWS in `jwt`; `Accept: application/statuslist+jwt` an IETF token status list (for SD-JWT VCs). Each developer has a pair of lists (purposes `revocation` and `suspension`, 131,072 entries, indices assigned at random); a bit flips in the same transaction as the grant's revocation or the agent's suspension. `Cache-Control: max-age=300` and an `ETag` (`If-None-Match` answers 304). 404 for an unknown list; 600 requests a minute per address.",
    response: VC_JWT
  },
  "POST /v1/credentials/verify": {
    summary: "Verify a credential",
    description: "Public, for any verifier (30 requests a minute per address): checks a `vc+jwt`, an SD-JWT VC (disclosures included) or the published implementation's older RS256 `vc`-claim JWT — signature with the current or a previous key, issuer, validity window (60 s leeway) and both status bits. Answers 200 either way and **fails closed**: `valid: false` with `error` one of `MALFORMED`, `UNSUPPORTED_FORMAT`, `UNKNOWN_ISSUER`, `INVALID_SIGNATURE`, `NOT_YET_VALID`, `EXPIRED`, `REVOKED`, `SUSPENDED`, `STATUS_UNAVAILABLE` (a status list we cannot read is never taken as \"not revoked\"), `INVALID_DISCLOSURE`, `DUPLICATE_DISCLOSURE`, `INVALID_KEY_BINDING`; `checks` shows how far it got. `vcId` names our credential when the signature checked. To check a holder's key binding use present.",
    request: { credential: VC_JWT },
    response: { valid: true, vcId: VC, payload: vcClaims, revoked: false, suspended: false, expired: false, error: null, checks: checked }
  },
  "POST /v1/credentials/present": {
    summary: "Verify an SD-JWT VC presentation",
    description: "Public, for a verifier that received a presentation from the agent holding the credential (30 requests a minute per address): the SD-JWT VC with the disclosures the holder chose and a key-binding JWT (`typ: kb+jwt`, EdDSA or ES256) signed with the key in the credential's `cnf.jwk` (issued with `holderKey`). Checks everything verify does, plus `sd_hash`, `iat` within 5 minutes, and `aud` and `nonce` (both required in the key-binding JWT; compared when you send `audience` / `nonce`: send the nonce you gave the holder, or a replayed presentation passes). Duplicate disclosures are refused. `disclosedClaims` holds only what the holder disclosed. A valid presentation of one of our credentials emits `sd-jwt.presented` (claim names, never values). A credential that is not an SD-JWT VC answers 400; a presentation without key binding answers `valid: false`, `KEY_BINDING_REQUIRED`.",
    request: { sdJwt: SD_JWT_PRESENTED, nonce: "n-0S6_WzA2Mj", audience: "https://verifier.example" },
    response: {
      valid: true, vcId: "vc_01JDQ9MX1YZABCDEFGHJKMNPQR", disclosedClaims: { principalId: PRINCIPAL, scopes: ["email:read"] }, revoked: false, suspended: false, expired: false,
      error: null, checks: { format: "dc+sd-jwt", signature: true, issuer: true, validity: true, status: true, disclosures: true, keyBinding: true }
    }
  },
  "POST /v1/credentials/issue": {
    summary: "Issue a credential for an existing grant",
    description: "Called by your backend: issues a verifiable credential for one of your **active** grants (one made before you asked for credentials, a consent bundle's, a delegated one), as `credentialFormat` on `POST /v1/token` and `/v1/grants/delegate` does at token time. `format`: `vc+jwt` (a VCDM 2.0 credential signed EdDSA by the service's DID) or `dc+sd-jwt` (an SD-JWT VC whose `principalId`, `scopes` and `delegationDepth` are selectively disclosable). `holderKey` (SD-JWT only: a public Ed25519 or P-256 JWK, or an Ed25519 `did:key`) binds the credential to the agent's key so that presentations need its signature. The credential expires with the grant and is revoked with it (status bit set in the revocation's transaction). 404 for a grant that is not yours; 400 when it is revoked or expired, or for another format. Emits `vc.issued` or `sd-jwt.issued`.",
    request: { grantId: GRANT, format: "dc+sd-jwt", holderKey: HOLDER_JWK },
    response: { ...credentialView, format: "dc+sd-jwt", credential: `${SD_JWT_ISSUED}~${DISCLOSURES.join("~")}~` }
  },
  "GET /v1/credentials": {
    summary: "List issued credentials",
    description: "The credentials issued for your grants, newest first, with the credential itself and its status list places. Filter by `grantId`, `principalId`, or `status` (`active` or `revoked`: the stored revocation state, so `active` also lists credentials whose answer `status` is `suspended` or `expired`); page with `cursor` / `limit` (1–100).",
    response: { credentials: [credentialView], nextCursor: null }
  },
  "GET /v1/credentials/{id}": {
    summary: "Read an issued credential",
    description: "One of your credentials by its `vc_` id. `status` is computed at read time: `revoked` (the grant was revoked), `expired`, `suspended` (the agent is suspended; cleared on reactivation) or `active`. 404 for another developer's.",
    response: credentialView
  },

  "POST /v1/principal-sessions": {
    summary: "Create a session for a person",
    description: "Called by your backend for one of your users (`principalId`, your own id for them, as in authorize; the service does not check it exists): answers a session token (`pst_…`, **shown once**) that lets that person see and revoke what they granted, and `dashboardUrl`, the permissions page with the token in the URL fragment (never sent to a server, not logged). `expiresIn` `90s`, `15m`, `24h`… (default 1h, at most 24h). The token is worth only the person's own views: it works on `/v1/principal/*` and the permissions page, and is refused (401) everywhere else; an API key is refused on those routes. Send your user to `dashboardUrl`, or call the principal routes from your own UI with it.",
    request: { principalId: PRINCIPAL, expiresIn: "1h" },
    response: { sessionToken: SESSION_TOKEN, dashboardUrl: `${BASE}/permissions#session=${SESSION_TOKEN}`, expiresAt: "2026-11-24T10:30:00.000Z" }
  },
  "GET /v1/principal/grants": {
    summary: "The person's active grants",
    description: "With the person's session token (`Authorization: Bearer pst_…`): the grants they made that are still active and unexpired, across your agents, with the agent's name and status, each scope in words and how it was approved (`approvalMethod`); delegated grants appear with their `parentGrantId`. Newest first; page with `cursor` / `limit` (1–100). Draws on no developer budget: the limit is per address.",
    response: { grants: [principalGrant], nextCursor: null }
  },
  "GET /v1/principal/audit": {
    summary: "The person's audit entries",
    description: "With the person's session token: the entries of your audit chain that name this person (`principalId`), yours and the service's (`service.*`, e.g. their own revocations), newest first; page with `cursor` / `limit` (1–100).",
    response: { entries: [principalAudit], nextCursor: null }
  },
  "DELETE /v1/principal/grants/{id}": {
    summary: "The person revokes a grant",
    description: "With the person's session token: revokes one of their grants through the same path as `DELETE /v1/grants/{id}` (its delegated descendants, bundles and credentials with it; `grant.revoked`), plus `principal.grant_revoked` and an audit entry `service.principal.grant_revoked` naming the session. 204 also when it was already revoked (no second event). 404 for a grant of another person or developer, answered as an unknown one."
  },
  "GET /permissions": {
    summary: "Permissions page",
    description: "The page a person opens from `dashboardUrl` (`/permissions#session=pst_…`) to see which agents may act for them, with what scopes and until when, revoke any of them, and rename or remove their passkeys. Server-rendered, no third-party assets, strict CSP. Its script moves the token from the fragment into a form post (`/permissions/view`) so the token never appears in a URL sent to the server; without JavaScript the person pastes the token into the form.",
    response: page
  },
  "GET /permissions/app.js": {
    summary: "Permissions page script",
    description: "The permissions page's own script (served from here: the page loads nothing from elsewhere): reads the session token from the fragment, posts it, and tells the authenticator which passkeys are still accepted (WebAuthn Signal API).",
    response: "\"use strict\";…"
  },
  "POST /permissions/view": {
    summary: "Show the person's permissions (form)",
    description: "The permissions page's form post, `session` = the session token: the page listing the person's active grants (up to 100) and passkeys. Every later step is a form post carrying the token (no cookie, so no cross-site request can act for the person). An unknown or expired token answers 401 with a \"Link expired\" page.",
    request: { session: SESSION_TOKEN },
    response: page
  },
  "POST /permissions/revoke": {
    summary: "Ask to revoke a grant (form)",
    description: "The first step of revoking from the permissions page: a confirmation page naming the agent, its scopes and the delegated grants that would be revoked with it. Nothing changes yet. A grant already revoked, ended or not the person's shows the list again with a notice.",
    request: { session: SESSION_TOKEN, grantId: GRANT },
    response: page
  },
  "POST /permissions/revoke/confirm": {
    summary: "Revoke a grant (form)",
    description: "The confirmation's form post: revokes as `DELETE /v1/principal/grants/{id}` does (descendants included, `principal.grant_revoked`) and shows the list with a notice. Safe to repeat.",
    request: { session: SESSION_TOKEN, grantId: GRANT },
    response: page
  },
  "POST /permissions/passkeys/rename": {
    summary: "Rename a passkey (form)",
    description: "The person renames one of their own passkeys (`deviceName`, at most 100 characters, not blank). Another person's passkey is answered as an unknown one. Shows the list with a notice.",
    request: { session: SESSION_TOKEN, passkeyId: PASSKEY, deviceName: "Personal phone" },
    response: page
  },
  "POST /permissions/passkeys/remove": {
    summary: "Ask to remove a passkey (form)",
    description: "The first step of removing one of the person's passkeys: a confirmation page. Nothing changes yet.",
    request: { session: SESSION_TOKEN, passkeyId: PASSKEY },
    response: page
  },
  "POST /permissions/passkeys/remove/confirm": {
    summary: "Remove a passkey (form)",
    description: "Removes the passkey as `DELETE /v1/webauthn/credentials/{id}` does (`fido.credential.deleted`; it can no longer approve anything) and shows the list with a notice; the page then tells the authenticator the credential is gone (WebAuthn Signal API).",
    request: { session: SESSION_TOKEN, passkeyId: PASSKEY },
    response: page
  },

  "GET /v1/webauthn/credentials/{id}": {
    summary: "Read a passkey",
    description: "One passkey by its `pkc_` id (not the WebAuthn `credentialId`): device name, provider (from the authenticator's AAGUID, when known), whether it may sync (`backupEligible`) and is synced (`backedUp`), use count and last use. 404 once deleted.",
    response: passkeyView
  },
  "PATCH /v1/webauthn/credentials/{id}": {
    summary: "Rename a passkey",
    description: "Sets `deviceName` (1–100 characters), the label the person sees on the consent and permissions pages. 404 for a deleted passkey or another developer's.",
    request: { deviceName: "Personal phone" },
    response: { ...passkeyView, deviceName: "Personal phone" }
  },
  "GET /v1/webauthn/signal": {
    summary: "WebAuthn Signal API values",
    description: "For a page of yours that keeps the person's authenticators tidy: `rpId`, `userId` (the person's random user handle, base64url, never the principal id) and the credential ids still accepted, to pass to `PublicKeyCredential.signalAllAcceptedCredentials` so removed passkeys disappear from the person's passkey manager. `name` and `displayName` are the `principalId`. `principalId` is required (400).",
    response: { rpId: "auth.acme.example", userId: "Yk3Jd9sLq0Vb2mXz7Wc4tRp1nHa6Ue8Q5fGiKoLsDjE", allAcceptedCredentialIds: ["q83vEjRWeJA"], name: PRINCIPAL, displayName: PRINCIPAL }
  },
  "GET /v1/webauthn/policy": {
    summary: "Read the passkey policy",
    description: "Which authenticators your principals may register: `attestation` (`none`, the default, or `direct`), `allowedAaguids` (null: any) and `requireBackupEligible`. `updatedAt` is null while the default applies.",
    response: policy
  },
  "PUT /v1/webauthn/policy": {
    summary: "Set the passkey policy",
    description: "Replaces the whole policy (a field left out returns to its default). It applies to registrations from now on; passkeys already registered stay. An `allowedAaguids` list needs `attestation: \"direct\"` (400) and trust anchors configured on the service (`WEBAUTHN_ATTESTATION_ROOTS` or `WEBAUTHN_MDS_STATEMENTS`; else 422 `ATTESTATION_ANCHORS_REQUIRED`); AAGUIDs are 8-4-4-4-12 hexadecimal. A refused authenticator answers 403 `AUTHENTICATOR_NOT_ALLOWED` at registration.",
    request: { attestation: "none", requireBackupEligible: true },
    response: policy
  }
}
