/**
 * Passkeys (FIDO2/WebAuthn): registration for a principal, credential list and delete, and the
 * assertion that approves a pending authorization request (interface: POST /v1/webauthn/assert/verify,
 * FidoEvidence; decisions §9). Every route uses the developer's API key.
 *
 * | Operation | Status | Code | Condition |
 * | - | - | - | - |
 * | all | 400 | BAD_REQUEST | missing or malformed fields |
 * | all | 401 | UNAUTHORIZED | invalid or missing API key |
 * | register/verify, assert/verify | 400 | INVALID_CHALLENGE | challenge unknown (or another developer's), of the other ceremony, expired (5 minutes) or already used (single use, even when the attempt failed) |
 * | register/verify, assert/verify | 400 | VERIFICATION_FAILED | the authenticator response does not verify: wrong origin, RP ID, challenge, type or signature, user not verified, signature counter not above the stored one |
 * | register/verify | 409 | CONFLICT | the credential is already registered |
 * | credentials | 400 | BAD_REQUEST | `principalId` missing |
 * | delete credential | 404 | NOT_FOUND | no such credential for this developer |
 * | assert/options | 404 | NOT_FOUND | no pending, unexpired authorization request with that id for this developer |
 * | assert/options | 422 | NO_CREDENTIALS | the request's principal has no registered passkey |
 * | assert/verify | 403 | CREDENTIAL_NOT_ALLOWED | the credential is registered, but not to the request's principal by this developer |
 * | assert/verify | 403 | UNKNOWN_CREDENTIAL | no active passkey anywhere has this credential id (never registered, or deleted) |
 * | assert/verify | 403 | VERIFICATION_FAILED | a genuine signature whose counter went backwards (a cloned authenticator; written to the audit chain) |
 * | assert/verify | 410 | REQUEST_NOT_PENDING | the authorization request was decided or expired meanwhile |
 * | register/options, register/verify | 409 | TOO_MANY_CREDENTIALS | the principal already holds 20 passkeys |
 * | register/verify | 403 | AUTHENTICATOR_NOT_ALLOWED | the attestation policy refuses it (not backup eligible, no trusted chain, AAGUID not allowed) |
 * | get, rename, delete credential | 404 | NOT_FOUND | no such (undeleted) passkey for this developer |
 * | credentials, signal | 400 | BAD_REQUEST | `principalId` missing; `limit` outside 1–100; a cursor that does not decode |
 * | put policy | 400 | BAD_REQUEST | malformed AAGUIDs; an allow-list without `attestation: "direct"` |
 * | put policy | 422 | ATTESTATION_ANCHORS_REQUIRED | an AAGUID allow-list while the service has no trust anchors |
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { RatePolicy } from "../platform/RateLimit.ts"
import { Authentication } from "../platform/Auth.ts"
import {
  AgentSuspended, ApiKeyRouteErrors, AttestationAnchorsRequired, AuthenticatorNotAllowed, BadRequest, BodyErrors, Conflict,
  CredentialNotAllowed, FidoRequired, Forbidden, Gone, InvalidChallenge, NoCredentials, NotFound, PasskeyCounterRegressed, PasskeyVerificationFailed,
  PolicyDenied, PrincipalInactive, PrincipalMismatch, RequestNotPending, TooManyCredentials, UnknownCredential
} from "../platform/Errors.ts"
import { documented } from "../platform/OperationDocs.ts"
import { PASSKEYS_DOCS } from "./Docs.ts"

const Id = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))
const B64 = Schema.String.pipe(Schema.maxLength(16_384))
const Extensions = Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
const Attachment = Schema.optional(Schema.Literal("platform", "cross-platform"))

export const RegistrationResponse = Schema.Struct({
  id: B64,
  rawId: B64,
  type: Schema.String,
  response: Schema.Struct({
    clientDataJSON: B64,
    attestationObject: B64,
    authenticatorData: Schema.optional(B64),
    transports: Schema.optional(Schema.Array(Schema.String.pipe(Schema.maxLength(32))).pipe(Schema.maxItems(10))),
    publicKeyAlgorithm: Schema.optional(Schema.Number),
    publicKey: Schema.optional(B64)
  }),
  authenticatorAttachment: Attachment,
  clientExtensionResults: Extensions
})

export const AuthenticationResponse = Schema.Struct({
  id: B64,
  rawId: B64,
  type: Schema.String,
  response: Schema.Struct({
    clientDataJSON: B64,
    authenticatorData: B64,
    signature: B64,
    userHandle: Schema.optional(Schema.NullOr(B64))
  }),
  authenticatorAttachment: Attachment,
  clientExtensionResults: Extensions
})

export const PasskeyCredential = Schema.Struct({
  id: Schema.String,
  credentialId: Schema.String,
  principalId: Schema.String,
  deviceName: Schema.NullOr(Schema.String),
  /** from the AAGUID (a local table); null when unknown or unattested */
  providerName: Schema.NullOr(Schema.String),
  aaguid: Schema.NullOr(Schema.String),
  authenticatorType: Schema.String,
  deviceType: Schema.String,
  /** the BE flag: the passkey may be synced to other devices */
  backupEligible: Schema.Boolean,
  /** the BS flag: it is backed up now */
  backedUp: Schema.Boolean,
  transports: Schema.Array(Schema.String),
  useCount: Schema.Number,
  createdAt: Schema.String,
  lastUsedAt: Schema.NullOr(Schema.String)
})

