/**
 * The SCIM 2.0 endpoints as an identity provider meets them (decisions §11): `/scim/v2/*` read their
 * bodies themselves and answer everything, errors included, as `application/scim+json` in the RFC
 * 7644 shape, so the generated document knows none of it. `documentScim` adds, per operation, the
 * SCIM token scheme, both accepted body media types, the answer's media type and the SCIM errors the
 * operation can answer (Document.ts calls it after the operation's own documentation); SCIM_BODIES
 * types the bodies those handlers read.
 */

export const SCIM_PREFIX = "/scim/v2/"
/** discovery (ServiceProviderConfig, ResourceTypes, Schemas) needs no token (decisions §11, revised) */
export const isScimDiscovery = (path: string) => /^\/scim\/v2\/(ServiceProviderConfig|ResourceTypes|Schemas)(\/|$)/.test(path)
const URN_ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"

export const SCIM_ERROR_SCHEMA = {
  type: "object",
  required: ["schemas", "status", "detail"],
  description: "An RFC 7644 §3.12 error, answered as application/scim+json (with `WWW-Authenticate: Bearer` on 401, `Retry-After` on 429).",
  properties: {
    schemas: { type: "array", items: { type: "string", enum: [URN_ERROR] } },
    status: { type: "string", description: "the HTTP status, as a string" },
    scimType: { type: "string", enum: ["invalidFilter", "tooMany", "uniqueness", "mutability", "invalidSyntax", "invalidPath", "noTarget", "invalidValue", "invalidVers"] },
    detail: { type: "string" }
  },
  additionalProperties: false
}

const str = { type: "string" }
const userSchema = {
  type: "object",
  required: ["userName"],
  additionalProperties: true,
  properties: {
    schemas: { type: "array", items: str }, userName: str, externalId: str, displayName: str, active: { type: ["boolean", "string"] },
    name: { type: "object", additionalProperties: true, properties: { givenName: str, familyName: str, formatted: str } },
    emails: { type: "array", items: { type: "object", additionalProperties: true, properties: { value: str, type: str, primary: { type: ["boolean", "string"] } } } },
    phoneNumbers: { type: "array", items: { type: "object", additionalProperties: true, properties: { value: str, type: str } } }
  }
}
const groupSchema = {
  type: "object",
  required: ["displayName"],
  additionalProperties: true,
  properties: {
    schemas: { type: "array", items: str }, displayName: str, externalId: str,
    members: { type: "array", items: { type: "object", additionalProperties: true, properties: { value: str, display: str } } }
  }
}
const patchSchema = {
  type: "object",
  required: ["schemas", "Operations"],
  properties: {
    schemas: { type: "array", items: str },
    Operations: { type: "array", items: { type: "object", additionalProperties: true, properties: { op: str, path: str, value: {} } } }
  }
}

/** the SCIM bodies the handlers read themselves, typed for the document only */
export const SCIM_BODIES: Record<string, Record<string, unknown>> = {
  "POST /scim/v2/Users": userSchema,
  "PUT /scim/v2/Users/{id}": userSchema,
  "PATCH /scim/v2/Users/{id}": patchSchema,
  "POST /scim/v2/Groups": groupSchema,
  "PUT /scim/v2/Groups/{id}": groupSchema,
  "PATCH /scim/v2/Groups/{id}": patchSchema
}

