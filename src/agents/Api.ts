/** Agents: the software agents a developer registers, with the scopes they may ever ask for. */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, Conflict, InvalidRedirectUri, NotFound, PlanLimitExceeded } from "../platform/Errors.ts"
import { documented } from "../platform/OperationDocs.ts"
import { AGENTS_DOCS } from "./Docs.ts"

export const Scope = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(200),
  Schema.pattern(/^[A-Za-z0-9_.:*\/-]+$/, { message: () => "a scope is letters, digits and _ . : * / -" })
)
export const Scopes = Schema.Array(Scope).pipe(Schema.maxItems(100))

/** decisions §22.3: the agent as an OAuth client, when it is one */
const OAuthProfileView = Schema.Struct({
  clientId: Schema.String,
  origin: Schema.Literal("api", "dcr", "cimd"),
  clientType: Schema.Literal("public", "confidential"),
  tokenEndpointAuthMethod: Schema.String,
  redirectUris: Schema.Array(Schema.String),
  grantTypes: Schema.Array(Schema.String),
  applicationType: Schema.Literal("web", "native"),
  clientUri: Schema.NullOr(Schema.String),
  tokenExchange: Schema.Boolean,
  verified: Schema.Boolean
})

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
  updatedAt: Schema.String,
  oauth: Schema.optional(OAuthProfileView)
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
      .setUrlParams(Schema.Struct({
        cursor: Schema.optional(Schema.String),
        limit: Schema.optional(Schema.String),
        /** decisions §22.3: the agents that are OAuth clients of this origin */
        origin: Schema.optional(Schema.Literal("api", "dcr", "cimd"))
      }))
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
      .addError(Conflict)
  )
  .add(HttpApiEndpoint.del("remove", "/v1/agents/:id").setPath(IdPath).addSuccess(Schema.Void, { status: 204 }).addError(NotFound))
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
  .pipe(documented(AGENTS_DOCS))
{}
