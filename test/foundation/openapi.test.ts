/**
 * Errors, one class per code (issue 17 item 1; decisions §1): the OpenAPI document declares, per
 * operation and status, the codes the service answers with, each as a schema whose `code` is one
 * literal; answers the service really gives are among those declared; and a service's failure can
 * be caught by its tag.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { HttpApi } from "@effect/platform"
import { Context, Effect, Option } from "effect"
import { Api } from "../../src/Api.ts"
import { ConsentBundles } from "../../src/consent-bundles/Service.ts"
import { HAND_READ_BODIES, operationKey } from "../../src/openapi/Document.ts"
import { EVENT_DATA, SECURED_BY } from "../../src/openapi/Groups.ts"
import { SCIM_ERRORS } from "../../src/openapi/Scim.ts"
import { BundleNotFound } from "../../src/platform/Errors.ts"
import { EVENT_TYPES } from "../../src/platform/Events.ts"
import { OperationDocs } from "../../src/platform/OperationDocs.ts"
import { acceptedScopes } from "../../src/vault/Service.ts"
import { startTestApp, type TestApp, type TestResponse } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"

let app: TestApp
let spec: any
let dev: { apiKey: string; developerId: string }

beforeAll(async () => {
  app = await startTestApp()
  dev = await app.signup()
  spec = (await app.request("GET", "/openapi.json")).body
})
afterAll(() => app.stop())

const REF = "#/components/schemas/"
const METHODS = ["get", "post", "put", "patch", "delete"]

const operations = () => {
  const out: Array<{ method: string; path: string; op: any }> = []
  for (const [path, item] of Object.entries<any>(spec.paths)) {
    for (const method of METHODS) if (item[method]) out.push({ method, path, op: item[method] })
  }
  return out
}

/** status → the codes an operation declares */
const declared = (method: string, path: string): Map<number, Array<string>> => {
  const op = spec.paths[path]?.[method.toLowerCase()]
  if (op === undefined) throw new Error(`no operation ${method} ${path}`)
  const out = new Map<number, Array<string>>()
  for (const [status, response] of Object.entries<any>(op.responses)) {
    if (Number(status) < 400) continue
    const schema = response.content?.["application/json"]?.schema
    const refs: Array<string> = (schema?.anyOf ?? [schema]).map((s: any) => s?.$ref).filter((r: unknown) => typeof r === "string")
    out.set(Number(status), refs.map((ref) => spec.components.schemas[ref.slice(REF.length)]?.properties?.code?.enum?.[0]))
  }
  return out
}

/** the answer's code is one the operation declares at the answer's status */
const expectDeclared = (method: string, path: string, res: TestResponse) => {
  expect(res.status).toBeGreaterThanOrEqual(400)
  expect({ [`${method} ${path} ${res.status}`]: declared(method, path).get(res.status) ?? [] })
    .toEqual({ [`${method} ${path} ${res.status}`]: expect.arrayContaining([res.body.code]) })
}

