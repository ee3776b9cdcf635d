/**
 * decisions §19 (revised), issue 32 item 4: telemetry carries no capability. Exported spans name
 * the route template, carry only method, route, status, user agent and request id, and never a
 * consent request id, an OIDC code or state, a token, a key, a query string, a body or a header.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { scrub } from "../../src/platform/Tracing.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"

interface Span {
  readonly name: string
  readonly kind: number
  readonly attributes: Record<string, unknown>
  readonly raw: unknown
}
const received: Array<Span> = []
const receiver = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: async (request) => {
    const body = await request.json() as any
    for (const rs of body.resourceSpans ?? []) {
      for (const ss of rs.scopeSpans ?? []) {
        for (const span of ss.spans ?? []) {
          received.push({
            name: span.name,
            kind: span.kind,
            attributes: Object.fromEntries((span.attributes ?? []).map((a: any) => [a.key, Object.values(a.value ?? {})[0]])),
            raw: span
          })
        }
      }
    }
    return Response.json({})
  }
})

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${receiver.port}`, RATE_LIMIT_SCALE: "100" } })
})
afterAll(() => receiver.stop(true))

const ALLOWED = ["http.request.method", "http.response.status_code", "http.route", "request.id", "user_agent.original"]

test("request spans: route templates, the allow-list only, and no capability anywhere in the export", async () => {
  const dev = await app.signup()
  const agentId = await createAgent(app, dev.developerId, ["email:read"])
  const pending = await app.request("POST", "/v1/authorize", {
    apiKey: dev.apiKey, body: { agentId, principalId: "user_1", scopes: ["email:read"] }, headers: { "x-request-id": "req-telemetry-1" }
  })
  expect(pending.status).toBe(201)
  const requestId: string = pending.body.authRequestId
  expect(requestId).toMatch(/^areq_/)
  const secretHeader = "x-private-note"
  const consentJson = await app.request("GET", `/v1/consent/${requestId}`, { apiKey: dev.apiKey, headers: { [secretHeader]: "header-value-77", cookie: "sid=cookie-value-77" } })
  expect(consentJson.status).toBe(200)
  const page = await fetch(`${app.url}/consent?req=${requestId}`, { headers: { "user-agent": "telemetry-test/1.0" } })
  expect(page.status).toBe(200)
  await page.text()
  const code = "c".repeat(43), state = "s".repeat(43)
  const callback = await fetch(`${app.url}/sso/oidc/callback?code=${code}&state=${state}`, { redirect: "manual" })
  await callback.text()
  const grant = await app.request("GET", "/v1/grants/grnt_01JZZZZZZZZZZZZZZZZZZZZZZZ", { apiKey: dev.apiKey })
  expect(grant.status).toBe(404)
  const missing = await app.request("GET", `/nowhere/${requestId}?token=${code}`)
  expect(missing.status).toBe(404)
  await app.stop() // flushes the exporter

  const servers = received.filter((s) => s.kind === 2)
  const names = servers.map((s) => s.name)
  for (const name of ["POST /v1/authorize", "GET /v1/consent/:id", "GET /consent", "GET /sso/oidc/callback", "GET /v1/grants/:id", "GET unmatched"]) {
    expect(names).toContain(name)
  }
  for (const span of servers) expect(Object.keys(span.attributes).every((key) => ALLOWED.includes(key))).toBe(true)
  const authorize = servers.find((s) => s.name === "POST /v1/authorize")!
  expect(authorize.attributes).toEqual({
    "http.request.method": "POST",
    "http.route": "/v1/authorize",
    "http.response.status_code": 201,
    "request.id": "req-telemetry-1",
    "user_agent.original": expect.any(String)
  })
  expect(servers.find((s) => s.name === "GET /consent")!.attributes["user_agent.original"]).toBe("telemetry-test/1.0")
  const exported = JSON.stringify(received.map((s) => s.raw))
  // the request's principal (not the word "principalId": a migration's index on events' data->>'principalId' is exported as a statement)
  for (const capability of [requestId, code, state, dev.apiKey, "header-value-77", "cookie-value-77", secretHeader, "user_1", "email:read\"]"]) {
    expect({ capability, found: exported.includes(capability) }).toEqual({ capability, found: false })
  }
  expect(exported).not.toContain("url.query")
  expect(exported).not.toContain("url.full")
})

test("the scrubber takes out consent request ids and code-, token- and key-shaped runs, and leaves plain text", () => {
  expect(scrub("request areq_01JABCDEFGHJKMNPQRSTVWXYZ0 not found")).toBe("request [redacted] not found")
  expect(scrub(`code=${"A1b2-_".repeat(8)}&x=1`)).toBe("code=[redacted]&x=1")
  expect(scrub("SELECT id FROM grants WHERE developer_id = $1")).toBe("SELECT id FROM grants WHERE developer_id = $1")
})
