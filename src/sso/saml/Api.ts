/**
 * The SAML routes (decisions §12), public (the IdP and the browser call them, not a developer):
 * the SP metadata, the ACS taking the browser's form post, and the JSON callback of the published
 * protocol.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { BadRequest, BodyErrors, NotFound, PublicRouteErrors, SsoAuthFailed, SsoError } from "../../platform/Errors.ts"
import { RatePolicy } from "../../platform/RateLimit.ts"
import { SessionResult } from "../Api.ts"
import { documented } from "../../platform/OperationDocs.ts"
import { SAML_DOCS } from "./Docs.ts"

const Xml = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "application/samlmetadata+xml" }))
const Html = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/html" }))
const ConnectionPath = Schema.Struct({ connectionId: Schema.String })

/** A SAMLResponse is base64 of at most 1 MiB (the body limit refuses more, 413, before it is read). */
const SAMLResponse = Schema.String.pipe(Schema.minLength(1))
const RelayState = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))

export class SamlApi extends HttpApiGroup.make("saml")
  .add(
    HttpApiEndpoint.get("samlMetadata", "/sso/saml/metadata/:connectionId")
      .setPath(ConnectionPath)
      .addSuccess(Xml)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("samlAcs", "/sso/saml/acs/:connectionId")
      .setPath(ConnectionPath)
      // no RelayState: an IdP-initiated sign-in (an app tile), answered with a page that says to start from the app
      .setPayload(Schema.Struct({ SAMLResponse, RelayState: Schema.optional(RelayState) }).pipe(HttpApiSchema.withEncoding({ kind: "UrlParams" })))
      // 303 to the consent page or the stored redirect (with error=access_denied when refused);
      // a page when the login has nowhere to go back to
      .addSuccess(Html)
      .addError(BadRequest)
      .addError(BodyErrors)
      .annotate(RatePolicy, { routeLimit: 60 })
  )
  .add(
    HttpApiEndpoint.post("samlCallback", "/sso/callback/saml")
      .setPayload(Schema.Struct({ SAMLResponse, RelayState }))
      .addSuccess(SessionResult)
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(SsoAuthFailed)
      .addError(SsoError)
      .annotate(RatePolicy, { routeLimit: 60 })
  )
  .addError(PublicRouteErrors)
  .pipe(documented(SAML_DOCS))
{}
