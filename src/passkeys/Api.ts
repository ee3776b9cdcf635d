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
 * | assert/verify | 403 | CREDENTIAL_NOT_ALLOWED | the credential is not registered to the request's principal (or is unknown) |
 * | assert/verify | 410 | REQUEST_NOT_PENDING | the authorization request was decided or expired meanwhile |
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import {
  AgentSuspended, ApiKeyRouteErrors, BadRequest, BodyErrors, Conflict, CredentialNotAllowed, FidoRequired, Gone, InvalidChallenge,
  NoCredentials, NotFound, PasskeyVerificationFailed, PrincipalInactive, RequestNotPending
} from "../platform/Errors.ts"

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
  authenticatorType: Schema.String,
  deviceType: Schema.String,
  backedUp: Schema.Boolean,
  transports: Schema.Array(Schema.String),
  createdAt: Schema.String,
  lastUsedAt: Schema.NullOr(Schema.String)
})

export const FidoEvidence = Schema.Struct({
  credentialId: Schema.String,
  authenticatorType: Schema.String,
  userVerified: Schema.Boolean,
  assertedAt: Schema.String
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
  )
  .add(
    HttpApiEndpoint.get("listCredentials", "/v1/webauthn/credentials")
      .setUrlParams(Schema.Struct({ principalId: Schema.optional(Schema.String) }))
      .addSuccess(Schema.Struct({ credentials: Schema.Array(PasskeyCredential) }))
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.del("deleteCredential", "/v1/webauthn/credentials/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(Schema.Void, { status: 204 })
      .addError(NotFound)
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
      .addError(CredentialNotAllowed)
      .addError(RequestNotPending)
      .addError(NotFound)
      .addError(Gone)
      .addError(AgentSuspended)
      .addError(FidoRequired)
      .addError(PrincipalInactive)
  )
  .addError(ApiKeyRouteErrors)
  .middleware(Authentication)
{}
