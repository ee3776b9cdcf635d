/**
 * The OAuth authorization server's HTTP interface (decisions §22): the API-key routes that register
 * resource servers and finish a developer-bridged sign-in, and the public protocol routes under
 * each developer's issuer `/oauth/<developerId>` plus the two metadata documents. The protocol
 * routes answer RFC 6749 errors (`{ error, error_description }`, platform/HttpEnvelope.ts) and take
 * form bodies (`/register`: JSON), which the handlers read themselves so a repeated parameter can be
 * refused (RFC 6749 §3.1).
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, Conflict, InvalidScopes, NotFound, PlanLimitExceeded, PublicRouteErrors } from "../platform/Errors.ts"
import { documented } from "../platform/OperationDocs.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { OAUTH_DOCS, RESOURCE_SERVER_DOCS } from "./Docs.ts"
import {
  InvalidResourceIdentifier, LoginMethodRequired, OAuthInvalidClient, OAuthInvalidClientMetadata, OAuthInvalidGrant, OAuthInvalidRedirectUri,
  OAuthInvalidRequest, OAuthInvalidScope, OAuthInvalidTarget, OAuthNotFound, OAuthUnauthorizedClient, OAuthUnsupportedGrantType, SsoNotConfigured
} from "./Errors.ts"

const Html = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/html" }))
/** a urlencoded form, read by the handler (the schema only marks the route as one that takes forms) */
const FormBody = Schema.Record({ key: Schema.String, value: Schema.UndefinedOr(Schema.String) }).pipe(HttpApiSchema.withEncoding({ kind: "UrlParams" }))
const Issuer = Schema.Struct({ developerId: Schema.String })

/** RFC 7591 client metadata: every field is checked by the registration itself, so it can answer in RFC 7591's words */
const ClientMetadata = Schema.Struct({
  redirect_uris: Schema.optional(Schema.Unknown),
  token_endpoint_auth_method: Schema.optional(Schema.Unknown),
  grant_types: Schema.optional(Schema.Unknown),
  response_types: Schema.optional(Schema.Unknown),
  client_name: Schema.optional(Schema.Unknown),
  client_uri: Schema.optional(Schema.Unknown),
  logo_uri: Schema.optional(Schema.Unknown),
  scope: Schema.optional(Schema.Unknown),
  contacts: Schema.optional(Schema.Unknown),
  application_type: Schema.optional(Schema.Unknown),
  software_id: Schema.optional(Schema.Unknown),
  software_version: Schema.optional(Schema.Unknown)
}, Schema.Record({ key: Schema.String, value: Schema.Unknown }))

const ScopeDef = Schema.Struct({ name: Schema.String, description: Schema.optional(Schema.String) })
const ResourceServerView = Schema.Struct({
  resourceServerId: Schema.String,
  identifier: Schema.String,
  name: Schema.String,
  scopes: Schema.Array(ScopeDef),
  defaultScopes: Schema.Array(Schema.String),
  accessTokenTtl: Schema.String,
  grantTtl: Schema.String,
  openRegistration: Schema.Struct({ dcr: Schema.Boolean, cimd: Schema.Boolean, cimdAllowedHosts: Schema.optional(Schema.Array(Schema.String)) }),
  login: Schema.Struct({ sso: Schema.Boolean, passkey: Schema.Boolean, developerLoginUrl: Schema.optional(Schema.String) }),
  issuer: Schema.String,
  protectedResourceMetadataUrl: Schema.String,
  wwwAuthenticate: Schema.String,
  createdAt: Schema.String,
  updatedAt: Schema.String
})

/** who may register clients for a resource server on their own (decisions §22.3) */
const OpenRegistration = Schema.Struct({
  dcr: Schema.optional(Schema.Boolean),
  cimd: Schema.optional(Schema.Boolean),
  cimdAllowedHosts: Schema.optional(Schema.Array(Schema.String))
})

