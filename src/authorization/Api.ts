/**
 * Authorization requests, the consent page and its JSON endpoints, and the token endpoints
 * (decisions §3). The consent endpoints are public: the request id is the unguessable key.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { Scopes } from "../agents/Api.ts"
import { CredentialRequestFields, IssuedCredentialFields } from "../credentials/Api.ts"
import { AuthenticationResponse } from "../passkeys/Api.ts"
import { Authentication } from "../platform/Auth.ts"
import {
  AgentNotFound, AgentSuspended, ApiKeyRouteErrors, BadRequest, BodyErrors, CredentialNotAllowed, FidoRequired, Forbidden, Gone,
  InvalidChallenge, InvalidGrant, InvalidRedirectUri, InvalidScopes, NoCredentials, NotFound, PasskeyVerificationFailed, PolicyDenied, PrincipalInactive,
  PlanLimitExceeded, PrincipalMismatch, PublicRouteErrors, QuotaExceeded, RequestNotPending
} from "../platform/Errors.ts"
import { RatePolicy } from "../platform/RateLimit.ts"

const Html = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/html" }))
const Js = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/javascript" }))
const IdPath = Schema.Struct({ id: Schema.String })
const Form = Schema.Struct({ req: Schema.String }).pipe(HttpApiSchema.withEncoding({ kind: "UrlParams" }))

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
        codeChallengeMethod: Schema.optional(Schema.String)
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
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
      .annotate(RatePolicy, { routeLimit: 20 })
  )
  .add(
    HttpApiEndpoint.get("consentJson", "/v1/consent/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({
        id: Schema.String,
        agentName: Schema.String,
        agentDid: Schema.String,
        agentDescription: Schema.NullOr(Schema.String),
        scopes: Schema.Array(Schema.String),
        scopeDescriptions: Schema.Record({ key: Schema.String, value: Schema.String }),
        expiresAt: Schema.String,
        status: Schema.String,
        fidoRequired: Schema.Boolean
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
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.post("deny", "/v1/consent/:id/deny")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ redirectUri: Schema.optional(Schema.String), state: Schema.optional(Schema.String) }))
      .addError(NotFound)
      .addError(Gone)
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
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.get("consentPage", "/consent")
      // error=access_denied: back from an SSO sign-in that was refused (decisions §12)
      .setUrlParams(Schema.Struct({ req: Schema.optional(Schema.String), error: Schema.optional(Schema.String) }))
      .addSuccess(Html)
  )
  .add(HttpApiEndpoint.post("approveForm", "/consent/approve").setPayload(Form).addSuccess(Html))
  .add(HttpApiEndpoint.post("denyForm", "/consent/deny").setPayload(Form).addSuccess(Html))
  .add(HttpApiEndpoint.get("passkeyScript", "/consent/passkey.js").addSuccess(Js))
  .addError(PublicRouteErrors)
{}
