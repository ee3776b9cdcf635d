/**
 * SCIM wire basics (RFC 7644): the error every directory operation fails with, and the
 * application/scim+json responses. Errors are answered by the directory itself, in the SCIM shape,
 * so the HTTP envelope keeps them as they are (platform/HttpEnvelope.ts).
 */
import { HttpServerResponse } from "@effect/platform"
import { Data } from "effect"

export const URN = {
  user: "urn:ietf:params:scim:schemas:core:2.0:User",
  group: "urn:ietf:params:scim:schemas:core:2.0:Group",
  enterprise: "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User",
  agentauth: "urn:ietf:params:scim:schemas:extension:agentauth:2.0:User",
  list: "urn:ietf:params:scim:api:messages:2.0:ListResponse",
  patch: "urn:ietf:params:scim:api:messages:2.0:PatchOp",
  error: "urn:ietf:params:scim:api:messages:2.0:Error",
  spc: "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig",
  resourceType: "urn:ietf:params:scim:schemas:core:2.0:ResourceType",
  schema: "urn:ietf:params:scim:schemas:core:2.0:Schema"
} as const

export type ScimType =
  | "invalidFilter" | "tooMany" | "uniqueness" | "mutability" | "invalidSyntax" | "invalidPath" | "noTarget"
  | "invalidValue" | "invalidVers"

export class ScimError extends Data.TaggedError("ScimError")<{
  readonly status: number
  readonly scimType?: ScimType | undefined
  readonly detail: string
}> {}

export const scimFail = {
  badRequest: (scimType: ScimType, detail: string) => new ScimError({ status: 400, scimType, detail }),
  notFound: (detail = "Resource not found") => new ScimError({ status: 404, detail }),
  conflict: (detail: string) => new ScimError({ status: 409, scimType: "uniqueness", detail }),
  preconditionFailed: () => new ScimError({ status: 412, detail: "The resource version does not match If-Match" }),
  unsupportedMediaType: () => new ScimError({ status: 415, detail: "Bodies must be application/scim+json or application/json" }),
  tooLarge: () => new ScimError({ status: 413, detail: "Request body exceeds 1048576 bytes" })
}

const CONTENT_TYPE = "application/scim+json"

export const scimJson = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(body, { status, headers, contentType: CONTENT_TYPE })

export const scimErrorResponse = (e: ScimError) =>
  scimJson(
    { schemas: [URN.error], status: String(e.status), ...(e.scimType ? { scimType: e.scimType } : {}), detail: e.detail },
    e.status
  )

export const etagOf = (version: number) => `W/"${version}"`

/** the version an If-Match / If-None-Match header names, "*" for any; undefined when absent */
export const versionsIn = (header: string | undefined): ReadonlyArray<string> | undefined => {
  if (header === undefined || header.trim() === "") return undefined
  return header.split(",").map((t) => t.trim().replace(/^W\//, "").replace(/^"(.*)"$/, "$1"))
}

export const matchesVersion = (header: string | undefined, version: number) => {
  const versions = versionsIn(header)
  return versions === undefined || versions.includes("*") || versions.includes(String(version))
}
