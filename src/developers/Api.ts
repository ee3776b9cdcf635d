/** Developers and API keys (decisions §2). */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, Conflict, NotFound, PublicRouteErrors, SignupDisabled } from "../platform/Errors.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { documented } from "../platform/OperationDocs.ts"
import { DEVELOPERS_DOCS } from "./Docs.ts"

export const Plan = Schema.Literal("free", "pro", "enterprise")
export const Mode = Schema.Literal("live", "sandbox")

export const DeveloperView = Schema.Struct({
  developerId: Schema.String,
  name: Schema.String,
  email: Schema.NullOr(Schema.String),
  mode: Mode,
  plan: Plan,
  fidoRequired: Schema.Boolean,
  createdAt: Schema.String
})

const Email = Schema.String.pipe(Schema.maxLength(320), Schema.pattern(/^[^\s@]+@[^\s@]+\.[^\s@]+$/, { message: () => "must be an email address" }))
const Name = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))

export const KeyScope = Schema.Literal("full", "read")
export const KeyView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  scope: KeyScope,
  prefix: Schema.String,
  createdAt: Schema.String,
  lastUsedAt: Schema.NullOr(Schema.String)
})
const KeyName = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100))
/** POST /v1/keys/rotate's body, read by its handler: no body at all is an immediate rotation (as before grace periods) */
export const RotateKeyBody = Schema.Struct({ gracePeriodSeconds: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(0, 86_400))) })

export class DevelopersApi extends HttpApiGroup.make("developers")
  .add(
    HttpApiEndpoint.post("signup", "/v1/signup")
      .setPayload(Schema.Struct({ name: Name, email: Schema.optional(Email), mode: Schema.optional(Mode) }))
      .addSuccess(Schema.Struct({ ...DeveloperView.fields, apiKey: Schema.String }), { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(Conflict)
      .addError(SignupDisabled)
      .addError(PublicRouteErrors)
      .annotate(RatePolicy, { hourlyPerAddress: (figures) => figures.signupPerHour })
  )
  .add(
    HttpApiEndpoint.get("me", "/v1/me")
      .addSuccess(DeveloperView)
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
  )
  .add(
    HttpApiEndpoint.patch("updateMe", "/v1/me")
      .setPayload(Schema.Struct({ name: Schema.optional(Name), fidoRequired: Schema.optional(Schema.Boolean) }))
      .addSuccess(DeveloperView)
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
  )
  .add(
    HttpApiEndpoint.post("createKey", "/v1/keys")
      .setPayload(Schema.Struct({ name: KeyName, scope: KeyScope }))
      .addSuccess(Schema.Struct({ id: Schema.String, name: Schema.String, scope: KeyScope, apiKey: Schema.String, prefix: Schema.String, createdAt: Schema.String }), { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(Conflict)
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
  )
  .add(
    HttpApiEndpoint.get("listKeys", "/v1/keys")
      .addSuccess(Schema.Struct({ keys: Schema.Array(KeyView) }))
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
  )
  .add(
    HttpApiEndpoint.del("deleteKey", "/v1/keys/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(HttpApiSchema.NoContent)
      .addError(NotFound)
      .addError(Conflict)
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
  )
  .add(
    HttpApiEndpoint.post("rotateKey", "/v1/keys/rotate")
      .addSuccess(Schema.Struct({ apiKey: Schema.String, rotatedAt: Schema.String }))
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(Conflict)
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
      // the body is optional, which the platform's decoding does not allow: the handler reads it
      .annotate(OpenApi.Override, {
        requestBody: {
          required: false,
          content: {
            "application/json": {
              schema: { type: "object", additionalProperties: false, properties: { gracePeriodSeconds: { type: "integer", minimum: 0, maximum: 86_400, default: 0 } } }
            }
          }
        }
      })
  )
  .pipe(documented(DEVELOPERS_DOCS))
{}
