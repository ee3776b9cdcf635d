/**
 * Authorization requests, the consent page and its JSON endpoints, and the token endpoints
 * (decisions §3). The consent endpoints are public: the request id is the unguessable key.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { Scopes } from "../agents/Api.ts"
import { InvalidNotice, NoticeHashMismatch, NoticeRetired, VerifiableConsentRequired } from "../dpdp/Errors.ts"
import { CredentialRequestFields, IssuedCredentialFields } from "../credentials/Api.ts"
import { AuthenticationResponse } from "../passkeys/Api.ts"
import { Authentication } from "../platform/Auth.ts"
import {
  AgentNotFound, AgentSuspended, ApiKeyRouteErrors, BadRequest, BodyErrors, CredentialNotAllowed, FidoRequired, Forbidden, Gone,
  InvalidChallenge, InvalidGrant, InvalidRedirectUri, InvalidScopes, NoCredentials, NotFound, PasskeyVerificationFailed, PolicyDenied, PrincipalInactive,
  PlanLimitExceeded, PrincipalMismatch, PublicRouteErrors, QuotaExceeded, RequestNotPending
} from "../platform/Errors.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { documented } from "../platform/OperationDocs.ts"
import { AUTHORIZATION_DOCS } from "./Docs.ts"

const Html = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/html" }))
const Js = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/javascript" }))
const IdPath = Schema.Struct({ id: Schema.String })
/** `lang`: the notice language the person read the page in (decisions §21) */
const Form = Schema.Struct({ req: Schema.String, lang: Schema.optional(Schema.String.pipe(Schema.maxLength(35))) })
  .pipe(HttpApiSchema.withEncoding({ kind: "UrlParams" }))

export const TokenResponse = Schema.Struct({
  grantToken: Schema.String,
  expiresAt: Schema.String,
  scopes: Schema.Array(Schema.String),
  refreshToken: Schema.String,
  grantId: Schema.String,
  ...IssuedCredentialFields
})

const Short = (max: number) => Schema.String.pipe(Schema.minLength(1), Schema.maxLength(max))

