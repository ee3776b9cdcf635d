/** Summaries, descriptions, examples and hand-read bodies: the directory and SCIM 2.0 (decisions §11; see Document.ts). */
import type { OperationDoc } from "./Document.ts"
import { URN } from "../directory/Scim.ts"
import { T } from "./Examples.ts"

const { user: USER_URN, group: GROUP_URN, patch: PATCH_URN, list: LIST_URN, agentauth: AGENTAUTH } = URN
const USER_ID = "scimuser_01JDQ9BM2N3P4Q5R6S7T8V9WXY"
const GROUP_ID = "scimgrp_01JDQ9CN3P4Q5R6S7T8V9WXYZ0"
const TOKEN_ID = "scimtok_01JDQ9AK1M2N3P4Q5R6S7T8V9W"
const BASE = "https://auth.acme.example/scim/v2"

const userBody = {
  schemas: [USER_URN],
  userName: "ada@acme.example",
  externalId: "00ujl29u0le5T6Aj10h7",
  name: { givenName: "Ada", familyName: "Lovelace" },
  emails: [{ value: "ada@acme.example", type: "work", primary: true }],
  active: true
}
const user = {
  ...userBody,
  id: USER_ID,
  [AGENTAUTH]: { principalId: "ada@acme.example" },
  meta: { resourceType: "User", created: T, lastModified: T, version: "W/\"1\"", location: `${BASE}/Users/${USER_ID}` }
}
const group = {
  schemas: [GROUP_URN],
  id: GROUP_ID,
  displayName: "Engineering",
  // (no `$ref` member in the example: the docs page would try to resolve it as a JSON reference)
  members: [{ value: USER_ID, display: "ada@acme.example" }],
  meta: { resourceType: "Group", created: T, lastModified: T, version: "W/\"2\"", location: `${BASE}/Groups/${GROUP_ID}` }
}
const list = (resources: Array<unknown>) => ({ schemas: [LIST_URN], totalResults: resources.length, startIndex: 1, itemsPerPage: resources.length, Resources: resources })
const token = { id: TOKEN_ID, label: "Okta", createdAt: T, lastUsedAt: null, expiresAt: null }
const settings = { principalIdAttribute: "userName", deprovision: "revoke" }

const SCIM = "Sent by your identity provider (Okta, Entra ID) with `Authorization: Bearer <SCIM token>`; bodies as `application/scim+json` or `application/json`; every answer, errors included, is `application/scim+json` (RFC 7644 error shape: `schemas`, `status` as a string, `scimType`, `detail`)."
const DEPROVISION = "Deactivating (`active: false`) deprovisions the principal: with `deprovision: \"revoke\"` their pending consent requests are denied, every active grant revoked (delegations and bundles with it) and their passkeys removed, in one transaction; authorize, consent approval and bundles then answer 403 `PRINCIPAL_INACTIVE`."

