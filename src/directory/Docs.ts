/**
 * Summaries, descriptions and examples of SCIM tokens, directory settings and SCIM 2.0 (decisions
 * §11); ScimTokensApi and ScimApi carry them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { T } from "../platform/DocExamples.ts"
import { URN } from "./Scim.ts"

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

export const SCIM_TOKENS_DOCS = {
  createToken: {
    summary: "Create a SCIM token",
    description: "A bearer token for your identity provider's SCIM client, **shown once** (stored as SHA-256). `expiresIn` 1d..730d, none by default. At most 10 live tokens (409 `CONFLICT`).",
    request: { label: "Okta", expiresIn: "365d" },
    response: { ...token, tokenId: TOKEN_ID, token: "scim_Xq3v9mJ2kL8pR4tW6yB1nD5fH7jK0cE2gA4iM6oQ8sU" }
  },
  listTokens: { summary: "List SCIM tokens", description: "Your live SCIM tokens, newest first, without their secrets; `lastUsedAt` is stamped at most once a minute.", response: { tokens: [token] } },
  deleteToken: { summary: "Delete a SCIM token", description: "The token stops working at once, on every instance. 404 when it is not one of your live tokens." },
  getSettings: { summary: "Directory settings", description: "Which SCIM attribute names the principal your grants use, and whether deprovisioning revokes.", response: settings },
  updateSettings: {
    summary: "Change directory settings",
    description: "`principalIdAttribute` (`userName`, `externalId` or `id`) is read once at a user's creation and cannot change once users exist (409). `deprovision: \"none\"` keeps grants when a user is deactivated (the principal still cannot be authorized).",
    request: settings,
    response: settings
  }
} satisfies Record<string, OperationDoc>

export const SCIM_DOCS = {
  serviceProviderConfig: { summary: "SCIM service provider configuration", description: `What is supported: PATCH, filters (at most 200 results a page), ETags; not bulk, sort or password change. ${SCIM}`, response: { schemas: ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"], patch: { supported: true }, filter: { supported: true, maxResults: 200 } } },
  resourceTypes: { summary: "SCIM resource types", description: `User (with the enterprise and agentauth extensions) and Group. ${SCIM}`, response: list([{ id: "User", endpoint: "/Users" }]) },
  resourceType: { summary: "One SCIM resource type", description: `\`User\` or \`Group\`. ${SCIM}`, response: { id: "User", endpoint: "/Users", schema: USER_URN } },
  schemas: { summary: "SCIM schemas", description: `The attributes stored, with their types and case rules. ${SCIM}`, response: list([{ id: USER_URN, name: "User" }]) },
  schema: { summary: "One SCIM schema", description: `By URN. ${SCIM}`, response: { id: USER_URN, name: "User", attributes: [] } },
  listUsers: {
    summary: "List or filter users",
    description: `\`filter\` (every RFC 7644 operator, and/or/not, value paths such as \`emails[type eq "work"].value\`; at most 1,000 characters and 20 comparisons; userName, names and emails compare case-insensitively, id and externalId exactly), \`startIndex\`, \`count\` (default 100, max 200; 0 gives only totalResults), \`attributes\`, \`excludedAttributes\`. ${SCIM}`,
    response: list([user])
  },
  createUser: { summary: "Provision a user", description: `201 with \`Location\` and \`ETag\`; 409 \`uniqueness\` for a userName (any case) or externalId already provisioned. Attributes not stored are dropped. Emits \`scim.user.provisioned\`; a user created with \`active: false\` is deprovisioned at once. ${SCIM}`, request: userBody, response: user },
  getUser: { summary: "Read a user", description: `With its \`ETag\`; 304 when \`If-None-Match\` names the current version. ${SCIM}`, response: user },
  replaceUser: { summary: "Replace a user", description: `Full replace; an omitted \`active\` keeps its value; \`If-Match\` mismatch 412. ${DEPROVISION} Emits \`scim.user.updated\` with the changed attribute names (\`scim.user.deprovisioned\` on deactivation). ${SCIM}`, request: userBody, response: user },
  patchUser: {
    summary: "Patch a user",
    description: `RFC 7644 PatchOp, at most 100 operations, all applied or none; \`op\` in any case, string booleans ("False") coerced, filtered and extension paths; \`noTarget\` when a remove or replace filter matches nothing; \`If-Match\` mismatch 412. ${DEPROVISION} Emits \`scim.user.updated\` with the changed attribute names (\`scim.user.deprovisioned\` on deactivation). ${SCIM}`,
    request: { schemas: [PATCH_URN], Operations: [{ op: "replace", value: { active: false } }] },
    response: { ...user, active: false }
  },
  deleteUser: { summary: "Delete a user", description: `204; deprovisions like a deactivation. The row is kept for audit and GET answers 404; the userName is free again. \`If-Match\` mismatch 412. Emits \`scim.user.deprovisioned\` with the number of grants revoked, and \`scim.group.updated\` for each group it leaves. ${SCIM}` },
  listGroups: { summary: "List or filter groups", description: `Filters such as \`displayName eq\`, \`externalId eq\`, \`members.value eq\`; \`excludedAttributes=members\` skips the members. ${SCIM}`, response: list([group]) },
  createGroup: { summary: "Create a group", description: `Members must be users of this directory (400 \`invalidValue\` otherwise). Emits \`scim.group.updated\` with the members added. ${SCIM}`, request: { schemas: [GROUP_URN], displayName: "Engineering", members: [{ value: USER_ID }] }, response: group },
  getGroup: { summary: "Read a group", description: `\`excludedAttributes=members\` skips the members; 304 on a matching \`If-None-Match\`. ${SCIM}`, response: group },
  replaceGroup: { summary: "Replace a group", description: `Name, externalId and the whole member list. \`If-Match\` mismatch 412. Emits \`scim.group.updated\` with the members added and removed. ${SCIM}`, request: { schemas: [GROUP_URN], displayName: "Engineering", members: [{ value: USER_ID }] }, response: group },
  patchGroup: {
    summary: "Patch a group",
    description: `\`members\` add/remove/replace (at most 1,000 values a request), \`Remove\` with \`members[value eq "…"]\`, \`displayName\` replace. \`If-Match\` mismatch 412. Emits \`scim.group.updated\` with the members added and removed. ${SCIM}`,
    request: { schemas: [PATCH_URN], Operations: [{ op: "add", path: "members", value: [{ value: USER_ID }] }] },
    response: group
  },
  deleteGroup: { summary: "Delete a group", description: `204; its members are not deprovisioned. \`If-Match\` mismatch 412. Emits \`scim.group.updated\` listing its members as removed. ${SCIM}` }
} satisfies Record<string, OperationDoc>