export class AuthorizationApi extends HttpApiGroup.make("authorization")
  .add(
    HttpApiEndpoint.post("authorize", "/v1/authorize")
      .setPayload(Schema.Struct({
        agentId: Short(100),
        principalId: Short(200),
        scopes: Scopes,
        expiresIn: Schema.optional(Schema.String),
        redirectUri: Schema.optional(Schema.String),
        state: Schema.optional(Schema.String.pipe(Schema.maxLength(500))),
        audience: Schema.optional(Short(500)),
        codeChallenge: Schema.optional(Schema.String),
        codeChallengeMethod: Schema.optional(Schema.String),
        // decisions §21: the DPDP notice the person consents under
        consentNoticeId: Schema.optional(Short(100)),
        consentNoticeVersion: Schema.optional(Short(32)),
        purposes: Schema.optional(Schema.Array(Short(64)).pipe(Schema.maxItems(50))),
        language: Schema.optional(Short(35)),
        principalType: Schema.optional(Schema.Literal("adult", "child", "guardian_of_pwd")),
        guardianVerification: Schema.optional(Schema.Unknown)
      }))
      .addSuccess(Schema.Struct({
        authRequestId: Schema.String,
        consentUrl: Schema.String,
        expiresAt: Schema.String,
        sandbox: Schema.optional(Schema.Literal(true)),
        code: Schema.optional(Schema.String),
        // decisions §13: approved at once by an allow policy (the published protocol's fields)
        policyEnforced: Schema.optional(Schema.Literal(true)),
        effect: Schema.optional(Schema.Literal("allow")),
        policyId: Schema.optional(Schema.String)
      }), { status: 201 })
      .addError(BadRequest)
      .addError(PolicyDenied)
      .addError(InvalidRedirectUri)
      .addError(BodyErrors)
      .addError(AgentNotFound)
      .addError(AgentSuspended)
      .addError(PrincipalInactive)
      .addError(InvalidScopes)
      .addError(QuotaExceeded)
      .addError(PlanLimitExceeded)
      .addError(InvalidNotice)
      .addError(NoticeRetired)
      .addError(NoticeHashMismatch)
      .addError(VerifiableConsentRequired)
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
      .annotate(RatePolicy, { routeLimit: 10, authorizeBucket: true })
  )
  .add(
    HttpApiEndpoint.post("token", "/v1/token")
      .setPayload(Schema.Struct({ code: Short(200), agentId: Short(100), codeVerifier: Schema.optional(Short(1000)) /* 43-128 checked by the handler: INVALID_GRANT */, ...CredentialRequestFields }))
      .addSuccess(TokenResponse, { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(InvalidGrant)
      .addError(AgentSuspended)
      .addError(PrincipalInactive)
      .addError(PolicyDenied)
      .addError(QuotaExceeded)
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
      .annotate(RatePolicy, { routeLimit: 20 })
  )
  .add(
    HttpApiEndpoint.post("refresh", "/v1/token/refresh")
      .setPayload(Schema.Struct({ refreshToken: Short(200), agentId: Short(100) }))
      .addSuccess(TokenResponse, { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(InvalidGrant)
      .addError(AgentSuspended)
      .addError(PrincipalInactive)
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
      .annotate(RatePolicy, { routeLimit: 20 })
  )
  .add(
    HttpApiEndpoint.get("consentJson", "/v1/consent/:id")
      .setPath(IdPath)
      // lang: another language variant of the request's notice (decisions §21)
      .setUrlParams(Schema.Struct({ lang: Schema.optional(Schema.String) }))
      .addSuccess(Schema.Struct({
        id: Schema.String,
        agentName: Schema.String,
        agentDid: Schema.String,
        agentDescription: Schema.NullOr(Schema.String),
        scopes: Schema.Array(Schema.String),
        scopeDescriptions: Schema.Record({ key: Schema.String, value: Schema.String }),
        expiresAt: Schema.String,
        status: Schema.String,
        fidoRequired: Schema.Boolean,
        /** decisions §21: the notice the request is pinned to, as the consent page shows it (absent when none) */
        notice: Schema.optional(Schema.Struct({
          noticeId: Schema.String,
          version: Schema.String,
          language: Schema.String,
          languages: Schema.Array(Schema.String),
          title: Schema.String,
          content: Schema.String,
          purposes: Schema.Array(Schema.Struct({ code: Schema.String, description: Schema.String, name: Schema.optional(Schema.String) })),
          dataItems: Schema.Array(Schema.String),
          dataFiduciaryContact: Schema.NullOr(Schema.String),
          grievanceOfficer: Schema.NullOr(Schema.Struct({ name: Schema.String, email: Schema.String, phone: Schema.optional(Schema.String) })),
          withdrawalUrl: Schema.NullOr(Schema.String),
          rightsUrl: Schema.NullOr(Schema.String),
          boardComplaintUrl: Schema.NullOr(Schema.String)
        }))
      }))
      .addError(NotFound)
      .addError(Gone)
  )
  .add(
    HttpApiEndpoint.post("approve", "/v1/consent/:id/approve")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ code: Schema.String, redirectUri: Schema.optional(Schema.String), state: Schema.optional(Schema.String) }))
      .addError(NotFound)
      .addError(Gone)
      .addError(AgentSuspended)
      .addError(FidoRequired)
      .addError(PrincipalInactive)
      .addError(PrincipalMismatch)
      .addError(PolicyDenied)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.post("deny", "/v1/consent/:id/deny")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ redirectUri: Schema.optional(Schema.String), state: Schema.optional(Schema.String) }))
      .addError(NotFound)
      .addError(Gone)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.post("passkeyOptions", "/v1/consent/:id/passkey/options")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ challengeId: Schema.String, publicKey: Schema.Unknown }))
      .addError(NotFound)
      .addError(NoCredentials)
  )
  .add(
    HttpApiEndpoint.post("passkeyVerify", "/v1/consent/:id/passkey/verify")
      .setPath(IdPath)
      .setPayload(Schema.Struct({ challengeId: Schema.String, response: AuthenticationResponse }))
      .addSuccess(Schema.Struct({ verified: Schema.Boolean, grantId: Schema.String, location: Schema.NullOr(Schema.String) }))
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
      .addError(PrincipalMismatch)
      .addError(PolicyDenied)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.get("consentPage", "/consent")
      // error=access_denied: back from an SSO sign-in that was refused (decisions §12)
      // lang: another language variant of the request's notice (decisions §21)
      .setUrlParams(Schema.Struct({ req: Schema.optional(Schema.String), error: Schema.optional(Schema.String), lang: Schema.optional(Schema.String) }))
      .addSuccess(Html)
  )
  .add(HttpApiEndpoint.post("approveForm", "/consent/approve").setPayload(Form).addSuccess(Html))
  .add(HttpApiEndpoint.post("denyForm", "/consent/deny").setPayload(Form).addSuccess(Html))
  .add(HttpApiEndpoint.get("passkeyScript", "/consent/passkey.js").addSuccess(Js))
  .addError(PublicRouteErrors)
  .pipe(documented(AUTHORIZATION_DOCS))
{}
