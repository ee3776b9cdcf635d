/**
 * Traces (issue 18, item 4): with OTEL_EXPORTER_OTLP_ENDPOINT set, spans for a request and for its
 * SQL statements arrive at a local OTLP/HTTP receiver; unset, nothing is sent.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"

interface ReceivedSpan {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly attributes: Record<string, unknown>
}

const received: Array<ReceivedSpan> = []
const resources: Array<Record<string, unknown>> = []
const receiver = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: async (request) => {
    const url = new URL(request.url)
    if (request.method !== "POST" || url.pathname !== "/v1/traces") return new Response("not found", { status: 404 })
    const body = await request.json() as any
    for (const rs of body.resourceSpans ?? []) {
      resources.push(Object.fromEntries((rs.resource?.attributes ?? []).map((a: any) => [a.key, Object.values(a.value ?? {})[0]])))
      for (const ss of rs.scopeSpans ?? []) {
        for (const span of ss.spans ?? []) {
          received.push({
            name: span.name,
            traceId: span.traceId,
            spanId: span.spanId,
            parentSpanId: span.parentSpanId || undefined,
            attributes: Object.fromEntries((span.attributes ?? []).map((a: any) => [a.key, Object.values(a.value ?? {})[0]]))
          })
        }
      }
    }
    return Response.json({})
  }
})

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${receiver.port}/` } })
})
afterAll(async () => {
  receiver.stop(true)
})

test("a request and its SQL statements arrive as spans of one trace, with the service's name and version", async () => {
  const dev = await app.signup()
  const res = await app.request("GET", "/v1/me", { apiKey: dev.apiKey, headers: { "x-request-id": "trace-me" } })
  expect(res.status).toBe(200)
  // named by the route template (issue 32: the span carries no URL, see test/platform/telemetry.test.ts)
  const findSignup = () => received.find((s) => s.name === "POST /v1/signup" && s.attributes["http.route"] === "/v1/signup")
  // The spans arrive by the 2 s export interval or by the flush at stop. Stopping while an interval
  // export is on the wire interrupts it (the library's exporter takes its buffer before sending), so
  // the test waits for the interval's delivery first (seen lost once in CI's loaded run) and stops after.
  for (let waited = 0; findSignup() === undefined && waited < 10_000; waited += 50) await Bun.sleep(50)
  await app.stop()
  const signup = findSignup()
  expect(signup).toBeDefined()
  expect(signup!.attributes["http.request.method"]).toBe("POST")
  expect(signup!.attributes["http.response.status_code"]).toBe(201)
  // the INSERT of the sign-up is a child span of that request
  const insert = received.find((s) => s.traceId === signup!.traceId && String(s.attributes["db.statement"] ?? s.attributes["db.query.text"] ?? "").includes("INSERT INTO developers"))
  expect(insert).toBeDefined()
  expect(insert!.name).toBe("sql.execute")
  // the API key is never an attribute (the Authorization header is redacted)
  expect(JSON.stringify(received)).not.toContain(dev.apiKey)
  expect(resources[0]).toMatchObject({ "service.name": "agent-auth-service" })
})

test("without the variable nothing is exported", async () => {
  const before = received.length
  const quiet = await startTestApp()
  try {
    await quiet.signup()
  } finally {
    await quiet.stop()
  }
  expect(received.length).toBe(before)
})
