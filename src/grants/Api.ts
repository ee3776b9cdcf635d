/** Grants, delegation, and grant-token verification and revocation (decisions §3). */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Scopes } from "../agents/Api.ts"
import { CredentialRequestFields, IssuedCredentialFields } from "../credentials/Api.ts"
import { Authentication } from "../platform/Auth.ts"
import {
  AgentNotFound, AgentSuspended, ApiKeyRouteErrors, BadRequest, BodyErrors, DelegationDepthExceeded, InvalidScopes, InvalidToken,
  NotFound, PlanLimitExceeded, PolicyDenied, ScopeEscalation, PrincipalInactive
} from "../platform/Errors.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { documented } from "../platform/OperationDocs.ts"
import { GRANTS_DOCS } from "./Docs.ts"

export const GrantView = Schema.Struct({
  grantId: Schema.String,
  agentId: Schema.String,
  principalId: Schema.String,
  developerId: Schema.String,
  scopes: Schema.Array(Schema.String),
  status: Schema.Literal("active", "revoked", "expired"),
  issuedAt: Schema.String,
  expiresAt: Schema.String,
  revokedAt: Schema.NullOr(Schema.String),
  parentGrantId: Schema.NullOr(Schema.String),
  delegationDepth: Schema.Number,
  /** decisions §20: how the grant was approved (null: made before this was recorded), and the approving policy */
  approvalMethod: Schema.NullOr(Schema.Literal("consent", "sso", "passkey", "policy", "developer", "sandbox")),
  policyId: Schema.NullOr(Schema.String)
})

const IdPath = Schema.Struct({ id: Schema.String })

export class GrantsApi extends HttpApiGroup.make("grants")
  .add(
    HttpApiEndpoint.get("list", "/v1/grants")
      .setUrlParams(Schema.Struct({
        agentId: Schema.optional(Schema.String),
        principalId: Schema.optional(Schema.String),
        // decisions §22.5: the grants made for one OAuth resource server
        resourceServerId: Schema.optional(Schema.String),
        status: Schema.optional(Schema.Literal("active", "revoked", "expired")),
        cursor: Schema.optional(Schema.String),
        limit: Schema.optional(Schema.String)
      }))
      .addSuccess(Schema.Struct({ grants: Schema.Array(GrantView), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("get", "/v1/grants/:id").setPath(IdPath).addSuccess(GrantView).addError(NotFound))
  .add(
    HttpApiEndpoint.del("revoke", "/v1/grants/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Void, { status: 204 })
      .addError(NotFound)
      .annotate(RatePolicy, { developerBudget: "containment" })
  )
  .add(
    HttpApiEndpoint.post("delegate", "/v1/grants/delegate")
      .setPayload(Schema.Struct({
        parentGrantToken: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(10000)),
        subAgentId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
        scopes: Scopes,
        expiresIn: Schema.optional(Schema.String),
        ...CredentialRequestFields
      }))
      .addSuccess(Schema.Struct({
        grantToken: Schema.String,
        expiresAt: Schema.String,
        scopes: Schema.Array(Schema.String),
        grantId: Schema.String,
        ...IssuedCredentialFields
      }), { status: 201 })
      .addError(BadRequest)
      .addError(InvalidToken)
      .addError(BodyErrors)
      .addError(NotFound)
      .addError(AgentNotFound)
      .addError(AgentSuspended)
      .addError(ScopeEscalation)
      .addError(DelegationDepthExceeded)
      .addError(InvalidScopes)
      .addError(PrincipalInactive)
      .addError(PolicyDenied)
      .addError(PlanLimitExceeded)
  )
  .add(
    HttpApiEndpoint.post("verify", "/v1/tokens/verify")
      .setPayload(Schema.Struct({
        token: Schema.String.pipe(Schema.maxLength(10000)),
        /** decisions §22.7: the token's `aud` must contain it, else `valid: false` */
        audience: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2048)))
      }))
      .addSuccess(Schema.Union(
        Schema.Struct({ valid: Schema.Literal(false) }),
        Schema.Struct({
          valid: Schema.Literal(true),
          grantId: Schema.String,
          scopes: Schema.Array(Schema.String),
          principal: Schema.String,
          agent: Schema.String,
          expiresAt: Schema.String,
          /** an OAuth access token's (decisions §22.7): its resource and client */
          audience: Schema.optional(Schema.String),
          clientId: Schema.optional(Schema.String)
        })
      ))
      .addError(BadRequest)
      .addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.post("revokeToken", "/v1/tokens/revoke")
      .setPayload(Schema.Struct({ jti: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)) }))
      .addSuccess(Schema.Void, { status: 204 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .annotate(RatePolicy, { developerBudget: "containment" })
  )
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
  .pipe(documented(GRANTS_DOCS))
{}
