/**
 * SSO (decisions §12): the connections API and sessions (API key), and the public login routes.
 *
 * | Operation | Status | Code | Condition |
 * | - | - | - | - |
 * | create, patch | 400 | BAD_REQUEST | a field missing or malformed (`details` names it) |
 * | create | 422 | PROTOCOL_NOT_SUPPORTED | `protocol: "ldap"` |
 * | create, patch | 409 | CONFLICT | a 21st connection; a domain another active connection claims |
 * | read, patch, delete, test | 404 | NOT_FOUND | no such connection of this developer |
 * | login | 404 | NOT_FOUND | unknown organisation or connection, or no active connection |
 * | login | 422 | DOMAIN_NOT_CONFIGURED | `domain` claimed by no active connection |
 * | login | 400 | INVALID_REDIRECT_URI | `redirect_uri` not one of the connection's `allowedRedirectUris` |
 * | login, callbacks | 502 | SSO_ERROR | the provider failed (unreachable, timed out, malformed answer) |
 * | JSON callback | 401 | SSO_AUTH_FAILED | the provider's answer or the identity was refused |
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import {
  ApiKeyRouteErrors, BadRequest, BodyErrors, Conflict, DomainNotConfigured, InvalidRedirectUri, NotFound, PlanLimitExceeded, ProtocolNotSupported,
  PublicRouteErrors, SsoAuthFailed, SsoError
} from "../platform/Errors.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { documented } from "../platform/OperationDocs.ts"
import { SSO_CONNECTIONS_DOCS, SSO_LOGIN_DOCS } from "./Docs.ts"

const Html = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/html" }))
const Str = (max: number) => Schema.String.pipe(Schema.maxLength(max))
const Strings = (max: number, each: number) => Schema.Array(Str(each)).pipe(Schema.maxItems(max))
const IdPath = Schema.Struct({ id: Str(100) })

/** every field optional: a create checks what it needs (Input.ts), a patch changes what it names */
const ConnectionBody = Schema.Struct({
  name: Schema.optional(Str(200)),
  protocol: Schema.optional(Str(20)),
  status: Schema.optional(Str(20)),
  domains: Schema.optional(Strings(1000, 300)),
  jitProvisioning: Schema.optional(Schema.Boolean),
  enforce: Schema.optional(Schema.Boolean),
  groupsClaim: Schema.optional(Schema.NullOr(Str(300))),
  groupAttribute: Schema.optional(Schema.NullOr(Str(300))),
  groupMappings: Schema.optional(Schema.Record({ key: Schema.String, value: Strings(1000, 300) })),
  defaultScopes: Schema.optional(Strings(1000, 300)),
  allowedRedirectUris: Schema.optional(Strings(100, 3000)),
  issuerUrl: Schema.optional(Str(3000)),
  clientId: Schema.optional(Str(1000)),
  clientSecret: Schema.optional(Str(4000)),
  tokenEndpointAuthMethod: Schema.optional(Str(50)),
  scopes: Schema.optional(Str(3000)),
  tenantMode: Schema.optional(Str(50)),
  allowedTenants: Schema.optional(Strings(100, 100)),
  idpMetadataXml: Schema.optional(Str(1024 * 1024)),
  idpEntityId: Schema.optional(Str(2000)),
  idpSsoUrl: Schema.optional(Str(3000)),
  idpCertificates: Schema.optional(Strings(20, 20_000))
})

export const ConnectionView = Schema.Struct({
  id: Schema.String,
  connectionId: Schema.String,
  name: Schema.String,
  protocol: Schema.Literal("oidc", "saml"),
  status: Schema.Literal("active", "inactive"),
  domains: Schema.Array(Schema.String),
  jitProvisioning: Schema.Boolean,
  enforce: Schema.Boolean,
  groupsClaim: Schema.NullOr(Schema.String),
  groupMappings: Schema.Record({ key: Schema.String, value: Schema.Array(Schema.String) }),
  defaultScopes: Schema.Array(Schema.String),
  allowedRedirectUris: Schema.Array(Schema.String),
  issuerUrl: Schema.optional(Schema.String),
  clientId: Schema.optional(Schema.String),
  tokenEndpointAuthMethod: Schema.optional(Schema.String),
  scopes: Schema.optional(Schema.String),
  tenantMode: Schema.optional(Schema.String),
  allowedTenants: Schema.optional(Schema.Array(Schema.String)),
  hasClientSecret: Schema.optional(Schema.Boolean),
  redirectUri: Schema.optional(Schema.String),
  idpEntityId: Schema.optional(Schema.String),
  idpSsoUrl: Schema.optional(Schema.String),
  idpCertificates: Schema.optional(Schema.Array(Schema.String)),
  spEntityId: Schema.optional(Schema.String),
  spAcsUrl: Schema.optional(Schema.String),
  spMetadataUrl: Schema.optional(Schema.String),
  createdAt: Schema.String,
  updatedAt: Schema.String
})

const LegacyView = Schema.Struct({
  connectionId: Schema.String,
  issuerUrl: Schema.String,
  clientId: Schema.String,
  redirectUri: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  updatedAt: Schema.String
})

export const SessionResult = Schema.Struct({
  sessionId: Schema.String,
  principalId: Schema.String,
  developerId: Schema.String,
  expiresAt: Schema.String,
  groups: Schema.Array(Schema.String),
  mappedScopes: Schema.Array(Schema.String)
})

const Check = Schema.Struct({ name: Schema.String, ok: Schema.Boolean, detail: Schema.optional(Schema.String) })

