/**
 * Summaries, descriptions and examples of passkey registration, management, policy and approval
 * (decisions §17); PasskeysApi carries them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { AREQ, GRANT, PASSKEY, PRINCIPAL, T } from "../platform/DocExamples.ts"

const passkeyView = {
  id: PASSKEY, credentialId: "q83vEjRWeJA", principalId: PRINCIPAL, deviceName: "Work laptop", providerName: "iCloud Keychain",
  aaguid: "fbfc3007-154e-4ecc-8c0b-6e020557d7bd", authenticatorType: "platform", deviceType: "multiDevice", backupEligible: true, backedUp: true,
  transports: ["internal", "hybrid"], useCount: 3, createdAt: T, lastUsedAt: "2026-11-24T11:02:00.000Z"
}
const policy = { attestation: "none", allowedAaguids: null, requireBackupEligible: true, updatedAt: T }
const passkey = {
  id: "pkc_01JDQ9BM2N3P4Q5R6S7T8V9W0X", credentialId: "q83vEjRWeJA", principalId: PRINCIPAL, deviceName: "Work laptop", providerName: "iCloud Keychain",
  aaguid: "fbfc3007-154e-4ecc-8c0b-6e020557d7bd", authenticatorType: "platform", deviceType: "multiDevice", backupEligible: true, backedUp: true,
  transports: ["internal", "hybrid"], useCount: 0, createdAt: T, lastUsedAt: null
}
/** the WebAuthn examples the consent page's passkey approval shares (authorization/Docs.ts) */
export const passkeyAssertion = {
  id: "q83vEjRWeJA", rawId: "q83vEjRWeJA", type: "public-key",
  response: { clientDataJSON: "eyJ0eXBlIjoid2ViYXV0aG4uZ2V0In0", authenticatorData: "SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MFAAAAAQ", signature: "MEUCIQDx…" }
}
export const passkeyOptions = { challengeId: "wac_01JDQ9CN3P4Q5R6S7T8V9W0XYZ", publicKey: { challenge: "p5d2mXz0…", rpId: "auth.acme.example", timeout: 300000, userVerification: "required" } }

