/**
 * Principal sessions and the permissions page (decisions §12). A developer creates a session for a
 * principal with its API key; the session token then works on the /v1/principal routes and the
 * /permissions page only (an API key is refused there, and the token everywhere else).
 *
 * | Operation | Status | Code | Condition |
 * | - | - | - | - |
 * | create session | 400 | BAD_REQUEST | `principalId` missing or empty, `expiresIn` malformed or over 24h |
 * | create session | 401 | UNAUTHORIZED | invalid or missing API key |
 * | principal routes | 401 | UNAUTHORIZED | missing, unknown or expired session token (an API key or grant token included) |
 * | principal lists | 400 | BAD_REQUEST | `limit` outside 1–100, a cursor that does not decode |
 * | revoke | 404 | NOT_FOUND | no such grant of this principal (another principal's or developer's included) |
 * | all | 429 | RATE_LIMITED | the route's limit for the caller's address |
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, HttpApiSecurity } from "@effect/platform"
import { Context, Schema } from "effect"
import { AuditEntryView } from "../audit/Api.ts"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, NotFound, PrincipalInactive, PublicRouteErrors, Unauthorized } from "../platform/Errors.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import type { PrincipalSession } from "./Service.ts"
import { documented } from "../platform/OperationDocs.ts"
import { PERMISSIONS_PAGE_DOCS, PRINCIPAL_DOCS, PRINCIPAL_SESSIONS_DOCS } from "./Docs.ts"

/** The principal session that authenticated this request. */
export class CurrentPrincipal extends Context.Tag("agent-auth/CurrentPrincipal")<CurrentPrincipal, PrincipalSession>() {}

/** `Authorization: Bearer <sessionToken>`: a principal session, nothing else. */
export class PrincipalAuthentication extends HttpApiMiddleware.Tag<PrincipalAuthentication>()("PrincipalAuthentication", {
  failure: Unauthorized,
  provides: CurrentPrincipal,
  security: { principalSession: HttpApiSecurity.bearer }
}) {}

const Html = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/html" }))
const Js = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/javascript" }))
const Page = Schema.Struct({ limit: Schema.optional(Schema.String), cursor: Schema.optional(Schema.String) })
const Field = Schema.String.pipe(Schema.maxLength(200))
const SessionForm = Schema.Struct({ session: Field }).pipe(HttpApiSchema.withEncoding({ kind: "UrlParams" }))
const GrantForm = Schema.Struct({ session: Field, grantId: Field }).pipe(HttpApiSchema.withEncoding({ kind: "UrlParams" }))
const PasskeyForm = Schema.Struct({ session: Field, passkeyId: Field }).pipe(HttpApiSchema.withEncoding({ kind: "UrlParams" }))
const RenameForm = Schema.Struct({ session: Field, passkeyId: Field, deviceName: Schema.String.pipe(Schema.maxLength(100)) }).pipe(
  HttpApiSchema.withEncoding({ kind: "UrlParams" })
)

export const PrincipalGrant = Schema.Struct({
  grantId: Schema.String,
  agentId: Schema.String,
  agentName: Schema.String,
  agentDid: Schema.String,
  agentStatus: Schema.Literal("active", "suspended"),
  scopes: Schema.Array(Schema.String),
  scopeDescriptions: Schema.Record({ key: Schema.String, value: Schema.String }),
  approvalMethod: Schema.Literal("consent", "sso", "passkey", "policy", "developer", "sandbox"),
  issuedAt: Schema.String,
  expiresAt: Schema.String,
  parentGrantId: Schema.NullOr(Schema.String),
  delegationDepth: Schema.Number,
  // decisions §22.5: an OAuth grant's client and the resource it is for
  oauth: Schema.optional(Schema.Struct({
    clientName: Schema.String,
    clientOrigin: Schema.Literal("api", "dcr", "cimd"),
    resourceServerId: Schema.String,
    resource: Schema.String,
    resourceName: Schema.String
  }))
})

/** the audit log's own entry shape (src/audit): the principal's entries only */
const AuditEntry = AuditEntryView