export class SsoConnectionsApi extends HttpApiGroup.make("ssoConnections")
  .add(
    HttpApiEndpoint.post("create", "/v1/sso/connections")
      .setPayload(ConnectionBody)
      .addSuccess(ConnectionView, { status: 201 })
      .addError(BadRequest).addError(BodyErrors).addError(ProtocolNotSupported).addError(Conflict).addError(PlanLimitExceeded)
  )
  .add(HttpApiEndpoint.get("list", "/v1/sso/connections").addSuccess(Schema.Struct({ connections: Schema.Array(ConnectionView) })))
  .add(HttpApiEndpoint.get("get", "/v1/sso/connections/:id").setPath(IdPath).addSuccess(ConnectionView).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/v1/sso/connections/:id")
      .setPath(IdPath)
      .setPayload(ConnectionBody)
      .addSuccess(ConnectionView)
      .addError(BadRequest).addError(BodyErrors).addError(ProtocolNotSupported).addError(Conflict).addError(NotFound)
  )
  .add(HttpApiEndpoint.del("remove", "/v1/sso/connections/:id").setPath(IdPath).addSuccess(Schema.Void, { status: 204 }).addError(NotFound))
  .add(
    HttpApiEndpoint.post("test", "/v1/sso/connections/:id/test")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ success: Schema.Boolean, protocol: Schema.String, checks: Schema.Array(Check) }))
      .addError(NotFound)
      .annotate(RatePolicy, { routeLimit: 20, routeKey: "apiKey" })
  )
  .add(
    HttpApiEndpoint.post("enforce", "/v1/sso/enforce")
      .setPayload(Schema.Struct({ enforce: Schema.Boolean }))
      .addSuccess(Schema.Struct({ enforce: Schema.Boolean, developerId: Schema.String, connections: Schema.Number }))
      .addError(BadRequest).addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.get("sessions", "/v1/sso/sessions")
      .setUrlParams(Schema.Struct({ limit: Schema.optional(Schema.String), cursor: Schema.optional(Schema.String) }))
      .addSuccess(Schema.Struct({
        sessions: Schema.Array(Schema.Struct({
          sessionId: Schema.String,
          connectionId: Schema.String,
          principalId: Schema.String,
          groups: Schema.Array(Schema.String),
          createdAt: Schema.String,
          expiresAt: Schema.String
        })),
        nextCursor: Schema.NullOr(Schema.String)
      }))
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.del("removeSession", "/v1/sso/sessions/:id").setPath(IdPath).addSuccess(Schema.Void, { status: 204 }).addError(NotFound))
  .add(
    HttpApiEndpoint.post("setConfig", "/v1/sso/config")
      .setPayload(Schema.Struct({ issuerUrl: Str(3000), clientId: Str(1000), clientSecret: Str(4000), redirectUri: Schema.optional(Str(3000)) }))
      // 201 on every set, a replacement too, as the published protocol answers
      .addSuccess(LegacyView, { status: 201 })
      .addError(BadRequest).addError(BodyErrors).addError(ProtocolNotSupported).addError(Conflict).addError(PlanLimitExceeded)
  )
  .add(HttpApiEndpoint.get("getConfig", "/v1/sso/config").addSuccess(LegacyView).addError(NotFound))
  .add(HttpApiEndpoint.del("removeConfig", "/v1/sso/config").addSuccess(Schema.Void, { status: 204 }).addError(NotFound))
  .addError(ApiKeyRouteErrors)
  .middleware(Authentication)
  .pipe(documented(SSO_CONNECTIONS_DOCS))
{}

const LoginParams = Schema.Struct({
  org: Schema.optional(Str(100)),
  connection: Schema.optional(Str(100)),
  domain: Schema.optional(Str(300)),
  redirect_uri: Schema.optional(Str(3000)),
  login_hint: Schema.optional(Str(300)),
  mode: Schema.optional(Str(20)),
  /** the consent page's sign-in: back to this authorization request afterwards (implies mode=redirect) */
  consent: Schema.optional(Str(100))
})

export class SsoLoginApi extends HttpApiGroup.make("ssoLogin")
  .add(
    HttpApiEndpoint.get("login", "/sso/login")
      .setUrlParams(LoginParams)
      .addSuccess(Schema.Struct({ authorizeUrl: Schema.String, protocol: Schema.Literal("oidc", "saml"), connectionId: Schema.String }))
      .addError(BadRequest).addError(NotFound).addError(DomainNotConfigured).addError(InvalidRedirectUri).addError(SsoError)
      .annotate(RatePolicy, { routeLimit: 60 })
  )
  .add(
    HttpApiEndpoint.get("oidcCallback", "/sso/oidc/callback")
      .setUrlParams(Schema.Struct({
        code: Schema.optional(Str(4000)),
        state: Schema.optional(Str(200)),
        iss: Schema.optional(Str(3000)),
        error: Schema.optional(Str(200)),
        error_description: Schema.optional(Str(2000))
      }))
      .addSuccess(Html)
      .annotate(RatePolicy, { routeLimit: 60 })
  )
  .add(
    HttpApiEndpoint.post("oidcCallbackJson", "/sso/callback/oidc")
      .setPayload(Schema.Struct({ code: Str(4000).pipe(Schema.minLength(1)), state: Str(200).pipe(Schema.minLength(1)) }))
      .addSuccess(SessionResult)
      .addError(BadRequest).addError(BodyErrors).addError(SsoAuthFailed).addError(SsoError)
      .annotate(RatePolicy, { routeLimit: 20 })
  )
  .add(
    HttpApiEndpoint.get("permissionsLogin", "/permissions/login")
      .setUrlParams(Schema.Struct({ org: Schema.optional(Str(100)), connection: Schema.optional(Str(100)) }))
      .addSuccess(Html)
      .annotate(RatePolicy, { routeLimit: 60 })
  )
  .addError(PublicRouteErrors)
  .pipe(documented(SSO_LOGIN_DOCS))
{}
