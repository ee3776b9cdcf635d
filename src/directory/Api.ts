/**
 * Directory and SCIM 2.0 provisioning (decisions §11).
 *
 * `/v1/scim/*` (API key): SCIM tokens and settings.
 * | Operation | Status | Code | Condition |
 * | - | - | - | - |
 * | createToken | 400 | BAD_REQUEST | label not 1-100 characters, expiresIn outside 1d..730d |
 * | createToken | 409 | CONFLICT | 10 live tokens already |
 * | deleteToken | 404 | NOT_FOUND | no such live token of this developer |
 * | updateSettings | 409 | CONFLICT | principalIdAttribute changed once users exist |
 * | all | 401 | UNAUTHORIZED | invalid or missing API key |
 *
 * `/scim/v2/*` (SCIM token): RFC 7644. Bodies are read by the handlers (application/scim+json or
 * application/json) and every answer, errors included, is application/scim+json in the SCIM shape,
 * so these endpoints declare no schema of their own.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, Conflict, NotFound } from "../platform/Errors.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { documented } from "../platform/OperationDocs.ts"
import { SCIM_DOCS, SCIM_TOKENS_DOCS } from "./Docs.ts"

const Token = Schema.Struct({
  id: Schema.String,
  label: Schema.String,
  createdAt: Schema.String,
  lastUsedAt: Schema.NullOr(Schema.String),
  expiresAt: Schema.NullOr(Schema.String)
})

const Settings = Schema.Struct({
  principalIdAttribute: Schema.Literal("userName", "externalId", "id"),
  deprovision: Schema.Literal("revoke", "none")
})

export class ScimTokensApi extends HttpApiGroup.make("scimTokens")
  .add(
    HttpApiEndpoint.post("createToken", "/v1/scim/tokens")
      .setPayload(Schema.Struct({ label: Schema.String.pipe(Schema.maxLength(1000)), expiresIn: Schema.optional(Schema.String) }))
      .addSuccess(Schema.Struct({ ...Token.fields, tokenId: Schema.String, token: Schema.String }), { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(Conflict)
  )
  .add(HttpApiEndpoint.get("listTokens", "/v1/scim/tokens").addSuccess(Schema.Struct({ tokens: Schema.Array(Token) })))
  .add(
    HttpApiEndpoint.del("deleteToken", "/v1/scim/tokens/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(Schema.Void, { status: 204 })
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.get("getSettings", "/v1/scim/settings").addSuccess(Settings))
  .add(
    HttpApiEndpoint.patch("updateSettings", "/v1/scim/settings")
      .setPayload(Schema.partial(Settings))
      .addSuccess(Settings)
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(Conflict)
  )
  .addError(ApiKeyRouteErrors)
  .middleware(Authentication)
  .pipe(documented(SCIM_TOKENS_DOCS))
{}

const Id = Schema.Struct({ id: Schema.String })
const Resource = Schema.Unknown.annotations({ description: "a SCIM resource or ListResponse (application/scim+json)" })

const get = <const N extends string>(name: N, path: `/${string}`) => HttpApiEndpoint.get(name, `/scim/v2${path}`).addSuccess(Resource)
/** discovery holds no tenant data: answered without a token (§11, revised), limited per source address */
const discover = <const N extends string>(name: N, path: `/${string}`) => get(name, path).annotate(RatePolicy, { routeLimit: 120 })

export class ScimApi extends HttpApiGroup.make("scim")
  .add(discover("serviceProviderConfig", "/ServiceProviderConfig"))
  .add(discover("resourceTypes", "/ResourceTypes"))
  .add(discover("resourceType", "/ResourceTypes/:id").setPath(Id))
  .add(discover("schemas", "/Schemas"))
  .add(discover("schema", "/Schemas/:id").setPath(Id))
  .add(get("listUsers", "/Users"))
  .add(HttpApiEndpoint.post("createUser", "/scim/v2/Users").addSuccess(Resource, { status: 201 }))
  .add(get("getUser", "/Users/:id").setPath(Id))
  .add(HttpApiEndpoint.put("replaceUser", "/scim/v2/Users/:id").setPath(Id).addSuccess(Resource))
  .add(HttpApiEndpoint.patch("patchUser", "/scim/v2/Users/:id").setPath(Id).addSuccess(Resource))
  .add(HttpApiEndpoint.del("deleteUser", "/scim/v2/Users/:id").setPath(Id).addSuccess(Schema.Void, { status: 204 }))
  .add(get("listGroups", "/Groups"))
  .add(HttpApiEndpoint.post("createGroup", "/scim/v2/Groups").addSuccess(Resource, { status: 201 }))
  .add(get("getGroup", "/Groups/:id").setPath(Id))
  .add(HttpApiEndpoint.put("replaceGroup", "/scim/v2/Groups/:id").setPath(Id).addSuccess(Resource))
  .add(HttpApiEndpoint.patch("patchGroup", "/scim/v2/Groups/:id").setPath(Id).addSuccess(Resource))
  .add(HttpApiEndpoint.del("deleteGroup", "/scim/v2/Groups/:id").setPath(Id).addSuccess(Schema.Void, { status: 204 }))
  .annotate(RatePolicy, { scimToken: true })
  .annotate(OpenApi.Description, "SCIM 2.0 (RFC 7644) for identity providers; Authorization: Bearer <SCIM token>")
  .pipe(documented(SCIM_DOCS))
{}