describe("the document", () => {
  test("every error response of every operation is a schema whose code is one literal, in the wire shape", () => {
    expect(JSON.stringify(spec)).not.toContain("HttpApiDecodeError")
    let checked = 0
    for (const { method, path, op } of operations()) {
      for (const [status, response] of Object.entries<any>(op.responses)) {
        if (Number(status) < 400 || path === "/health") continue
        if (path.startsWith("/scim/v2/")) {
          // RFC 7644 errors, as application/scim+json (decisions §11)
          const where = `${method.toUpperCase()} ${path} ${status}`
          expect({ where, ref: response.content?.["application/scim+json"]?.schema?.$ref }).toEqual({ where, ref: "#/components/schemas/ScimError" })
          continue
        }
        const schema = response.content?.["application/json"]?.schema
        const members: Array<any> = schema?.anyOf ?? [schema]
        for (const member of members) {
          const where = `${method.toUpperCase()} ${path} ${status}`
          expect({ where, ref: typeof member?.$ref }).toEqual({ where, ref: "string" })
          const target = spec.components.schemas[member.$ref.slice(REF.length)]
          expect({ where, required: target.required }).toEqual({ where, required: ["code", "message", "requestId"] })
          expect({ where, enum: target.properties.code.enum.length }).toEqual({ where, enum: 1 })
          // the class's status is the status it is declared at
          expect({ where, status: target.description.split(" ")[0] }).toEqual({ where, status })
          checked++
        }
      }
    }
    expect(checked).toBeGreaterThan(300)
  })

  test("each code is declared where the interface's error table puts it", () => {
    const table: Array<[string, string, number, string]> = [
      ["post", "/v1/consent-bundles", 400, "INVALID_REQUEST"],
      ["post", "/v1/consent-bundles", 401, "UNAUTHORIZED"],
      ["post", "/v1/consent-bundles", 404, "AGENT_NOT_FOUND"],
      ["post", "/v1/consent-bundles", 422, "INVALID_SCOPES"],
      ["post", "/v1/consent-bundles", 422, "INVALID_TTL"],
      ["post", "/v1/consent-bundles", 429, "RATE_LIMITED"],
      ["get", "/v1/consent-bundles/{id}", 404, "BUNDLE_NOT_FOUND"],
      ["post", "/v1/consent-bundles/{id}/revoke", 404, "BUNDLE_NOT_FOUND"],
      ["post", "/v1/consent-bundles/{id}/revoke", 409, "ALREADY_REVOKED"],
      ["get", "/v1/consent-bundles/{id}/revocation-status", 404, "BUNDLE_NOT_FOUND"],
      ["post", "/v1/consent-bundles/{id}/refresh", 409, "BUNDLE_REVOKED"],
      ["post", "/v1/consent-bundles/{id}/refresh", 409, "BUNDLE_EXPIRED"],
      ["post", "/v1/audit/offline-sync", 400, "INVALID_REQUEST"],
      ["post", "/v1/audit/offline-sync", 404, "BUNDLE_NOT_FOUND"],
      ["post", "/v1/audit/offline-sync", 413, "PAYLOAD_TOO_LARGE"],
      ["post", "/v1/audit/offline-sync", 429, "RATE_LIMITED"],
      ["post", "/v1/vault/credentials/exchange", 400, "BAD_REQUEST"],
      ["post", "/v1/vault/credentials/exchange", 401, "UNAUTHORIZED"],
      ["post", "/v1/vault/credentials/exchange", 403, "FORBIDDEN"],
      ["post", "/v1/vault/credentials/exchange", 404, "NOT_FOUND"],
      ["post", "/v1/dpdp/breaches", 400, "BAD_REQUEST"],
      ["patch", "/v1/dpdp/breaches/{breachId}", 400, "REPORT_INCOMPLETE"],
      ["patch", "/v1/dpdp/breaches/{breachId}", 404, "NOT_FOUND"],
      ["patch", "/v1/dpdp/breaches/{breachId}", 409, "INVALID_TRANSITION"],
      ["patch", "/v1/dpdp/breaches/{breachId}", 409, "BREACH_CLOSED"],
      ["post", "/v1/budget/allocate", 404, "NOT_FOUND"],
      ["post", "/v1/budget/allocate", 409, "CONFLICT"],
      ["get", "/v1/domains", 401, "UNAUTHORIZED"],
      // ours (decisions §9): the same code at two statuses, one class each
      ["post", "/v1/domains/{id}/verify", 422, "VERIFICATION_FAILED"],
      ["post", "/v1/webauthn/assert/verify", 400, "VERIFICATION_FAILED"],
      ["post", "/v1/budget/debit", 402, "INSUFFICIENT_BUDGET"],
      ["post", "/v1/authorize", 400, "INVALID_REDIRECT_URI"],
      ["post", "/v1/consent-bundles", 403, "CONSENT_REQUIRED"],
      ["post", "/v1/consent-bundles", 403, "AGENT_SUSPENDED"]
    ]
    for (const [method, path, status, code] of table) {
      expect({ [`${method} ${path} ${status}`]: declared(method, path).get(status) })
        .toEqual({ [`${method} ${path} ${status}`]: expect.arrayContaining([code]) })
    }
  })

  test("the gate's answers are declared where they apply", () => {
    for (const { method, path, op } of operations()) {
      // SCIM routes answer RFC 7644 errors (schemas/status/scimType/detail), not coded ones (decisions §11)
      if (path.startsWith("/scim/v2/")) continue
      const codes = declared(method, path)
      const where = `${method.toUpperCase()} ${path}`
      const exempt = ["/", "/health", "/health/live", "/health/ready", "/.well-known/jwks.json", "/favicon.ico", "/.well-known/did.json", "/ns/agent-auth/v1", "/vct/agent-grant"].includes(path)
      if (!exempt) expect({ where, codes: codes.get(429) }).toEqual({ where, codes: expect.arrayContaining(["RATE_LIMITED"]) })
      // the API key's gate (a grant-token or other bearer route has its own answers)
      if ((op.security ?? []).some((s: Record<string, unknown>) => "apiKey" in s)) {
        expect({ where, codes: codes.get(401) }).toEqual({ where, codes: ["UNAUTHORIZED"] })
        // (a principal session draws on no developer budget: decisions §12)
        if (!path.startsWith("/v1/principal/")) expect({ where, codes: codes.get(429) }).toEqual({ where, codes: expect.arrayContaining(["RATE_LIMIT_EXCEEDED"]) })
        expect({ where, codes: codes.get(503) }).toEqual({ where, codes: expect.arrayContaining(["DATABASE_UNAVAILABLE"]) })
        // decisions §2: a POST with an API key takes an Idempotency-Key; its replay and refusals are declared
        if (method === "post") {
          const success = Object.entries<any>(op.responses).find(([status]) => Number(status) < 300)![1]
          expect({
            where,
            parameter: (op.parameters ?? []).some((p: any) => p.name === "Idempotency-Key" && p.in === "header"),
            replayed: success.headers?.["Idempotent-Replayed"] !== undefined,
            refusals: [codes.get(409), codes.get(422)]
          }).toEqual({
            where, parameter: true, replayed: true,
            refusals: [expect.arrayContaining(["IDEMPOTENCY_KEY_IN_USE"]), expect.arrayContaining(["IDEMPOTENCY_KEY_REUSED"])]
          })
        }
      }
      if (op.requestBody !== undefined && !path.startsWith("/consent/") && !path.startsWith("/permissions/")) {
        expect({ where, codes: codes.get(415) }).toEqual({ where, codes: ["UNSUPPORTED_MEDIA_TYPE"] })
      }
      // nothing is decoded from an operation without a body or a query: no 400 unless its handler answers one
      if (op.requestBody === undefined && !(op.parameters ?? []).some((p: any) => p.in === "query")) {
        expect({ where, codes: codes.get(400) ?? [] }).not.toEqual({ where, codes: expect.arrayContaining(["BAD_REQUEST"]) })
      }
    }
  })
})