export const DIRECTORY_OPERATIONS: Record<string, OperationDoc> = {
  "POST /v1/scim/tokens": {
    summary: "Create a SCIM token",
    description: "A bearer token for your identity provider's SCIM client, **shown once** (stored as SHA-256). `expiresIn` 1d..730d, none by default. At most 10 live tokens (409 `CONFLICT`).",
    request: { label: "Okta", expiresIn: "365d" },
    response: { ...token, tokenId: TOKEN_ID, token: "scim_Xq3v9mJ2kL8pR4tW6yB1nD5fH7jK0cE2gA4iM6oQ8sU" }
  },
  "GET /v1/scim/tokens": { summary: "List SCIM tokens", description: "Your live SCIM tokens, newest first, without their secrets; `lastUsedAt` is stamped at most once a minute.", response: { tokens: [token] } },
  "DELETE /v1/scim/tokens/{id}": { summary: "Delete a SCIM token", description: "The token stops working at once, on every instance. 404 when it is not one of your live tokens." },
  "GET /v1/scim/settings": { summary: "Directory settings", description: "Which SCIM attribute names the principal your grants use, and whether deprovisioning revokes.", response: settings },
  "PATCH /v1/scim/settings": {
    summary: "Change directory settings",
    description: "`principalIdAttribute` (`userName`, `externalId` or `id`) is read once at a user's creation and cannot change once users exist (409). `deprovision: \"none\"` keeps grants when a user is deactivated (the principal still cannot be authorized).",
    request: settings,
    response: settings
  },
  "GET /scim/v2/ServiceProviderConfig": { summary: "SCIM service provider configuration", description: `What is supported: PATCH, filters (at most 200 results a page), ETags; not bulk, sort or password change. ${SCIM}`, response: { schemas: ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"], patch: { supported: true }, filter: { supported: true, maxResults: 200 } } },
  "GET /scim/v2/ResourceTypes": { summary: "SCIM resource types", description: `User (with the enterprise and agentauth extensions) and Group. ${SCIM}`, response: list([{ id: "User", endpoint: "/Users" }]) },
  "GET /scim/v2/ResourceTypes/{id}": { summary: "One SCIM resource type", description: `\`User\` or \`Group\`. ${SCIM}`, response: { id: "User", endpoint: "/Users", schema: USER_URN } },
  "GET /scim/v2/Schemas": { summary: "SCIM schemas", description: `The attributes stored, with their types and case rules. ${SCIM}`, response: list([{ id: USER_URN, name: "User" }]) },
  "GET /scim/v2/Schemas/{id}": { summary: "One SCIM schema", description: `By URN. ${SCIM}`, response: { id: USER_URN, name: "User", attributes: [] } },
  "GET /scim/v2/Users": {
    summary: "List or filter users",
    description: `\`filter\` (every RFC 7644 operator, and/or/not, value paths such as \`emails[type eq "work"].value\`; at most 1,000 characters and 20 comparisons; userName, names and emails compare case-insensitively, id and externalId exactly), \`startIndex\`, \`count\` (default 100, max 200; 0 gives only totalResults), \`attributes\`, \`excludedAttributes\`. ${SCIM}`,
    response: list([user])
  },
  "POST /scim/v2/Users": { summary: "Provision a user", description: `201 with \`Location\` and \`ETag\`; 409 \`uniqueness\` for a userName (any case) or externalId already provisioned. Attributes not stored are dropped. Emits \`scim.user.provisioned\`; a user created with \`active: false\` is deprovisioned at once. ${SCIM}`, request: userBody, response: user },
  "GET /scim/v2/Users/{id}": { summary: "Read a user", description: `With its \`ETag\`; 304 when \`If-None-Match\` names the current version. ${SCIM}`, response: user },
  "PUT /scim/v2/Users/{id}": { summary: "Replace a user", description: `Full replace; an omitted \`active\` keeps its value; \`If-Match\` mismatch 412. ${DEPROVISION} Emits \`scim.user.updated\` with the changed attribute names (\`scim.user.deprovisioned\` on deactivation). ${SCIM}`, request: userBody, response: user },
  "PATCH /scim/v2/Users/{id}": {
    summary: "Patch a user",
    description: `RFC 7644 PatchOp, at most 100 operations, all applied or none; \`op\` in any case, string booleans ("False") coerced, filtered and extension paths; \`noTarget\` when a remove or replace filter matches nothing; \`If-Match\` mismatch 412. ${DEPROVISION} Emits \`scim.user.updated\` with the changed attribute names (\`scim.user.deprovisioned\` on deactivation). ${SCIM}`,
    request: { schemas: [PATCH_URN], Operations: [{ op: "replace", value: { active: false } }] },
    response: { ...user, active: false }
  },
  "DELETE /scim/v2/Users/{id}": { summary: "Delete a user", description: `204; deprovisions like a deactivation. The row is kept for audit and GET answers 404; the userName is free again. \`If-Match\` mismatch 412. Emits \`scim.user.deprovisioned\` with the number of grants revoked, and \`scim.group.updated\` for each group it leaves. ${SCIM}` },
  "GET /scim/v2/Groups": { summary: "List or filter groups", description: `Filters such as \`displayName eq\`, \`externalId eq\`, \`members.value eq\`; \`excludedAttributes=members\` skips the members. ${SCIM}`, response: list([group]) },
  "POST /scim/v2/Groups": { summary: "Create a group", description: `Members must be users of this directory (400 \`invalidValue\` otherwise). Emits \`scim.group.updated\` with the members added. ${SCIM}`, request: { schemas: [GROUP_URN], displayName: "Engineering", members: [{ value: USER_ID }] }, response: group },
  "GET /scim/v2/Groups/{id}": { summary: "Read a group", description: `\`excludedAttributes=members\` skips the members; 304 on a matching \`If-None-Match\`. ${SCIM}`, response: group },
  "PUT /scim/v2/Groups/{id}": { summary: "Replace a group", description: `Name, externalId and the whole member list. \`If-Match\` mismatch 412. Emits \`scim.group.updated\` with the members added and removed. ${SCIM}`, request: { schemas: [GROUP_URN], displayName: "Engineering", members: [{ value: USER_ID }] }, response: group },
  "PATCH /scim/v2/Groups/{id}": {
    summary: "Patch a group",
    description: `\`members\` add/remove/replace (at most 1,000 values a request), \`Remove\` with \`members[value eq "…"]\`, \`displayName\` replace. \`If-Match\` mismatch 412. Emits \`scim.group.updated\` with the members added and removed. ${SCIM}`,
    request: { schemas: [PATCH_URN], Operations: [{ op: "add", path: "members", value: [{ value: USER_ID }] }] },
    response: group
  },
  "DELETE /scim/v2/Groups/{id}": { summary: "Delete a group", description: `204; its members are not deprovisioned. \`If-Match\` mismatch 412. Emits \`scim.group.updated\` listing its members as removed. ${SCIM}` }
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
export const DIRECTORY_BODIES: Record<string, Record<string, unknown>> = {
  "POST /scim/v2/Users": userSchema,
  "PUT /scim/v2/Users/{id}": userSchema,
  "PATCH /scim/v2/Users/{id}": patchSchema,
  "POST /scim/v2/Groups": groupSchema,
  "PUT /scim/v2/Groups/{id}": groupSchema,
  "PATCH /scim/v2/Groups/{id}": patchSchema
}
