/**
 * SCIM discovery (RFC 7644 §4), telling the truth about what this service does: PATCH, filters
 * (at most 200 results a page) and ETags are supported; bulk, sort and password change are not.
 * The schemas list exactly the attributes we store.
 */
import { MAX_COUNT } from "./View.ts"
import { URN } from "./Scim.ts"

const attr = (name: string, type: string, extra: Record<string, unknown> = {}) => ({
  name,
  type,
  multiValued: false,
  required: false,
  caseExact: false,
  mutability: "readWrite",
  returned: "default",
  uniqueness: "none",
  ...extra
})

const multi = (name: string) =>
  attr(name, "complex", {
    multiValued: true,
    subAttributes: [attr("value", "string"), attr("type", "string"), attr("primary", "boolean"), attr("display", "string")]
  })

export const serviceProviderConfig = (base: string) => ({
  schemas: [URN.spc],
  documentationUri: `${base}/docs`,
  patch: { supported: true },
  bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
  filter: { supported: true, maxResults: MAX_COUNT },
  changePassword: { supported: false },
  sort: { supported: false },
  etag: { supported: true },
  authenticationSchemes: [{
    type: "oauthbearertoken",
    name: "OAuth Bearer Token",
    description: "A SCIM token created with POST /v1/scim/tokens, sent as Authorization: Bearer",
    primary: true
  }],
  meta: { resourceType: "ServiceProviderConfig", location: `${base}/scim/v2/ServiceProviderConfig` }
})

const userSchema = {
  id: URN.user,
  name: "User",
  description: "User account",
  attributes: [
    attr("userName", "string", { required: true, uniqueness: "server" }),
    attr("externalId", "string", { caseExact: true }),
    attr("active", "boolean"),
    attr("displayName", "string"),
    attr("name", "complex", { subAttributes: [attr("givenName", "string"), attr("familyName", "string"), attr("formatted", "string")] }),
    multi("emails"),
    multi("phoneNumbers")
  ]
}
const enterpriseSchema = {
  id: URN.enterprise,
  name: "EnterpriseUser",
  description: "Enterprise user",
  attributes: [
    attr("employeeNumber", "string"),
    attr("department", "string"),
    attr("manager", "complex", { subAttributes: [attr("value", "string", { caseExact: true }), attr("displayName", "string")] })
  ]
}
const agentAuthSchema = {
  id: URN.agentauth,
  name: "AgentAuthUser",
  description: "The principal this user is to the authorization service",
  attributes: [attr("principalId", "string", { caseExact: true, mutability: "readOnly" })]
}
const groupSchema = {
  id: URN.group,
  name: "Group",
  description: "Group",
  attributes: [
    attr("displayName", "string", { required: true }),
    attr("externalId", "string", { caseExact: true }),
    attr("members", "complex", {
      multiValued: true,
      subAttributes: [attr("value", "string", { caseExact: true, mutability: "immutable" }), attr("display", "string", { mutability: "readOnly" })]
    })
  ]
}

export const schemas = (base: string) =>
  [userSchema, enterpriseSchema, agentAuthSchema, groupSchema].map((s) => ({
    schemas: [URN.schema],
    ...s,
    meta: { resourceType: "Schema", location: `${base}/scim/v2/Schemas/${s.id}` }
  }))

export const resourceTypes = (base: string) => [
  {
    schemas: [URN.resourceType],
    id: "User",
    name: "User",
    endpoint: "/Users",
    schema: URN.user,
    schemaExtensions: [{ schema: URN.enterprise, required: false }, { schema: URN.agentauth, required: false }],
    meta: { resourceType: "ResourceType", location: `${base}/scim/v2/ResourceTypes/User` }
  },
  {
    schemas: [URN.resourceType],
    id: "Group",
    name: "Group",
    endpoint: "/Groups",
    schema: URN.group,
    meta: { resourceType: "ResourceType", location: `${base}/scim/v2/ResourceTypes/Group` }
  }
]
