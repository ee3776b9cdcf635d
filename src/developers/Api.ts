/** Developers and API keys (decisions §2). */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, Conflict, PublicRouteErrors, SignupDisabled } from "../platform/Errors.ts"
import { RatePolicy } from "../platform/RateLimit.ts"

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
    HttpApiEndpoint.post("rotateKey", "/v1/keys/rotate")
      .addSuccess(Schema.Struct({ apiKey: Schema.String, rotatedAt: Schema.String }))
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
  )
{}
