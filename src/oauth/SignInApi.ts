/**
 * The OAuth sign-in's browser routes (decisions §22.5), under each developer's issuer: the methods
 * a chooser links to, and the passkey step's two JSON calls and script. Every route needs the
 * `__Host-oauth_ix` cookie of the request `ix` names (the handlers read it); errors are pages or,
 * for the JSON calls, RFC 6749-shaped bodies.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { BodyErrors, PublicRouteErrors } from "../platform/Errors.ts"
import { documented } from "../platform/OperationDocs.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { OAUTH_SIGN_IN_DOCS } from "./Docs.ts"

const Html = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/html" }))
const Js = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/javascript" }))
const Issuer = Schema.Struct({ developerId: Schema.String })
const Ix = Schema.Struct({ ix: Schema.optional(Schema.String) })
const LIMIT = { routeLimit: 60 }

export class OAuthSignInApi extends HttpApiGroup.make("oauthSignIn")
  .add(HttpApiEndpoint.get("developer", "/oauth/:developerId/login/developer").setPath(Issuer).setUrlParams(Ix).addSuccess(Html).annotate(RatePolicy, LIMIT))
  .add(
    HttpApiEndpoint.get("sso", "/oauth/:developerId/login/sso").setPath(Issuer)
      .setUrlParams(Schema.Struct({
        ix: Schema.optional(Schema.String), connection: Schema.optional(Schema.String), done: Schema.optional(Schema.String), error: Schema.optional(Schema.String)
      }))
      .addSuccess(Html).annotate(RatePolicy, LIMIT)
  )
  .add(HttpApiEndpoint.get("passkey", "/oauth/:developerId/login/passkey").setPath(Issuer).setUrlParams(Ix).addSuccess(Html).annotate(RatePolicy, LIMIT))
  .add(
    HttpApiEndpoint.post("passkeyOptions", "/oauth/:developerId/login/passkey/options").setPath(Issuer)
      .setPayload(Schema.Struct({ ix: Schema.String })).addSuccess(Schema.Unknown).addError(BodyErrors).annotate(RatePolicy, LIMIT)
  )
  .add(
    HttpApiEndpoint.post("passkeyVerify", "/oauth/:developerId/login/passkey/verify").setPath(Issuer)
      .setPayload(Schema.Struct({ ix: Schema.String, challengeId: Schema.String, response: Schema.Unknown })).addSuccess(Schema.Unknown).addError(BodyErrors)
      .annotate(RatePolicy, LIMIT)
  )
  .add(HttpApiEndpoint.get("passkeyScript", "/oauth/:developerId/login/passkey.js").setPath(Issuer).addSuccess(Js))
  .addError(PublicRouteErrors)
  .pipe(documented(OAUTH_SIGN_IN_DOCS))
{}
