/**
 * The directory's documentation (decisions §11): SCIM tokens and settings (API key), and the SCIM 2.0
 * endpoints an identity provider calls (`/scim/v2/*`). Those endpoints read their bodies themselves
 * and answer everything, errors included, as `application/scim+json` in the RFC 7644 shape, so the
 * generated document knows none of it: `documentScim` adds, per operation, the SCIM token scheme,
 * the body (document-only JSON Schema, both accepted media types), the answer's media type and the
 * SCIM errors the operation can answer (Document.ts calls it).
 */
import type { OperationDoc } from "./Document.ts"
import { PRINCIPAL, T } from "./Examples.ts"

export const SCIM_PREFIX = "/scim/v2/"
const BASE = "http://localhost:3001"
const USER_ID = "scimuser_01JDQ9PZ3ABCDEFGHJKMNPQRST"
const GROUP_ID = "scimgrp_01JDQ9QA4BCDEFGHJKMNPQRSTV"
const TOKEN_ID = "scimtok_01JDQ9RB5CDEFGHJKMNPQRSTVW"
const URN = {
  user: "urn:ietf:params:scim:schemas:core:2.0:User",
  group: "urn:ietf:params:scim:schemas:core:2.0:Group",
  enterprise: "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User",
  agentauth: "urn:ietf:params:scim:schemas:extension:agentauth:2.0:User",
  list: "urn:ietf:params:scim:api:messages:2.0:ListResponse",
  patch: "urn:ietf:params:scim:api:messages:2.0:PatchOp",
  error: "urn:ietf:params:scim:api:messages:2.0:Error"
} as const

// ---- document-only JSON Schemas (the handlers judge what is valid; IdPs send more, which is ignored)
const str = { type: "string" }
const multiValued = { type: "array", items: { type: "object", properties: { value: str, type: str, primary: { type: ["boolean", "string"] }, display: str } } }
const schemasProp = { type: "array", items: str }
const UserBody = {
  type: "object",
  required: ["userName"],
  description: "A SCIM User (RFC 7643 §4.1). Attribute names are case-insensitive; booleans may be the strings \"True\"/\"False\". " +
    "Attributes not stored here (title, addresses, roles, password…) are accepted and ignored.",
  properties: {
    schemas: schemasProp,
    userName: { type: "string", maxLength: 256, description: "unique per developer, compared case-insensitively" },
    externalId: { type: "string", maxLength: 256, description: "the identity provider's id; unique per developer, compared exactly" },
    active: { type: ["boolean", "string"], description: "false deprovisions the principal (see the group's description)" },
    displayName: str,
    name: { type: "object", properties: { givenName: str, familyName: str, formatted: str } },
    emails: multiValued,
    phoneNumbers: multiValued,
    [URN.enterprise]: {
      type: "object",
      properties: { employeeNumber: str, department: str, manager: { type: ["object", "string"], properties: { value: str } } }
    }
  },
  additionalProperties: true
}
const GroupBody = {
  type: "object",
  required: ["displayName"],
  properties: {
    schemas: schemasProp,
    displayName: { type: "string", maxLength: 256 },
    externalId: { type: "string", maxLength: 256 },
    members: { type: "array", maxItems: 1000, items: { type: "object", required: ["value"], properties: { value: { type: "string", description: "a SCIM user id" }, display: str } } }
  },
  additionalProperties: true
}
const PatchBody = {
  type: "object",
  required: ["schemas", "Operations"],
  description: "A SCIM PatchOp (RFC 7644 §3.5.2): every operation applies, or none.",
  properties: {
    schemas: { type: "array", items: { type: "string", enum: [URN.patch] } },
    Operations: {
      type: "array",
      maxItems: 100,
      items: {
        type: "object",
        required: ["op"],
        properties: {
          op: { type: "string", description: "add, replace or remove, in any case (Entra ID sends Replace)" },
          path: { type: "string", description: "an attribute path, with a filter (`emails[type eq \"work\"].value`) or an extension URN; absent: `value` is an object of attributes" },
          value: {}
        }
      }
    }
  }
}
export const SCIM_ERROR_SCHEMA = {
  type: "object",
  required: ["schemas", "status", "detail"],
  description: "An RFC 7644 §3.12 error, answered as application/scim+json (with `WWW-Authenticate: Bearer` on 401, `Retry-After` on 429).",
  properties: {
    schemas: { type: "array", items: { type: "string", enum: [URN.error] } },
    status: { type: "string", description: "the HTTP status, as a string" },
    scimType: { type: "string", enum: ["invalidFilter", "tooMany", "uniqueness", "mutability", "invalidSyntax", "invalidPath", "noTarget", "invalidValue", "invalidVers"] },
    detail: str
  },
  additionalProperties: false
}