/** why `example` does not fit `schema` (a small JSON Schema check: types, enums, required and known properties), or undefined */
const misfit = (schema: any, example: unknown, at = "$"): string | undefined => {
  if (schema === undefined || schema === true || (typeof schema === "object" && Object.keys(schema).length === 0)) return undefined
  if (schema.$ref) return misfit(spec.components.schemas[schema.$ref.slice(REF.length)], example, at)
  if (schema.anyOf || schema.oneOf) {
    const members: Array<any> = schema.anyOf ?? schema.oneOf
    return members.some((m) => misfit(m, example, at) === undefined) ? undefined : `${at}: fits none of ${members.length} alternatives`
  }
  if (schema.enum && !schema.enum.includes(example)) return `${at}: ${JSON.stringify(example)} not in ${JSON.stringify(schema.enum)}`
  const type = example === null ? "null" : Array.isArray(example) ? "array" : typeof example
  const wanted: Array<string> = schema.type === undefined ? [] : [schema.type].flat()
  if (wanted.length > 0 && !wanted.some((t) => t === type || (t === "integer" && Number.isInteger(example)) || (t === "number" && type === "number"))) {
    return `${at}: ${type}, expected ${wanted.join("|")}`
  }
  if (type === "array" && schema.items) {
    for (const [i, item] of (example as Array<unknown>).entries()) {
      const problem = misfit(schema.items, item, `${at}[${i}]`)
      if (problem) return problem
    }
  }
  if (type === "object" && schema.properties) {
    const record = example as Record<string, unknown>
    for (const key of schema.required ?? []) if (!(key in record)) return `${at}.${key}: required, missing`
    for (const [key, value] of Object.entries(record)) {
      if (!(key in schema.properties)) {
        if (schema.additionalProperties === false || schema.additionalProperties === undefined) return `${at}.${key}: not a property`
        continue
      }
      const problem = misfit(schema.properties[key], value, `${at}.${key}`)
      if (problem) return problem
    }
  }
  return undefined
}

