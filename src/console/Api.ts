/**
 * The developer console (decisions §23): server-rendered pages over the public API.
 *
 * | Operation | Status | Code | Condition |
 * | - | - | - | - |
 * | sign-in | 401 | (page) | the API key is not valid |
 * | any form | 403 | (page) | posted from another site, or without the session's (or sign-in form's) CSRF token |
 * | page | 404 | (page) | no such console page or action |
 * | live | 401, 400, 429 | (JSON) | no session; as GET /v1/events/stream answers |
 * | all | 429 | RATE_LIMITED | the route's limit for the caller's address |
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { BodyErrors, PublicRouteErrors } from "../platform/Errors.ts"
import { documented } from "../platform/OperationDocs.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { CONSOLE_DOCS } from "./Docs.ts"

const Html = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/html" }))
const Field = Schema.String.pipe(Schema.maxLength(300))
const Csrf = Schema.String.pipe(Schema.maxLength(100))
const SignInForm = Schema.Struct({ apiKey: Field, csrf: Schema.optional(Csrf) }).pipe(HttpApiSchema.withEncoding({ kind: "UrlParams" }))
const SignOutForm = Schema.Struct({ csrf: Schema.optional(Csrf) }).pipe(HttpApiSchema.withEncoding({ kind: "UrlParams" }))
/** every field a console form sends (each action reads its own); a Cedar set's text up to 256 KiB */
const ACTION_FIELDS = [
  "action", "actions", "agentId", "alertId", "at", "bundleId", "channelId", "connectionId", "deliveryId", "description", "effect", "events", "expiresIn",
  "format", "grantId", "keyId", "kind", "label", "location", "name", "nature", "occurredAt", "extent", "policyId", "principalId", "redirectUris", "requestId", "ruleId", "scope", "scopes", "severities", "type",
  "since", "status", "tokenId", "until", "url", "version", "webhookId"
] as const
const Opt = Schema.optional(Schema.String.pipe(Schema.maxLength(4000)))
const ActionForm = Schema.Struct({
  // checked by the handler (a missing token answers 403, as a wrong one does)
  csrf: Schema.optional(Csrf),
  ...Object.fromEntries(ACTION_FIELDS.map((f) => [f, Opt])) as unknown as { readonly [K in typeof ACTION_FIELDS[number]]: typeof Opt },
  content: Schema.optional(Schema.String.pipe(Schema.maxLength(262_144))),
  affectedDataPrincipalIds: Schema.optional(Schema.String.pipe(Schema.maxLength(262_144)))
}).pipe(HttpApiSchema.withEncoding({ kind: "UrlParams" }))
const Name = Schema.String.pipe(Schema.maxLength(40))
const EventStreamText = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/event-stream" }))

export const CONSOLE_LIVE_PATH = "/console/live"

export class ConsoleApi extends HttpApiGroup.make("console")
  .add(HttpApiEndpoint.get("home", "/console").addSuccess(Html).annotate(RatePolicy, { routeLimit: 120 }))
  .add(HttpApiEndpoint.post("signIn", "/console/sign-in").setPayload(SignInForm).addSuccess(Html).addError(BodyErrors).annotate(RatePolicy, { routeLimit: 20 }))
  .add(HttpApiEndpoint.post("signOut", "/console/sign-out").setPayload(SignOutForm).addSuccess(Html).addError(BodyErrors).annotate(RatePolicy, { routeLimit: 60 }))
  .add(
    HttpApiEndpoint.get("live", CONSOLE_LIVE_PATH)
      .setUrlParams(Schema.Struct({ types: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))) }))
      .setHeaders(Schema.Struct({ "last-event-id": Schema.optional(Schema.String.pipe(Schema.maxLength(200))) }))
      .addSuccess(EventStreamText)
      .annotate(RatePolicy, { routeLimit: 60 })
  )
  .add(
    HttpApiEndpoint.get("page", "/console/:page")
      .setPath(Schema.Struct({ page: Name }))
      .addSuccess(Html)
      .annotate(RatePolicy, { routeLimit: 120 })
  )
  .add(
    HttpApiEndpoint.post("action", "/console/:page/:action")
      .setPath(Schema.Struct({ page: Name, action: Name }))
      .setPayload(ActionForm)
      .addSuccess(Html)
      .addError(BodyErrors)
      .annotate(RatePolicy, { routeLimit: 120 })
  )
  .addError(PublicRouteErrors)
  .pipe(documented(CONSOLE_DOCS))
{}