// ---- examples
const meta = (type: "User" | "Group", id: string, version: number) => ({
  resourceType: type, created: T, lastModified: T, version: `W/"${version}"`, location: `${BASE}/scim/v2/${type}s/${id}`
})
const user = {
  schemas: [URN.user, URN.enterprise, URN.agentauth],
  id: USER_ID,
  externalId: "00u1a2b3c4D5e6F7g8h9",
  userName: "asha.rao@acme.example",
  displayName: "Asha Rao",
  active: true,
  name: { givenName: "Asha", familyName: "Rao", formatted: "Asha Rao" },
  emails: [{ value: "asha.rao@acme.example", type: "work", primary: true }],
  [URN.enterprise]: { employeeNumber: "E1042", department: "Finance" },
  [URN.agentauth]: { principalId: PRINCIPAL },
  meta: meta("User", USER_ID, 1)
}
const userInput = {
  schemas: [URN.user, URN.enterprise],
  externalId: "00u1a2b3c4D5e6F7g8h9",
  userName: "asha.rao@acme.example",
  active: true,
  name: { givenName: "Asha", familyName: "Rao" },
  emails: [{ value: "asha.rao@acme.example", type: "work", primary: true }],
  [URN.enterprise]: { employeeNumber: "E1042", department: "Finance" }
}
const group = {
  schemas: [URN.group], id: GROUP_ID, externalId: "00g9z8y7x6W5v4U3t2s1", displayName: "Finance",
  members: [{ value: USER_ID, display: "asha.rao@acme.example", $ref: `${BASE}/scim/v2/Users/${USER_ID}` }],
  meta: meta("Group", GROUP_ID, 3)
}
const list = (resources: Array<unknown>) => ({ schemas: [URN.list], totalResults: resources.length, startIndex: 1, itemsPerPage: resources.length, Resources: resources })
const IF_MATCH = "An `If-Match` that names another version answers 412 (the resource changed since it was read); without one, the change applies."

/** the SCIM errors an operation answers besides the gate's (401, 429, 500, 503) */
const ERRORS: Record<string, Record<number, string>> = {}
const BODY_ERRORS = { 413: "the body is over 1 MiB", 415: "the body is neither application/scim+json nor application/json" }
const errors = (key: string, statuses: Record<number, string>) => { ERRORS[key] = statuses }
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

const SCIM_BODIES: Record<string, Record<string, unknown>> = {
  "POST /scim/v2/Users": UserBody,
  "PUT /scim/v2/Users/{id}": UserBody,
  "PATCH /scim/v2/Users/{id}": PatchBody,
  "POST /scim/v2/Groups": GroupBody,
  "PUT /scim/v2/Groups/{id}": GroupBody,
  "PATCH /scim/v2/Groups/{id}": PatchBody
}

/** the SCIM token, the body, the answer's media type and the SCIM errors of one /scim/v2 operation */
export const documentScim = (spec: Record<string, any>, key: string, op: Record<string, any>, doc: OperationDoc | undefined) => {
  spec.components.schemas ??= {}
  spec.components.schemas.ScimError = SCIM_ERROR_SCHEMA
  op.security = [{ scimToken: [] }]
  const body = SCIM_BODIES[key]
  if (body !== undefined) {
    const content = { schema: body, ...(doc?.request !== undefined ? { example: doc.request } : {}) }
    op.requestBody = { required: true, content: { "application/scim+json": content, "application/json": content } }
  }
  for (const [status, response] of Object.entries<any>(op.responses ?? {})) {
    if (Number(status) < 300 && response.content?.["application/json"] !== undefined) {
      response.content = { "application/scim+json": response.content["application/json"] }
    }
    if (Number(status) >= 400) delete op.responses[status]
  }
  for (const [status, why] of Object.entries({ ...ERRORS[key], ...GATE })) {
    op.responses[status] = { description: why, content: { "application/scim+json": { schema: { $ref: "#/components/schemas/ScimError" } } } }
  }
}