describe("the document explains itself (issue 17 item 2)", () => {
  test("every operation has a summary and a description", () => {
    for (const { method, path, op } of operations()) {
      const where = `${method.toUpperCase()} ${path}`
      expect({ where, summary: typeof op.summary === "string" && op.summary.length > 3 }).toEqual({ where, summary: true })
      expect({ where, description: typeof op.description === "string" && op.description.length > 20 }).toEqual({ where, description: true })
    }
  })

  test("each endpoint's documentation sits on its group under the endpoint's name, and reaches the document; no entry is left unused", () => {
    let documented = 0
    HttpApi.reflect(Api, {
      onGroup: ({ group }) => {
        // one entry per endpoint name: none missing, none naming an endpoint the group lacks
        const names = Object.keys(Context.getOption(group.annotations, OperationDocs).pipe(Option.getOrElse(() => ({})))).sort()
        expect({ group: group.identifier, names }).toEqual({ group: group.identifier, names: Object.keys(group.endpoints).sort() })
      },
      onEndpoint: ({ group, endpoint }) => {
        const doc = Option.getOrThrow(Context.getOption(group.annotations, OperationDocs))[endpoint.name]!
        const key = operationKey(endpoint.method, endpoint.path)
        const op = spec.paths[key.slice(key.indexOf(" ") + 1)]?.[endpoint.method.toLowerCase()]
        expect({ key, summary: op?.summary, description: op?.description?.slice(0, doc.description.length) })
          .toEqual({ key, summary: doc.summary, description: doc.description })
        documented++
      }
    })
    expect(documented).toBe(operations().length)
  })

  test("the tables still keyed by \"METHOD /path\" (hand-read bodies, credentials read by the handler, SCIM errors) name only operations the document has", () => {
    const keys = new Set(operations().map(({ method, path }) => operationKey(method, path)))
    for (const key of [...Object.keys(HAND_READ_BODIES), ...Object.keys(SECURED_BY), ...Object.keys(SCIM_ERRORS)]) {
      expect({ key, known: keys.has(key) }).toEqual({ key, known: true })
    }
  })

  test("every body is typed and has an example that fits its schema; a POST/PUT/PATCH without one reads none", () => {
    // the writes that take no body (the path says it all): anything else must declare what it reads
    const bodyless = new Set([
      "post /v1/keys/rotate", "post /v1/consent/{id}/approve", "post /v1/consent/{id}/deny", "post /v1/consent/{id}/passkey/options",
      "post /v1/consent-bundles/{id}/revoke", "post /v1/consent-bundles/{id}/refresh", "post /v1/domains/{id}/verify",
      "post /v1/webhooks/{id}/deliveries/{deliveryId}/retry", "post /v1/webhooks/{id}/rotate-secret", "post /v1/resource-servers/{id}/rotate-secret", "post /v1/policies/bundles/{id}/activate",
      "post /v1/sso/connections/{id}/test",
      "post /v1/anomalies/detect", "patch /v1/anomalies/{id}/acknowledge",
      "post /v1/dpdp/consent-notices/{noticeId}/versions/{version}/retire"
    ])
    let typed = 0
    for (const { method, path, op } of operations()) {
      const where = `${method.toUpperCase()} ${path}`
      if (op.requestBody === undefined) {
        if (["post", "put", "patch"].includes(method)) expect({ where, bodyless: bodyless.has(`${method} ${path}`) }).toEqual({ where, bodyless: true })
        continue
      }
      for (const [type, content] of Object.entries<any>(op.requestBody.content)) {
        const schema = content.schema?.$ref ? spec.components.schemas[content.schema.$ref.slice(REF.length)] : content.schema
        expect({ where, type, typed: schema?.type === "object" && typeof schema.properties === "object" }).toEqual({ where, type, typed: true })
        expect({ where, type, example: content.example !== undefined }).toEqual({ where, type, example: true })
        expect({ where, type, misfit: misfit(content.schema, content.example) }).toEqual({ where, type, misfit: undefined })
        typed++
      }
    }
    expect(typed).toBeGreaterThanOrEqual(30)
  })

  test("every success answer with a body has an example that fits its schema", () => {
    for (const { method, path, op } of operations()) {
      for (const [status, response] of Object.entries<any>(op.responses)) {
        if (Number(status) >= 300) continue
        for (const [type, content] of Object.entries<any>(response.content ?? {})) {
          const where = `${method.toUpperCase()} ${path} ${status} ${type}`
          expect({ where, example: content.example !== undefined }).toEqual({ where, example: true })
          if (type === "application/json") expect({ where, misfit: misfit(content.schema, content.example) }).toEqual({ where, misfit: undefined })
        }
      }
    }
  })

  test("the bearer schemes are declared and attached; groups have readable names and descriptions", () => {
    const schemes = spec.components.securitySchemes
    // no scheme without a description (one a middleware declared under another name included); before
    // toMatchObject below, which leaves its asymmetric matchers in the objects it was given (bun)
    for (const [name, scheme] of Object.entries<any>(schemes)) {
      expect({ name, described: typeof scheme.description === "string" && scheme.description.length > 20 }).toEqual({ name, described: true })
    }
    for (const name of ["apiKey", "grantToken", "scimToken", "principalSession"]) {
      expect(schemes[name]).toMatchObject({ type: "http", scheme: "bearer", description: expect.any(String) })
    }
    expect(spec.paths["/v1/vault/credentials/exchange"].post.security).toEqual([{ grantToken: [] }])
    expect(spec.paths["/v1/agents"].post.security).toEqual([{ apiKey: [] }])
    // a person's session token on their own routes; the developer's key creates the session
    for (const [method, path] of [["get", "/v1/principal/grants"], ["get", "/v1/principal/audit"], ["delete", "/v1/principal/grants/{id}"]] as const) {
      expect({ path, security: spec.paths[path][method].security }).toEqual({ path, security: [{ principalSession: [] }] })
    }
    expect(spec.paths["/v1/principal-sessions"].post.security).toEqual([{ apiKey: [] }])
    // an identity provider's SCIM token, refused (401) or limited (429) in the SCIM error shape
    // discovery (ServiceProviderConfig, ResourceTypes, Schemas) is public: no scheme, no 401
    for (const { method, path, op } of operations().filter((o) => o.path.startsWith("/scim/v2/"))) {
      const where = `${method} ${path}`
      const discovery = /^\/scim\/v2\/(ServiceProviderConfig|ResourceTypes|Schemas)/.test(path)
      expect({ where, security: op.security, gate: ["401", "429"].filter((s) => s in op.responses) })
        .toEqual({ where, security: discovery ? [] : [{ scimToken: [] }], gate: discovery ? ["429"] : ["401", "429"] })
    }
    const tags = new Map<string, string>(spec.tags.map((t: any) => [t.name, t.description]))
    for (const { method, path, op } of operations()) {
      for (const s of op.security ?? []) for (const name of Object.keys(s)) expect({ name, declared: name in schemes }).toEqual({ name, declared: true })
      for (const tag of op.tags) expect({ where: `${method} ${path}`, tag, described: (tags.get(tag) ?? "").length > 20 }).toEqual({ where: `${method} ${path}`, tag, described: true })
    }
    expect([...tags.keys()]).toContain("Consent bundles")
    expect([...tags.keys()]).not.toContain("consentBundles")
  })

  test("the event catalogue lists every event type with its data fields; the vault lists its scope forms", () => {
    const webhooks = spec.tags.find((t: any) => t.name === "Webhooks").description as string
    for (const type of EVENT_TYPES) expect(webhooks).toContain(`| \`${type}\` | ${EVENT_DATA[type]} |`)
    expect(webhooks).toContain("`previousStatus`")
    const vault = spec.tags.find((t: any) => t.name === "Credential vault").description as string
    for (const form of acceptedScopes("{service}")) expect(vault).toContain(`\`${form}\``)
  })

  test("where one thing has two names on the wire, the operation says so (item 7)", () => {
    const describes = (method: string, path: string, ...words: Array<string>) => {
      for (const word of words) expect({ [`${method} ${path}`]: spec.paths[path][method].description }).toEqual({ [`${method} ${path}`]: expect.stringContaining(word) })
    }
    describes("post", "/v1/consent-bundles", "`bundleId`", "`id`", "`userId`", "`principalId`")
    describes("get", "/v1/consent-bundles", "`id`", "`bundleId`")
    describes("post", "/v1/authorize", "`principalId`", "`userId`")
    describes("post", "/v1/tokens/verify", "`principal`", "`principalId`", "`agent`", "`agentId`")
  })

  test("the request examples that name nothing stored are accepted by the service as they are", async () => {
    const accepted = ["/v1/signup", "/v1/agents", "/v1/domains", "/v1/dpdp/breaches", "/v1/webauthn/register/options", "/v1/vault/credentials", "/v1/webhooks",
      "/v1/principal-sessions", "/v1/compliance/exports", "/v1/dpdp/exports", "/v1/policies", "/v1/policies/sync", "/v1/policies/evaluate", "/v1/anomaly/channels"]
    const statusOf: Record<string, number> = { "/v1/webauthn/register/options": 200, "/v1/compliance/exports": 202, "/v1/policies/evaluate": 200 }
    for (const path of accepted) {
      const example = spec.paths[path].post.requestBody.content["application/json"].example
      const res = await app.request("POST", path, { apiKey: dev.apiKey, body: example })
      expect({ path, status: res.status, code: res.body?.code }).toEqual({ path, status: statusOf[path] ?? 201, code: undefined })
      // the dry run of the documented request, after the documented rule: the documented decision
      if (path === "/v1/policies/evaluate") expect(res.body.effect).toBe(spec.paths[path].post.responses["200"].content["application/json"].example.effect)
    }
    // and the PUTs
    const policy = await app.request("PUT", "/v1/webauthn/policy", { apiKey: dev.apiKey, body: spec.paths["/v1/webauthn/policy"].put.requestBody.content["application/json"].example })
    expect([policy.status, policy.body]).toEqual([200, { ...spec.paths["/v1/webauthn/policy"].put.responses["200"].content["application/json"].example, updatedAt: expect.any(String) }])
  })

  test("the bodies checked by hand keep their own validation: the typed document changed no answer", async () => {
    const breach = await app.request("POST", "/v1/dpdp/breaches", { apiKey: dev.apiKey, body: { description: "x", nature: "y", extent: "z", surprise: 1 } })
    expect([breach.status, breach.body.code, breach.body.message]).toEqual([400, "BAD_REQUEST", "Unknown field surprise"])
    const sync = await app.request("POST", "/v1/audit/offline-sync", { apiKey: dev.apiKey, body: { bundleId: "bundle_x", entries: Array(1001).fill({}) } })
    expect([sync.status, sync.body.code]).toEqual([413, "PAYLOAD_TOO_LARGE"])
  })
})