export const FidoEvidence = Schema.Struct({
  credentialId: Schema.String,
  authenticatorType: Schema.String,
  userVerified: Schema.Boolean,
  assertedAt: Schema.String
})

const Policy = Schema.Struct({
  attestation: Schema.Literal("none", "direct"),
  allowedAaguids: Schema.NullOr(Schema.Array(Schema.String)),
  requireBackupEligible: Schema.Boolean,
  updatedAt: Schema.NullOr(Schema.String)
})

const Options = Schema.Struct({ challengeId: Schema.String, publicKey: Schema.Record({ key: Schema.String, value: Schema.Unknown }) })

export const AssertionResult = Schema.Struct({
  verified: Schema.Boolean,
  grantId: Schema.String,
  fidoEvidence: FidoEvidence,
  /** the authorization code of the approved request (what consent approval answers), for POST /v1/token */
  code: Schema.String,
  redirectUri: Schema.optional(Schema.NullOr(Schema.String)),
  state: Schema.optional(Schema.NullOr(Schema.String))
})

export class PasskeysApi extends HttpApiGroup.make("passkeys")
  .add(
    HttpApiEndpoint.post("registerOptions", "/v1/webauthn/register/options")
      .setPayload(Schema.Struct({ principalId: Id }))
      .addSuccess(Options)
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(TooManyCredentials)
  )
  .add(
    HttpApiEndpoint.post("registerVerify", "/v1/webauthn/register/verify")
      .setPayload(Schema.Struct({
        challengeId: Id,
        response: RegistrationResponse,
        deviceName: Schema.optional(Schema.String.pipe(Schema.maxLength(100)))
      }))
      .addSuccess(PasskeyCredential, { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(InvalidChallenge)
      .addError(PasskeyVerificationFailed)
      .addError(Conflict)
      .addError(TooManyCredentials)
      .addError(AuthenticatorNotAllowed)
  )
  .add(
    HttpApiEndpoint.get("listCredentials", "/v1/webauthn/credentials")
      .setUrlParams(Schema.Struct({
        principalId: Schema.optional(Schema.String),
        limit: Schema.optional(Schema.String),
        cursor: Schema.optional(Schema.String)
      }))
      .addSuccess(Schema.Struct({ credentials: Schema.Array(PasskeyCredential), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.get("getCredential", "/v1/webauthn/credentials/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(PasskeyCredential)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.patch("renameCredential", "/v1/webauthn/credentials/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .setPayload(Schema.Struct({ deviceName: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)) }))
      .addSuccess(PasskeyCredential)
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("deleteCredential", "/v1/webauthn/credentials/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(Schema.Void, { status: 204 })
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("signal", "/v1/webauthn/signal")
      .setUrlParams(Schema.Struct({ principalId: Schema.optional(Schema.String) }))
      .addSuccess(Schema.Struct({
        rpId: Schema.String,
        userId: Schema.String,
        allAcceptedCredentialIds: Schema.Array(Schema.String),
        name: Schema.String,
        displayName: Schema.String
      }))
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("getPolicy", "/v1/webauthn/policy").addSuccess(Policy))
  .add(
    HttpApiEndpoint.put("putPolicy", "/v1/webauthn/policy")
      .setPayload(Schema.Struct({
        attestation: Schema.optional(Schema.Literal("none", "direct")),
        allowedAaguids: Schema.optional(Schema.NullOr(Schema.Array(Schema.String.pipe(Schema.maxLength(36))).pipe(Schema.maxItems(100)))),
        requireBackupEligible: Schema.optional(Schema.Boolean)
      }))
      .addSuccess(Policy)
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(AttestationAnchorsRequired)
      .annotate(RatePolicy, { routeLimit: 30 })
  )
  .add(
    HttpApiEndpoint.post("assertOptions", "/v1/webauthn/assert/options")
      .setPayload(Schema.Struct({ authRequestId: Id }))
      .addSuccess(Options)
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(NotFound)
      .addError(NoCredentials)
  )
  .add(
    HttpApiEndpoint.post("assertVerify", "/v1/webauthn/assert/verify")
      .setPayload(Schema.Struct({ challengeId: Id, response: AuthenticationResponse }))
      .addSuccess(AssertionResult)
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(InvalidChallenge)
      .addError(PasskeyVerificationFailed)
      .addError(PasskeyCounterRegressed)
      .addError(CredentialNotAllowed)
      .addError(UnknownCredential)
      .addError(RequestNotPending)
      .addError(NotFound)
      .addError(Gone)
      .addError(AgentSuspended)
      .addError(FidoRequired)
      .addError(PrincipalInactive)
      .addError(PrincipalMismatch)
      .addError(PolicyDenied)
      .addError(Forbidden)
  )
  .addError(ApiKeyRouteErrors)
  .middleware(Authentication)
  .pipe(documented(PASSKEYS_DOCS))
{}