export const SCIM_OPERATIONS: Record<string, OperationDoc> = {
  "POST /v1/scim/tokens": {
    summary: "Create a SCIM token",
    description: "Called by you once per identity provider connection (Okta, Entra ID…): answers the bearer token the provider sends to `/scim/v2/*`, **shown once** (stored as a SHA-256). `label` 1–100 characters; `expiresIn` `1d`–`730d` (default: no expiry). At most 10 live tokens (409 `CONFLICT`). Each token is limited to 600 SCIM requests a minute, and SCIM traffic never draws on your plan's API budget.",
    request: { label: "Okta production", expiresIn: "365d" },
    response: { id: TOKEN_ID, tokenId: TOKEN_ID, label: "Okta production", token: "scim_q2Vb8nWc3yZp1dAe6Hs0Jk2Lq5Nr8Tu1WxY4zA7bC0d", createdAt: T, lastUsedAt: null, expiresAt: "2027-11-24T09:30:00.000Z" }
  },
  "GET /v1/scim/tokens": {
    summary: "List SCIM tokens",
    description: "Your live SCIM tokens (never the token itself), with when each was last used (updated at most once a minute).",
    response: { tokens: [{ id: TOKEN_ID, label: "Okta production", createdAt: T, lastUsedAt: "2026-11-24T10:02:00.000Z", expiresAt: "2027-11-24T09:30:00.000Z" }] }
  },
  "DELETE /v1/scim/tokens/{id}": {
    summary: "Delete a SCIM token",
    description: "Revokes the token at once, on every instance: the provider's next request answers 401. 404 for an unknown or already deleted token."
  },
  "GET /v1/scim/settings": {
    summary: "Read directory settings",
    description: "How provisioned users map to principals: `principalIdAttribute` (`userName`, the default, `externalId` or `id`) is the SCIM attribute whose value becomes the user's `principalId` (the id your authorization requests use), and `deprovision` (`revoke`, the default, or `none`) whether deactivating a user revokes their grants.",
    response: { principalIdAttribute: "userName", deprovision: "revoke" }
  },
  "PATCH /v1/scim/settings": {
    summary: "Update directory settings",
    description: "Changes `principalIdAttribute` and/or `deprovision`. `principalIdAttribute` cannot change once users exist (409 `CONFLICT`): a user's `principalId` is fixed when it is provisioned. Written to your audit chain.",
    request: { principalIdAttribute: "externalId" },
    response: { principalIdAttribute: "externalId", deprovision: "revoke" }
  },

  "GET /scim/v2/ServiceProviderConfig": {
    summary: "SCIM service provider configuration",
    description: "What this SCIM service supports, truthfully: PATCH, filters (at most 200 results a page) and ETags yes; bulk, sort and password change no. Called by identity providers when a connection is set up.",
    response: {
      schemas: ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"], documentationUri: `${BASE}/docs`, patch: { supported: true },
      bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 }, filter: { supported: true, maxResults: 200 }, changePassword: { supported: false },
      sort: { supported: false }, etag: { supported: true },
      authenticationSchemes: [{ type: "oauthbearertoken", name: "OAuth Bearer Token", description: "A SCIM token created with POST /v1/scim/tokens, sent as Authorization: Bearer", primary: true }]
    }
  },
  "GET /scim/v2/ResourceTypes": {
    summary: "SCIM resource types",
    description: "The resource types served (User, with the enterprise and agent-auth extensions, and Group), as a ListResponse.",
    response: list([{ schemas: ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"], id: "User", name: "User", endpoint: "/Users", schema: URN.user }])
  },
  "GET /scim/v2/ResourceTypes/{id}": {
    summary: "One SCIM resource type",
    description: "`User` or `Group` (case-insensitive).",
    response: { schemas: ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"], id: "Group", name: "Group", endpoint: "/Groups", schema: URN.group }
  },
  "GET /scim/v2/Schemas": {
    summary: "SCIM schemas",
    description: "The schemas of the attributes this service stores (core User and Group, the enterprise extension, and ours with the read-only `principalId`), as a ListResponse.",
    response: list([{ id: URN.agentauth, name: "AgentAuthUser", description: "The principal this user is", attributes: [{ name: "principalId", type: "string", mutability: "readOnly" }] }])
  },
  "GET /scim/v2/Schemas/{id}": {
    summary: "One SCIM schema",
    description: "One schema by its URN (URL-encode it in the path).",
    response: { id: URN.agentauth, name: "AgentAuthUser", description: "The principal this user is", attributes: [{ name: "principalId", type: "string", mutability: "readOnly" }] }
  },
  "GET /scim/v2/Users": {
    summary: "List or find users",
    description: "A ListResponse of the directory's users. `filter` takes the whole RFC 7644 grammar (`eq ne co sw ew pr gt ge lt le`, `and`, `or`, `not`, parentheses, value paths like `emails[type eq \"work\"].value`; at most 1,000 characters and 20 comparisons); `userName`, names and emails compare case-insensitively, `id` and `externalId` exactly. `startIndex` is 1-based (below 1 means 1), `count` defaults to 100, at most 200 (0 answers only `totalResults`). `attributes` / `excludedAttributes` trim the answer. Identity providers call `?filter=userName eq \"…\"` before each create, and `?startIndex=1&count=2` to test the connection.",
    response: list([user])
  },
  "POST /scim/v2/Users": {
    summary: "Provision a user",
    description: "Creates a directory user (201 with `Location` and `ETag: W/\"<version>\"`). Its `principalId` is taken from your `principalIdAttribute` now and never changes; it is answered under the `urn:ietf:params:scim:schemas:extension:agentauth:2.0:User` extension. A user created with `active: false` is deprovisioned at once. 409 `uniqueness` when the userName (any case) or externalId is taken. Emits `scim.user.provisioned`.",
    request: userInput,
    response: user
  },
  "GET /scim/v2/Users/{id}": {
    summary: "Read a user",
    description: "One user with its `ETag`; `If-None-Match` with the current version answers 304. A deleted user answers 404.",
    response: user
  },
  "PUT /scim/v2/Users/{id}": {
    summary: "Replace a user",
    description: `Replaces every stored attribute with the body's (omitted ones are cleared), except \`active\`, which keeps its value when omitted. \`active: false\` deprovisions. ${IF_MATCH} Emits \`scim.user.updated\` with the names of the changed attributes.`,
    request: { ...userInput, displayName: "Asha Rao-Menon" },
    response: { ...user, displayName: "Asha Rao-Menon", meta: meta("User", USER_ID, 2) }
  },
  "PATCH /scim/v2/Users/{id}": {
    summary: "Update a user (PatchOp)",
    description: `Applies a PatchOp of at most 100 operations, all or none: \`op\` in any case, paths with filters and extension URNs, a value object without a path (how Okta and Entra ID deactivate: \`{ op: "replace", value: { active: false } }\`), booleans sent as strings. \`add\` on a filtered element that does not exist creates it; \`remove\` or \`replace\` whose filter matches nothing answers 400 \`noTarget\`. Deactivation (\`active\` to false) marks the principal inactive and, with \`deprovision: "revoke"\`, in the same transaction revokes all their grants (descendants, bundles and credentials included), denies their pending consent requests and disables their passkeys; an inactive principal cannot be authorized (403 \`PRINCIPAL_INACTIVE\`). Reactivating restores nothing. ${IF_MATCH}`,
    request: { schemas: [URN.patch], Operations: [{ op: "replace", value: { active: false } }] },
    response: { ...user, active: false, meta: meta("User", USER_ID, 2) }
  },
  "DELETE /scim/v2/Users/{id}": {
    summary: "Delete a user",
    description: `Deprovisions the user as deactivation does and removes them from their groups; afterwards GET answers 404 and the userName is free again (the row is kept 90 days for audit). ${IF_MATCH} Emits \`scim.user.deprovisioned\` with the number of grants revoked.`
  },
  "GET /scim/v2/Groups": {
    summary: "List or find groups",
    description: "A ListResponse of groups, filterable by `displayName eq`, `externalId eq` and `members.value eq`, paged like users. `excludedAttributes=members` skips loading members (what Entra ID asks for).",
    response: list([group])
  },
  "POST /scim/v2/Groups": {
    summary: "Create a group",
    description: "Creates a group with its members (SCIM user ids; at most 1,000 per request; an unknown member answers 400 `invalidValue`). Groups feed policies and SSO scope mappings. Emits `scim.group.updated`.",
    request: { schemas: [URN.group], externalId: "00g9z8y7x6W5v4U3t2s1", displayName: "Finance", members: [{ value: USER_ID }] },
    response: group
  },
  "GET /scim/v2/Groups/{id}": {
    summary: "Read a group",
    description: "One group with its members and `ETag` (`If-None-Match` with the current version answers 304).",
    response: group
  },
  "PUT /scim/v2/Groups/{id}": {
    summary: "Replace a group",
    description: `Replaces the name, externalId and the whole member list. ${IF_MATCH} Emits \`scim.group.updated\` with the members added and removed.`,
    request: { schemas: [URN.group], externalId: "00g9z8y7x6W5v4U3t2s1", displayName: "Finance and Accounts", members: [{ value: USER_ID }] },
    response: { ...group, displayName: "Finance and Accounts", meta: meta("Group", GROUP_ID, 4) }
  },
  "PATCH /scim/v2/Groups/{id}": {
    summary: "Update a group (PatchOp)",
    description: `Adds or removes members (\`add\` with \`path: "members"\`; \`remove\` with \`members[value eq "…"]\`; at most 1,000 members per request) or renames. Removing a member the group does not have answers 400 \`noTarget\`. ${IF_MATCH} Emits \`scim.group.updated\`.`,
    request: { schemas: [URN.patch], Operations: [{ op: "Add", path: "members", value: [{ value: USER_ID }] }] },
    response: group
  },
  "DELETE /scim/v2/Groups/{id}": {
    summary: "Delete a group",
    description: `Deletes the group (its members stay in the directory; \`scim.group.updated\` lists them as removed). ${IF_MATCH}`
  }
}