/** the SCIM errors an operation answers besides the gate's (401, 429, 500, 503) */
export const SCIM_ERRORS: Record<string, Record<number, string>> = {}
const BODY_ERRORS = { 413: "the body is over 1 MiB", 415: "the body is neither application/scim+json nor application/json" }
const errors = (key: string, statuses: Record<number, string>) => { SCIM_ERRORS[key] = statuses }
errors("GET /scim/v2/ResourceTypes/{id}", { 404: "no such resource type" })
errors("GET /scim/v2/Schemas/{id}", { 404: "no such schema" })
errors("GET /scim/v2/Users", { 400: "`invalidFilter` (syntax, over 1,000 characters or 20 comparisons, an unknown attribute), `invalidValue` (`startIndex` or `count` not an integer)" })
errors("POST /scim/v2/Users", { 400: "`invalidSyntax` (not JSON, nested too deep), `invalidValue` (an attribute of the wrong type; `externalId` missing when it names the principal)", 409: "`uniqueness`: the userName (any case) or externalId is taken", ...BODY_ERRORS })
errors("GET /scim/v2/Users/{id}", { 404: "no such user (or deleted)" })
errors("PUT /scim/v2/Users/{id}", { 400: "`invalidSyntax`, `invalidValue` (an attribute of the wrong type)", 404: "no such user", 409: "`uniqueness`", 412: "`If-Match` names another version", ...BODY_ERRORS })
errors("PATCH /scim/v2/Users/{id}", { 400: "`invalidSyntax` (not a PatchOp, over 100 operations), `invalidPath`, `invalidValue`, `mutability`, `noTarget` (a remove or replace filter matched nothing)", 404: "no such user", 409: "`uniqueness`", 412: "`If-Match` names another version", ...BODY_ERRORS })
errors("DELETE /scim/v2/Users/{id}", { 404: "no such user", 412: "`If-Match` names another version" })
errors("GET /scim/v2/Groups", { 400: "`invalidFilter`, `invalidValue`" })
errors("POST /scim/v2/Groups", { 400: "`invalidSyntax`, `invalidValue` (an unknown member)", ...BODY_ERRORS })
errors("GET /scim/v2/Groups/{id}", { 404: "no such group" })
errors("PUT /scim/v2/Groups/{id}", { 400: "`invalidSyntax`, `invalidValue` (an unknown member)", 404: "no such group", 409: "the group changed concurrently: retry", 412: "`If-Match` names another version", ...BODY_ERRORS })
errors("PATCH /scim/v2/Groups/{id}", { 400: "`invalidSyntax`, `invalidPath`, `invalidValue`, `noTarget` (removing a member the group does not have)", 404: "no such group", 409: "the group changed concurrently: retry", 412: "`If-Match` names another version", ...BODY_ERRORS })
errors("DELETE /scim/v2/Groups/{id}", { 404: "no such group", 412: "`If-Match` names another version" })
const GATE: Record<number, string> = {
  401: "the SCIM token is missing, unknown, deleted or expired",
  429: "over 600 requests a minute for this token or 1,200 for your account (`Retry-After` says when to retry)",
  500: "an unexpected failure (nothing internal is shown)",
  503: "the database or the rate limiter is unavailable"
}

/** the SCIM token, the body and answer media types and the SCIM errors of one /scim/v2 operation */
export const documentScim = (spec: Record<string, any>, key: string, op: Record<string, any>) => {
  spec.components.schemas ??= {}
  spec.components.schemas.ScimError = SCIM_ERROR_SCHEMA
  const path = key.slice(key.indexOf(" ") + 1)
  op.security = isScimDiscovery(path) ? [] : [{ scimToken: [] }]
  // Okta and Entra ID send application/scim+json; application/json is read the same
  const body = op.requestBody?.content?.["application/json"]
  if (body !== undefined) op.requestBody.content = { "application/scim+json": body, "application/json": body }
  for (const [status, response] of Object.entries<any>(op.responses ?? {})) {
    if (Number(status) < 300 && response.content?.["application/json"] !== undefined) {
      response.content = { "application/scim+json": response.content["application/json"] }
    }
    if (Number(status) >= 400) delete op.responses[status]
  }
  const { 401: unauthorized, ...gate } = GATE
  for (const [status, why] of Object.entries({ ...SCIM_ERRORS[key], ...gate, ...(isScimDiscovery(path) ? {} : { 401: unauthorized }) })) {
    op.responses[status] = { description: why, content: { "application/scim+json": { schema: { $ref: "#/components/schemas/ScimError" } } } }
  }
}
