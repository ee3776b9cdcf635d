/** Agents: the software agents a developer registers, with the scopes they may ever ask for. */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, InvalidRedirectUri, NotFound, PlanLimitExceeded } from "../platform/Errors.ts"

export const Scope = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(200),
  Schema.pattern(/^[A-Za-z0-9_.:*\/-]+$/, { message: () => "a scope is letters, digits and _ . : * / -" })
)
export const Scopes = Schema.Array(Scope).pipe(Schema.maxItems(100))

export const AgentView = Schema.Struct({
  agentId: Schema.String,
  did: Schema.String,
  developerId: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  scopes: Schema.Array(Schema.String),
  status: Schema.Literal("active", "suspended"),
  redirectUris: Schema.Array(Schema.String),
  createdAt: Schema.String,
  updatedAt: Schema.String
})

const Name = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))
const Description = Schema.String.pipe(Schema.maxLength(2000))
const IdPath = Schema.Struct({ id: Schema.String })
/** each checked by the service (400 INVALID_REDIRECT_URI); at most 20 (decisions §19) */
const RedirectUris = Schema.Array(Schema.String).pipe(Schema.maxItems(20))

export class AgentsApi extends HttpApiGroup.make("agents")
  .add(
    HttpApiEndpoint.post("create", "/v1/agents")
      .setPayload(Schema.Struct({
        name: Name,
        description: Schema.optional(Description),
        scopes: Schema.optional(Scopes),
        redirectUris: Schema.optional(RedirectUris)
      }))
      .addSuccess(AgentView, { status: 201 })
      .addError(BadRequest)
      .addError(InvalidRedirectUri)
      .addError(BodyErrors)
      .addError(PlanLimitExceeded)
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/agents")
      .setUrlParams(Schema.Struct({ cursor: Schema.optional(Schema.String), limit: Schema.optional(Schema.String) }))
      .addSuccess(Schema.Struct({ agents: Schema.Array(AgentView), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("get", "/v1/agents/:id").setPath(IdPath).addSuccess(AgentView).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/v1/agents/:id")
      .setPath(IdPath)
      .setPayload(Schema.Struct({
        name: Schema.optional(Name),
        description: Schema.optional(Schema.NullOr(Description)),
        scopes: Schema.optional(Scopes),
        status: Schema.optional(Schema.Literal("active", "suspended")),
        redirectUris: Schema.optional(RedirectUris)
      }))
      .addSuccess(AgentView)
      .addError(BadRequest)
      .addError(InvalidRedirectUri)
      .addError(BodyErrors)
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.del("remove", "/v1/agents/:id").setPath(IdPath).addSuccess(Schema.Void, { status: 204 }).addError(NotFound))
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
{}
