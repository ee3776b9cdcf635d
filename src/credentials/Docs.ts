/**
 * Summaries, descriptions and examples of verifiable credentials and the service's DID (decisions
 * §18); CredentialsApi carries them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { BASE, DEV, DID, GRANT, LATER, PRINCIPAL, T } from "../platform/DocExamples.ts"

/** the service's own DID when PUBLIC_BASE_URL is http://localhost:3001 (the port is percent-encoded) */
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

export const CREDENTIALS_DOCS = {
  didDocument: {
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
  context: {
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
  typeMetadata: {
    summary: "SD-JWT VC type metadata",
    description: "Public: the type metadata of our SD-JWT VCs (their `vct`), for wallets and verifiers: claim labels and which claims are selectively disclosable (`principalId`, `scopes`, `delegationDepth` always; `grantId` never). No key, no rate limit.",
    response: {
      vct: `${BASE}/vct/agent-grant`, name: "Agent grant", description: "A person's grant of scopes to a software agent, issued by agent-auth-service",
      claims: [{ path: ["grantId"], sd: "never", display: [{ lang: "en", label: "Grant" }] }, { path: ["scopes"], sd: "always", display: [{ lang: "en", label: "Scopes" }] }]
    }
  },
  statusList: {
    summary: "Read a status list",
    description: "Public, fetched by verifiers through a credential's `credentialStatus` (or an SD-JWT VC's `status.status_list.uri`): the signed `BitstringStatusListCredential` (`application/vc+jwt`) whose `encodedList` is multibase base64url of the GZIP'd bits. `Accept: application/json` answers its claims plus the JWS in `jwt`; `Accept: application/statuslist+jwt` an IETF token status list (for SD-JWT VCs). Each developer has a pair of lists (purposes `revocation` and `suspension`, 131,072 entries, indices assigned at random); a bit flips in the same transaction as the grant's revocation or the agent's suspension. `Cache-Control: max-age=300` and an `ETag` (`If-None-Match` answers 304). 404 for an unknown list; 600 requests a minute per address.",
    response: VC_JWT
  },
  verify: {
    summary: "Verify a credential",
    description: "Public, for any verifier (30 requests a minute per address): checks a `vc+jwt`, an SD-JWT VC (disclosures included) or the published implementation's older RS256 `vc`-claim JWT — signature with the current or a previous key, issuer, validity window (60 s leeway) and both status bits. Answers 200 either way and **fails closed**: `valid: false` with `error` one of `MALFORMED`, `UNSUPPORTED_FORMAT`, `UNKNOWN_ISSUER`, `INVALID_SIGNATURE`, `NOT_YET_VALID`, `EXPIRED`, `REVOKED`, `SUSPENDED`, `STATUS_UNAVAILABLE` (a status list we cannot read is never taken as \"not revoked\"), `INVALID_DISCLOSURE`, `DUPLICATE_DISCLOSURE`, `INVALID_KEY_BINDING`; `checks` shows how far it got. `vcId` names our credential when the signature checked. To check a holder's key binding use present.",
    request: { credential: VC_JWT },
    response: { valid: true, vcId: VC, payload: vcClaims, revoked: false, suspended: false, expired: false, error: null, checks: checked }
  },
  present: {
    summary: "Verify an SD-JWT VC presentation",
    description: "Public, for a verifier that received a presentation from the agent holding the credential (30 requests a minute per address): the SD-JWT VC with the disclosures the holder chose and a key-binding JWT (`typ: kb+jwt`, EdDSA or ES256) signed with the key in the credential's `cnf.jwk` (issued with `holderKey`). Checks everything verify does, plus `sd_hash`, `iat` within 5 minutes, and `aud` and `nonce` (both required in the key-binding JWT; compared when you send `audience` / `nonce`: send the nonce you gave the holder, or a replayed presentation passes). Duplicate disclosures are refused. `disclosedClaims` holds only what the holder disclosed. A valid presentation of one of our credentials emits `sd-jwt.presented` (claim names, never values). A credential that is not an SD-JWT VC answers 400; a presentation without key binding answers `valid: false`, `KEY_BINDING_REQUIRED`.",
    request: { sdJwt: SD_JWT_PRESENTED, nonce: "n-0S6_WzA2Mj", audience: "https://verifier.example" },
    response: {
      valid: true, vcId: "vc_01JDQ9MX1YZABCDEFGHJKMNPQR", disclosedClaims: { principalId: PRINCIPAL, scopes: ["email:read"] }, revoked: false, suspended: false, expired: false,
      error: null, checks: { format: "dc+sd-jwt", signature: true, issuer: true, validity: true, status: true, disclosures: true, keyBinding: true }
    }
  },
  issue: {
    summary: "Issue a credential for an existing grant",
    description: "Called by your backend: issues a verifiable credential for one of your **active** grants (one made before you asked for credentials, a consent bundle's, a delegated one), as `credentialFormat` on `POST /v1/token` and `/v1/grants/delegate` does at token time. `format`: `vc+jwt` (a VCDM 2.0 credential signed EdDSA by the service's DID) or `dc+sd-jwt` (an SD-JWT VC whose `principalId`, `scopes` and `delegationDepth` are selectively disclosable). `holderKey` (SD-JWT only: a public Ed25519 or P-256 JWK, or an Ed25519 `did:key`) binds the credential to the agent's key so that presentations need its signature. The credential expires with the grant and is revoked with it (status bit set in the revocation's transaction). 404 for a grant that is not yours; 400 when it is revoked or expired, or for another format. Emits `vc.issued` or `sd-jwt.issued`.",
    request: { grantId: GRANT, format: "dc+sd-jwt", holderKey: HOLDER_JWK },
    response: { ...credentialView, format: "dc+sd-jwt", credential: `${SD_JWT_ISSUED}~${DISCLOSURES.join("~")}~` }
  },
  list: {
    summary: "List issued credentials",
    description: "The credentials issued for your grants, newest first, with the credential itself and its status list places. Filter by `grantId`, `principalId`, or `status` (`active` or `revoked`: the stored revocation state, so `active` also lists credentials whose answer `status` is `suspended` or `expired`); page with `cursor` / `limit` (1–100).",
    response: { credentials: [credentialView], nextCursor: null }
  },
  get: {
    summary: "Read an issued credential",
    description: "One of your credentials by its `vc_` id. `status` is computed at read time: `revoked` (the grant was revoked), `expired`, `suspended` (the agent is suspended; cleared on reactivation) or `active`. 404 for another developer's.",
    response: credentialView
  }
} satisfies Record<string, OperationDoc>