/** POST /v1/principal-sessions: the developer's API key */
export class PrincipalSessionsApi extends HttpApiGroup.make("principalSessions")
  .add(
    HttpApiEndpoint.post("create", "/v1/principal-sessions")
      .setPayload(Schema.Struct({
        principalId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
        expiresIn: Schema.optional(Schema.String.pipe(Schema.maxLength(20)))
      }))
      .addSuccess(Schema.Struct({ sessionToken: Schema.String, dashboardUrl: Schema.String, expiresAt: Schema.String }), { status: 201 })
      .addError(BadRequest)
      .addError(PrincipalInactive)
      .addError(BodyErrors)
      .annotate(RatePolicy, { routeLimit: 60, routeKey: "apiKey" })
  )
  .addError(ApiKeyRouteErrors)
  .middleware(Authentication)
  .pipe(documented(PRINCIPAL_SESSIONS_DOCS))
{}

/** The principal's own routes: the session token only */
export class PrincipalApi extends HttpApiGroup.make("principal")
  .add(
    HttpApiEndpoint.get("grants", "/v1/principal/grants")
      .setUrlParams(Page)
      .addSuccess(Schema.Struct({ principalId: Schema.String, grants: Schema.Array(PrincipalGrant), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
      .annotate(RatePolicy, { routeLimit: 60 })
  )
  .add(
    HttpApiEndpoint.get("audit", "/v1/principal/audit")
      .setUrlParams(Page)
      .addSuccess(Schema.Struct({ entries: Schema.Array(AuditEntry), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
      .annotate(RatePolicy, { routeLimit: 60 })
  )
  .add(
    HttpApiEndpoint.del("revoke", "/v1/principal/grants/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(Schema.Void, { status: 204 })
      .addError(NotFound)
      .annotate(RatePolicy, { routeLimit: 30 })
  )
  .addError(Unauthorized)
  .addError(PublicRouteErrors)
  .middleware(PrincipalAuthentication)
  .pipe(documented(PRINCIPAL_DOCS))
{}

/**
 * The permissions page. The session token travels in the URL fragment (never sent to a server);
 * the page's script moves it into a form post, and every later step (revoke, its confirmation) is a
 * plain form post carrying it, so nothing but that first step needs JavaScript.
 */
export class PermissionsPageApi extends HttpApiGroup.make("permissionsPage")
  .add(HttpApiEndpoint.get("page", "/permissions").addSuccess(Html).annotate(RatePolicy, { routeLimit: 60 }))
  .add(HttpApiEndpoint.get("script", "/permissions/app.js").addSuccess(Js).annotate(RatePolicy, { routeLimit: 60 }))
  .add(
    HttpApiEndpoint.post("view", "/permissions/view")
      .setPayload(SessionForm)
      .addSuccess(Html)
      .annotate(RatePolicy, { routeLimit: 30 })
  )
  .add(
    HttpApiEndpoint.post("revokeAsk", "/permissions/revoke")
      .setPayload(GrantForm)
      .addSuccess(Html)
      .annotate(RatePolicy, { routeLimit: 30 })
  )
  .add(
    HttpApiEndpoint.post("revokeConfirm", "/permissions/revoke/confirm")
      .setPayload(GrantForm)
      .addSuccess(Html)
      .annotate(RatePolicy, { routeLimit: 30 })
  )
  // the person's own passkeys: rename, and remove with a confirmation
  .add(HttpApiEndpoint.post("renamePasskey", "/permissions/passkeys/rename").setPayload(RenameForm).addSuccess(Html).annotate(RatePolicy, { routeLimit: 30 }))
  .add(HttpApiEndpoint.post("removeAsk", "/permissions/passkeys/remove").setPayload(PasskeyForm).addSuccess(Html).annotate(RatePolicy, { routeLimit: 30 }))
  .add(
    HttpApiEndpoint.post("removeConfirm", "/permissions/passkeys/remove/confirm").setPayload(PasskeyForm).addSuccess(Html)
      .annotate(RatePolicy, { routeLimit: 30 })
  )
  .addError(PublicRouteErrors)
  .pipe(documented(PERMISSIONS_PAGE_DOCS))
{}