export const PASSKEYS_DOCS = {
  registerOptions: {
    summary: "Passkey registration options",
    description: "Called by your backend for a person (`principalId`) setting up a passkey: WebAuthn creation options for the browser (`navigator.credentials.create`), with a challenge valid 5 minutes, single use. `user.id` is a random handle per person, never the principal id; a discoverable credential and user verification are required; your passkey policy decides the attestation asked for. 409 `TOO_MANY_CREDENTIALS` when the person already holds 20.",
    request: { principalId: PRINCIPAL },
    response: passkeyOptions
  },
  registerVerify: {
    summary: "Register a passkey",
    description: "Verifies the browser's registration response and stores the credential for the person, with its provider (from the AAGUID) and backup flags. 400 `INVALID_CHALLENGE` for an unknown, used or expired challenge; 400 `VERIFICATION_FAILED` when the response does not verify; 403 `AUTHENTICATOR_NOT_ALLOWED` when your passkey policy refuses the authenticator; 409 when already registered, 409 `TOO_MANY_CREDENTIALS` at 20. Emits `fido.registered`.",
    request: {
      challengeId: passkeyOptions.challengeId, deviceName: "Work laptop",
      response: { id: "q83vEjRWeJA", rawId: "q83vEjRWeJA", type: "public-key", response: { clientDataJSON: "eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIn0", attestationObject: "o2NmbXRkbm9uZWdhdHRTdG10oGhhdXRoRGF0YVi…", transports: ["internal"] } }
    },
    response: passkey
  },
  listCredentials: {
    summary: "List a person's passkeys",
    description: "The passkeys registered for `principalId` (required), newest first; page with `cursor` / `limit` (1–100). A person holds at most 20.",
    response: { credentials: [passkey], nextCursor: null }
  },
  getCredential: {
    summary: "Read a passkey",
    description: "One passkey by its `pkc_` id (not the WebAuthn `credentialId`): device name, provider (from the authenticator's AAGUID, when known), whether it may sync (`backupEligible`) and is synced (`backedUp`), use count and last use. 404 once deleted.",
    response: passkeyView
  },
  renameCredential: {
    summary: "Rename a passkey",
    description: "Sets `deviceName` (1–100 characters), the label the person sees on the consent and permissions pages. 404 for a deleted passkey or another developer's.",
    request: { deviceName: "Personal phone" },
    response: { ...passkeyView, deviceName: "Personal phone" }
  },
  deleteCredential: {
    summary: "Delete a passkey",
    description: "Removes one passkey (by the `id` of the list, not the WebAuthn `credentialId`): from then on it is neither listed, offered nor accepted (an assertion with it answers 403 `UNKNOWN_CREDENTIAL`). Kept 30 days for the record, then purged. Emits `fido.credential.deleted`. The person can also remove it on the permissions page."
  },
  signal: {
    summary: "WebAuthn Signal API values",
    description: "For a page of yours that keeps the person's authenticators tidy: `rpId`, `userId` (the person's random user handle, base64url, never the principal id) and the credential ids still accepted, to pass to `PublicKeyCredential.signalAllAcceptedCredentials` so removed passkeys disappear from the person's passkey manager. `name` and `displayName` are the `principalId`. `principalId` is required (400).",
    response: { rpId: "auth.acme.example", userId: "Yk3Jd9sLq0Vb2mXz7Wc4tRp1nHa6Ue8Q5fGiKoLsDjE", allAcceptedCredentialIds: ["q83vEjRWeJA"], name: PRINCIPAL, displayName: PRINCIPAL }
  },
  getPolicy: {
    summary: "Read the passkey policy",
    description: "Which authenticators your principals may register: `attestation` (`none`, the default, or `direct`), `allowedAaguids` (null: any) and `requireBackupEligible`. `updatedAt` is null while the default applies.",
    response: policy
  },
  putPolicy: {
    summary: "Set the passkey policy",
    description: "Replaces the whole policy (a field left out returns to its default). It applies to registrations from now on; passkeys already registered stay. An `allowedAaguids` list needs `attestation: \"direct\"` (400) and trust anchors configured on the service (`WEBAUTHN_ATTESTATION_ROOTS` or `WEBAUTHN_MDS_STATEMENTS`; else 422 `ATTESTATION_ANCHORS_REQUIRED`); AAGUIDs are 8-4-4-4-12 hexadecimal. A refused authenticator answers 403 `AUTHENTICATOR_NOT_ALLOWED` at registration.",
    request: { attestation: "none", requireBackupEligible: true },
    response: policy
  },
  assertOptions: {
    summary: "Passkey approval options",
    description: "For a pending authorization request (`authRequestId`): WebAuthn assertion options listing the person's passkeys, bound to that request (5 minutes, single use). 422 `NO_CREDENTIALS` when the person has none.",
    request: { authRequestId: AREQ },
    response: passkeyOptions
  },
  assertVerify: {
    summary: "Approve a request with a passkey",
    description: "Verifies the assertion (user verification required, counter checked) and approves the request: the grant is created and the code answered, as consent approval does, with FIDO evidence. 403 `CREDENTIAL_NOT_ALLOWED` for a passkey not registered to the request's person; 410 `REQUEST_NOT_PENDING` when it was decided or expired meanwhile.",
    request: { challengeId: passkeyOptions.challengeId, response: passkeyAssertion },
    response: {
      verified: true, grantId: GRANT, fidoEvidence: { credentialId: "q83vEjRWeJA", authenticatorType: "platform", userVerified: true, assertedAt: T },
      code: "ac_7Jk2Lm9QxR4tVb8nWc3yZp", redirectUri: "https://app.acme.example/agent/callback", state: "xyz123"
    }
  }
} satisfies Record<string, OperationDoc>
