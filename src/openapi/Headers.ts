/**
 * The response headers an operation answers with, in the document (issue 36 item 5): every request
 * the gate counts carries the rate-limit headers (decisions §6), on its success and its refusals;
 * 429 and 503 say when to come back (`Retry-After`); SCIM resources and the credential status lists
 * carry an `ETag`; a SCIM creation names the new resource (`Location`).
 */
const REF = "#/components/headers/"

const HEADERS: Record<string, { readonly description: string; readonly schema: Record<string, unknown> }> = {
  "X-RateLimit-Limit": { description: "Requests allowed in the current window (the narrowest window that applies).", schema: { type: "integer" } },
  "X-RateLimit-Remaining": { description: "Requests left in the current window.", schema: { type: "integer" } },
  "X-RateLimit-Reset": { description: "Seconds until the window resets.", schema: { type: "integer" } },
  "RateLimit-Policy": { description: "The window as the IETF RateLimit headers draft writes it: `\"name\";q=<limit>;w=<seconds>`.", schema: { type: "string" } },
  "RateLimit": { description: "What is left of it: `\"name\";r=<remaining>;t=<seconds to reset>`.", schema: { type: "string" } },
  "Retry-After": { description: "Seconds to wait before trying again.", schema: { type: "integer" } },
  "ETag": { description: "The version of what was answered; send it back in `If-Match` (SCIM) or `If-None-Match`.", schema: { type: "string" } },
  "Location": { description: "The URL of the resource just created.", schema: { type: "string", format: "uri" } }
}

const RATE_LIMIT = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit"]

const add = (response: Record<string, any>, names: ReadonlyArray<string>) => {
  response.headers ??= {}
  for (const name of names) response.headers[name] = { $ref: `${REF}${name}` }
}

/** `limited`: the operation keys ("GET /v1/agents") the gate counts (every one but the exempt) */
export const documentHeaders = (spec: Record<string, any>, limited: ReadonlySet<string>, keyOf: (method: string, path: string) => string) => {
  spec.components ??= {}
  spec.components.headers = { ...spec.components.headers, ...HEADERS }
  for (const [path, item] of Object.entries<Record<string, any>>(spec.paths ?? {})) {
    for (const [method, op] of Object.entries<any>(item)) {
      const key = keyOf(method, path)
      for (const [status, response] of Object.entries<any>(op?.responses ?? {})) {
        if (limited.has(key)) add(response, RATE_LIMIT)
        if (status === "429" || status === "503") add(response, ["Retry-After"])
        const scimResource = /^\/scim\/v2\/(Users|Groups)/.test(path) && Number(status) < 300 && status !== "204"
        if ((scimResource && !/(Users|Groups)$/.test(path)) || (scimResource && method === "post")) add(response, ["ETag"])
        if (scimResource && method === "post" && status === "201") add(response, ["Location"])
        if (path.startsWith("/v1/credentials/status/") && status === "200") add(response, ["ETag"])
      }
    }
  }
}