export class ResourceServersApi extends HttpApiGroup.make("resourceServers")
  .add(
    HttpApiEndpoint.post("create", "/v1/resource-servers")
      .setPayload(Schema.Struct({
        identifier: Schema.String,
        name: Schema.String,
        scopes: Schema.Array(ScopeDef),
        defaultScopes: Schema.optional(Schema.Array(Schema.String)),
        accessTokenTtl: Schema.optional(Schema.String),
        grantTtl: Schema.optional(Schema.String),
        openRegistration: Schema.optional(OpenRegistration),
        login: Schema.Struct({ sso: Schema.optional(Schema.Boolean), passkey: Schema.optional(Schema.Boolean), developerLoginUrl: Schema.optional(Schema.String) })
      }))
      .addSuccess(Schema.Struct({ ...ResourceServerView.fields, introspection: Schema.Struct({ clientId: Schema.String, clientSecret: Schema.String }) }), { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(InvalidResourceIdentifier)
      .addError(InvalidScopes)
      .addError(LoginMethodRequired)
      .addError(SsoNotConfigured)
      .addError(Conflict)
      .addError(PlanLimitExceeded)
  )
  .add(HttpApiEndpoint.get("list", "/v1/resource-servers").addSuccess(Schema.Struct({ resourceServers: Schema.Array(ResourceServerView) })))
  .add(HttpApiEndpoint.get("get", "/v1/resource-servers/:id").setPath(Schema.Struct({ id: Schema.String })).addSuccess(ResourceServerView).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/v1/resource-servers/:id").setPath(Schema.Struct({ id: Schema.String }))
      .setPayload(Schema.Struct({
        identifier: Schema.optional(Schema.String),
        name: Schema.optional(Schema.String),
        scopes: Schema.optional(Schema.Array(ScopeDef)),
        defaultScopes: Schema.optional(Schema.Array(Schema.String)),
        accessTokenTtl: Schema.optional(Schema.String),
        grantTtl: Schema.optional(Schema.String),
        openRegistration: Schema.optional(OpenRegistration),
        login: Schema.optional(Schema.Struct({ sso: Schema.optional(Schema.Boolean), passkey: Schema.optional(Schema.Boolean), developerLoginUrl: Schema.optional(Schema.String) }))
      }))
      .addSuccess(ResourceServerView)
      .addError(BadRequest).addError(BodyErrors).addError(InvalidScopes).addError(LoginMethodRequired).addError(SsoNotConfigured).addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("rotateSecret", "/v1/resource-servers/:id/rotate-secret").setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(Schema.Struct({ clientId: Schema.String, clientSecret: Schema.String }), { status: 201 }).addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("remove", "/v1/resource-servers/:id").setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(HttpApiSchema.NoContent).addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("clientSecret", "/v1/agents/:id/client-secret").setPath(Schema.Struct({ id: Schema.String }))
      .setPayload(Schema.Struct({ tokenExchange: Schema.optional(Schema.Boolean) }))
      .addSuccess(Schema.Struct({ clientSecret: Schema.String, createdAt: Schema.String, tokenExchange: Schema.Boolean }), { status: 201 })
      .addError(NotFound).addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.get("interaction", "/v1/oauth/interactions/:id").setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(Schema.Struct({
        interactionId: Schema.String, status: Schema.String, clientId: Schema.String, clientName: Schema.String, resourceServerId: Schema.String,
        resource: Schema.String, scopes: Schema.Array(Schema.String), expiresAt: Schema.String
      }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("interactionPrincipal", "/v1/oauth/interactions/:id/principal").setPath(Schema.Struct({ id: Schema.String }))
      .setPayload(Schema.Struct({ principalId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)) }))
      .addSuccess(Schema.Struct({ redirectTo: Schema.String }), { status: 201 })
      .addError(NotFound)
      .addError(BodyErrors)
      .annotate(RatePolicy, { routeLimit: 60 })
  )
  .addError(ApiKeyRouteErrors)
  .middleware(Authentication)
  .pipe(documented(RESOURCE_SERVER_DOCS))
{}

export class OAuthApi extends HttpApiGroup.make("oauth")
  .add(
    HttpApiEndpoint.get("metadata", "/.well-known/oauth-authorization-server/oauth/:developerId").setPath(Issuer)
      .addSuccess(Schema.Unknown).addError(OAuthNotFound)
  )
  .add(
    HttpApiEndpoint.get("protectedResource", "/oauth/:developerId/resource-servers/:resourceServerId/.well-known/oauth-protected-resource")
      .setPath(Schema.Struct({ developerId: Schema.String, resourceServerId: Schema.String }))
      .addSuccess(Schema.Unknown).addError(OAuthNotFound)
  )
  .add(HttpApiEndpoint.get("authorize", "/oauth/:developerId/authorize").setPath(Issuer).addSuccess(Html).annotate(RatePolicy, { routeLimit: 60 }))
  .add(
    HttpApiEndpoint.post("authorizeForm", "/oauth/:developerId/authorize").setPath(Issuer).setPayload(FormBody).addSuccess(Html).addError(BodyErrors)
      .annotate(RatePolicy, { routeLimit: 60 })
  )
  .add(
    HttpApiEndpoint.get("login", "/oauth/:developerId/login").setPath(Issuer).setUrlParams(Schema.Struct({ ix: Schema.optional(Schema.String) }))
      .addSuccess(Html).annotate(RatePolicy, { routeLimit: 60 })
  )
  .add(
    HttpApiEndpoint.get("resume", "/oauth/:developerId/interaction/:id/resume")
      .setPath(Schema.Struct({ developerId: Schema.String, id: Schema.String })).setUrlParams(Schema.Struct({ token: Schema.optional(Schema.String) }))
      .addSuccess(Html).annotate(RatePolicy, { routeLimit: 60 })
  )
  .add(
    HttpApiEndpoint.post("register", "/oauth/:developerId/register").setPath(Issuer).setPayload(ClientMetadata)
      .addSuccess(Schema.Unknown, { status: 201 })
      .addError(OAuthInvalidClientMetadata).addError(OAuthInvalidRedirectUri).addError(OAuthNotFound).addError(OAuthInvalidRequest).addError(BodyErrors)
      .annotate(RatePolicy, { routeLimit: 1_000, hourlyPerAddress: () => 20, hourlyPerIssuer: (figures) => figures.oauthRegisterPerDeveloper })
  )
  .add(
    HttpApiEndpoint.post("token", "/oauth/:developerId/token").setPath(Issuer).setPayload(FormBody).addSuccess(Schema.Unknown)
      .addError(OAuthInvalidRequest).addError(OAuthInvalidClient).addError(OAuthInvalidGrant).addError(OAuthUnauthorizedClient)
      .addError(OAuthUnsupportedGrantType).addError(OAuthInvalidScope).addError(OAuthInvalidTarget).addError(BodyErrors)
      .annotate(RatePolicy, { routeLimit: 600, perOAuthClient: (figures) => figures.oauthTokenPerClient })
  )
  .add(
    HttpApiEndpoint.post("introspect", "/oauth/:developerId/introspect").setPath(Issuer).setPayload(FormBody).addSuccess(Schema.Unknown)
      .addError(OAuthInvalidClient).addError(OAuthInvalidRequest).addError(BodyErrors).annotate(RatePolicy, { routeLimit: 6_000, perOAuthClient: (figures) => figures.oauthIntrospect })
  )
  .add(
    HttpApiEndpoint.post("revoke", "/oauth/:developerId/revoke").setPath(Issuer).setPayload(FormBody).addSuccess(HttpApiSchema.Empty(200))
      .addError(OAuthInvalidClient).addError(OAuthInvalidRequest).addError(BodyErrors).annotate(RatePolicy, { routeLimit: 600, developerBudget: "containment" })
  )
  .addError(PublicRouteErrors)
  .pipe(documented(OAUTH_DOCS))
{}
