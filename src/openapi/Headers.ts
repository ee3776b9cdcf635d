/**
 * The response headers an operation answers with, in the document (issue 36 item 5): every request
 * the gate counts carries the rate-limit headers (decisions §6), on its success and its refusals;
 * 429 and 503 say when to come back (`Retry-After`); SCIM resources and the credential status lists
 * carry an `ETag`; a SCIM creation names the new resource (`Location`). A POST with an API key takes an
 * `Idempotency-Key` (decisions §2): its parameter, the replay's `Idempotent-Replayed` header and the
 * two refusals of a key (409 IDEMPOTENCY_KEY_IN_USE, 422 IDEMPOTENCY_KEY_REUSED) are in its operation.
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
  "Location": { description: "The URL of the resource just created.", schema: { type: "string", format: "uri" } },
  "Idempotent-Replayed": {
    description: "`true` on the stored answer of an earlier request with the same Idempotency-Key (the operation did not run again).",
    schema: { type: "string", enum: ["true"] }
  }
}

const IDEMPOTENCY_KEY = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description: "Makes a retry safe (decisions §2): the first request with this key runs; a retry with the same key and body within 24 hours " +
    "gets the stored answer with `Idempotent-Replayed: true`; the same key with another body is 422 IDEMPOTENCY_KEY_REUSED; a retry while " +
    "the first still runs is 409 IDEMPOTENCY_KEY_IN_USE. 1-255 printable characters, per developer.",
  schema: { type: "string", minLength: 1, maxLength: 255 }
}

const keyRefusal = (status: number, code: string, message: string) => ({
  type: "object", description: `${status} ${code}`, required: ["code", "message", "requestId"],
  properties: {
    code: { type: "string", enum: [code] },
    message: { type: "string", description: message },
    requestId: { type: "string", description: "Equals the X-Request-Id response header" }
  }
})

/** adds `refusal` to the operation's answers for `status`, beside what it already answers there */
const addRefusal = (op: Record<string, any>, status: string, name: string, description: string) => {
  const ref = { $ref: `#/components/schemas/${name}` }
  const existing = op.responses[status]
  if (existing === undefined) {
    op.responses[status] = { description, content: { "application/json": { schema: ref } } }
    return
  }
  const json = existing.content?.["application/json"]
  if (json === undefined) return
  json.schema = json.schema?.anyOf !== undefined ? { ...json.schema, anyOf: [...json.schema.anyOf, ref] } : { anyOf: [json.schema, ref] }
  existing.description = `${existing.description} or ${description}`
}

const RATE_LIMIT = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit"]

const add = (response: Record<string, any>, names: ReadonlyArray<string>) => {
  response.headers ??= {}
  for (const name of names) response.headers[name] = { $ref: `${REF}${name}` }
}

/**
 * `limited`: the operation keys ("GET /v1/agents") the gate counts (every one but the exempt);
 * `keyed`: those that take an API key (a POST of theirs honours Idempotency-Key)
 */
export const documentHeaders = (
  spec: Record<string, any>, limited: ReadonlySet<string>, keyed: ReadonlySet<string>, keyOf: (method: string, path: string) => string
) => {
  spec.components ??= {}
  spec.components.headers = { ...spec.components.headers, ...HEADERS }
  spec.components.schemas = {
    ...spec.components.schemas,
    IdempotencyKeyInUse: keyRefusal(409, "IDEMPOTENCY_KEY_IN_USE", "A request with this Idempotency-Key is running (retry after Retry-After), or its operation committed and its answer was lost"),
    IdempotencyKeyReused: keyRefusal(422, "IDEMPOTENCY_KEY_REUSED", "This Idempotency-Key was used with another request; use a new key for a new request")
  }
  for (const [path, item] of Object.entries<Record<string, any>>(spec.paths ?? {})) {
    for (const [method, op] of Object.entries<any>(item)) {
      const key = keyOf(method, path)
      if (method === "post" && keyed.has(key) && op?.responses !== undefined) {
        op.parameters = [...(op.parameters ?? []), IDEMPOTENCY_KEY]
        for (const [status, response] of Object.entries<any>(op.responses)) if (Number(status) >= 200 && Number(status) < 300) add(response, ["Idempotent-Replayed"])
        addRefusal(op, "409", "IdempotencyKeyInUse", "IDEMPOTENCY_KEY_IN_USE")
        addRefusal(op, "422", "IdempotencyKeyReused", "IDEMPOTENCY_KEY_REUSED")
        add(op.responses["409"], ["Retry-After"])
      }
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