describe("answers are among the declared codes", () => {
  test("an Idempotency-Key reused with another body: 422 IDEMPOTENCY_KEY_REUSED, as declared", async () => {
    const send = (name: string) => app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name, scopes: ["email:read"] }, headers: { "idempotency-key": "openapi-reuse" } })
    expect((await send("first")).status).toBe(201)
    expectDeclared("POST", "/v1/agents", await send("second"))
  })

  test("a sample of real failures, one per kind", async () => {
    const { apiKey } = dev
    const agentId = await createAgent(app, dev.developerId, ["email:read"])
    const samples: Array<[string, string, () => Promise<TestResponse>]> = [
      ["get", "/v1/consent-bundles/{id}", () => app.request("GET", "/v1/consent-bundles/bundle_nope", { apiKey })],
      ["post", "/v1/consent-bundles/{id}/revoke", () => app.request("POST", "/v1/consent-bundles/bundle_nope/revoke", { apiKey })],
      ["post", "/v1/consent-bundles", () => app.request("POST", "/v1/consent-bundles", { apiKey, body: { agentId } })],
      ["post", "/v1/consent-bundles", () =>
        app.request("POST", "/v1/consent-bundles", { apiKey, body: { agentId, userId: "u", scopes: ["nope:x"] } })],
      ["post", "/v1/consent-bundles", () =>
        app.request("POST", "/v1/consent-bundles", { apiKey, body: { agentId, userId: "u", scopes: ["email:read"], offlineTTL: "200h" } })],
      ["post", "/v1/consent-bundles", () =>
        app.request("POST", "/v1/consent-bundles", { apiKey, body: { agentId: "ag_nope", userId: "u", scopes: ["email:read"] } })],
      ["post", "/v1/agents", () => app.request("POST", "/v1/agents", { body: { name: "x" } })],
      ["post", "/v1/agents", () => app.request("POST", "/v1/agents", { apiKey, rawBody: "name=x", headers: { "content-type": "application/x-www-form-urlencoded" } })],
      ["get", "/v1/agents/{id}", () => app.request("GET", "/v1/agents/ag_nope", { apiKey })],
      ["get", "/v1/agents", () => app.request("GET", "/v1/agents?limit=1000", { apiKey })],
      ["post", "/v1/audit/offline-sync", () => app.request("POST", "/v1/audit/offline-sync", { apiKey, body: { bundleId: "bundle_nope", entries: [] } })],
      ["post", "/v1/audit/offline-sync", () => app.request("POST", "/v1/audit/offline-sync", { apiKey, body: {} })],
      ["post", "/v1/vault/credentials/exchange", () => app.request("POST", "/v1/vault/credentials/exchange", { body: { service: "x" } })],
      ["post", "/v1/domains/{id}/verify", () => app.request("POST", "/v1/domains/dom_nope/verify", { apiKey })],
      ["post", "/v1/grants/delegate", () =>
        app.request("POST", "/v1/grants/delegate", { apiKey, body: { parentGrantToken: "x.y.z", subAgentId: agentId, scopes: ["email:read"] } })],
      ["post", "/v1/budget/debit", () => app.request("POST", "/v1/budget/debit", { apiKey, body: { grantId: "grnt_nope", amount: 1 } })],
      ["post", "/v1/webhooks", () => app.request("POST", "/v1/webhooks", { apiKey, body: { url: "https://example.com/h", events: ["nope"] } })],
      ["post", "/v1/webauthn/assert/verify", () =>
        app.request("POST", "/v1/webauthn/assert/verify", { apiKey, body: { challengeId: "wac_nope", response: { id: "a", rawId: "a", type: "public-key", response: { clientDataJSON: "", authenticatorData: "", signature: "" } } } })],
      ["get", "/v1/consent/{id}", () => app.request("GET", "/v1/consent/areq_nope")],
      ["post", "/v1/token", () => app.request("POST", "/v1/token", { apiKey, body: { code: "nope", agentId } })]
    ]
    for (const [method, path, send] of samples) expectDeclared(method, path, await send())
  })

  test("the vault exchange's 403 is declared", async () => {
    const agentId = await createAgent(app, dev.developerId, ["calendar:read"])
    const { token } = await issueGrant(app, { developerId: dev.developerId, agentId, scopes: ["calendar:read"] })
    const res = await app.request("POST", "/v1/vault/credentials/exchange", { bearer: token.grantToken, body: { service: "github" } })
    expect(res.status).toBe(403)
    expectDeclared("post", "/v1/vault/credentials/exchange", res)
  })
})

describe("a code is a tag", () => {
  test("a service's failure is caught by its tag, and carries its code", async () => {
    const caught = await app.run(Effect.gen(function*() {
      const bundles = yield* ConsentBundles
      return yield* bundles.get(dev.developerId, "bundle_nope").pipe(
        Effect.map(() => "found"),
        Effect.catchTag("BundleNotFound", (e) => Effect.succeed(`${e._tag} ${e.code} ${e.message}`))
      )
    }))
    expect(caught).toBe("BundleNotFound BUNDLE_NOT_FOUND Consent bundle not found")
  })

  test("a class fixes its code and status", () => {
    const e = new BundleNotFound({ message: "gone" })
    expect(e).toMatchObject({ _tag: "BundleNotFound", code: "BUNDLE_NOT_FOUND", message: "gone" })
    expect(spec.components.schemas.BundleNotFound.description).toBe("404 BUNDLE_NOT_FOUND")
  })
})
