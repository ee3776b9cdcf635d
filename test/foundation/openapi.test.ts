/**
 * Errors, one class per code (issue 17 item 1; decisions §1): the OpenAPI document declares, per
 * operation and status, the codes the service answers with, each as a schema whose `code` is one
 * literal; answers the service really gives are among those declared; and a service's failure can
 * be caught by its tag.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { ConsentBundles } from "../../src/consent-bundles/Service.ts"
import { BundleNotFound } from "../../src/platform/Errors.ts"
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
      const codes = declared(method, path)
      const where = `${method.toUpperCase()} ${path}`
      const exempt = ["/health", "/health/live", "/health/ready", "/.well-known/jwks.json", "/favicon.ico", "/.well-known/did.json", "/ns/agent-auth/v1", "/vct/agent-grant"].includes(path)
      if (!exempt) expect({ where, codes: codes.get(429) }).toEqual({ where, codes: expect.arrayContaining(["RATE_LIMITED"]) })
      if (op.security?.length > 0) {
        expect({ where, codes: codes.get(401) }).toEqual({ where, codes: ["UNAUTHORIZED"] })
        expect({ where, codes: codes.get(429) }).toEqual({ where, codes: expect.arrayContaining(["RATE_LIMIT_EXCEEDED"]) })
        expect({ where, codes: codes.get(503) }).toEqual({ where, codes: expect.arrayContaining(["DATABASE_UNAVAILABLE"]) })
      }
      if (op.requestBody !== undefined && !path.startsWith("/consent/")) {
        expect({ where, codes: codes.get(415) }).toEqual({ where, codes: ["UNSUPPORTED_MEDIA_TYPE"] })
      }
      // nothing is decoded from an operation without a body or a query: no 400 unless its handler answers one
      if (op.requestBody === undefined && !(op.parameters ?? []).some((p: any) => p.in === "query")) {
        expect({ where, codes: codes.get(400) ?? [] }).not.toEqual({ where, codes: expect.arrayContaining(["BAD_REQUEST"]) })
      }
    }
  })
})

describe("answers are among the declared codes", () => {
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
