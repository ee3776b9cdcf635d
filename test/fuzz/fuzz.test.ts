/**
 * Bad input (issue 10): random and mutated bodies, headers and paths against every endpoint of the
 * OpenAPI document. Never a 5xx, never a hang, every JSON error in the { code, message, requestId }
 * shape; oversized bodies refused early with 413. Issue 16: deep nesting, chunked framing,
 * multipart and null-typed bodies on every body endpoint too.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import fc from "fast-check"
import { startTestApp, type TestApp } from "../support/app.ts"
import { chunkedRequest } from "../support/rawHttp.ts"

let app: TestApp
let apiKey: string
let operations: Array<{ method: string; path: string }>

beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "1000" } })
  apiKey = (await app.signup({ plan: "enterprise" })).apiKey
  const spec = (await app.request("GET", "/openapi.json")).body
  operations = []
  for (const [path, item] of Object.entries<any>(spec.paths)) {
    for (const method of Object.keys(item)) {
      if (["get", "post", "put", "patch", "delete"].includes(method)) operations.push({ method: method.toUpperCase(), path })
    }
  }
})
afterAll(() => app.stop())

const segment = fc.oneof(
  fc.constantFrom("x", "0", "-1", "null", "%00", "..", "%2e%2e", "a".repeat(300), "dev_01M81SHH65Z2X8RHEGYJ28D38G", "grnt_nope"),
  fc.string({ maxLength: 40 }).map(encodeURIComponent)
)
const jsonBody = fc.oneof(
  fc.anything({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? "null"),
  fc.object({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 200 }),
  fc.constantFrom("", "{", "[]", "null", '{"__proto__":{"x":1}}', '{"entries":' + "[".repeat(500) + "]".repeat(500) + "}", "\u0000")
)
const auth = fc.oneof(
  fc.constant<string | undefined>(undefined),
  fc.constant("valid"),
  fc.constantFrom("Bearer ", "Bearer x.y.z", "Basic Zm9vOmJhcg==", "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "bearer  sk_live_" + "A".repeat(43)),
  fc.string({ maxLength: 60 })
)

const expectErrorShape = (status: number, headers: Headers, text: string) => {
  expect(status).toBeLessThan(500)
  if (status >= 400 && (headers.get("content-type") ?? "").startsWith("application/scim+json")) {
    // SCIM routes answer RFC 7644 errors (decisions §11)
    const body = JSON.parse(text)
    expect(body.schemas).toEqual(["urn:ietf:params:scim:api:messages:2.0:Error"])
    expect(body.status).toBe(String(status))
    expect(typeof body.detail).toBe("string")
  } else if (status >= 400 && headers.get("pragma") === "no-cache" && (headers.get("content-type") ?? "").includes("json")) {
    // OAuth routes answer RFC 6749 §5.2 errors, never cached (decisions §22.4)
    const body = JSON.parse(text)
    expect(typeof body.error).toBe("string")
    expect(body.code).toBeUndefined()
  } else if (status >= 400 && (headers.get("content-type") ?? "").includes("json")) {
    const body = JSON.parse(text)
    expect(typeof body.code).toBe("string")
    expect(typeof body.message).toBe("string")
    expect(body.requestId).toBe(headers.get("x-request-id"))
  }
}

const send = async (method: string, path: string, body: string | undefined, authorization: string | undefined, extra: Record<string, string> = {}) => {
  const headers: Record<string, string> = { ...extra }
  if (authorization === "valid") headers.authorization = `Bearer ${apiKey}`
  else if (authorization !== undefined) headers.authorization = authorization
  if (body !== undefined) headers["content-type"] ??= "application/json"
  const res = await fetch(app.url + path, {
    method,
    headers,
    body: method === "GET" || method === "DELETE" ? undefined : body,
    redirect: "manual",
    signal: AbortSignal.timeout(5000)
  })
  // a live event stream (decisions §23) stays open by design: its answer is its status and headers
  if ((res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    await res.body?.cancel()
    return { status: res.status, headers: res.headers, text: "" }
  }
  return { status: res.status, headers: res.headers, text: await res.text() }
}

describe("fuzz", () => {
  test("every endpoint: random bodies, paths and credentials never give a 5xx", async () => {
    expect(operations.length).toBeGreaterThan(3)
    await fc.assert(
      fc.asyncProperty(
        fc.nat(),
        fc.array(segment, { minLength: 1, maxLength: 3 }),
        jsonBody,
        auth,
        async (index, segments, body, authorization) => {
          const op = operations[index % operations.length]!
          let i = 0
          const path = op.path.replace(/\{[^}]+\}/g, () => segments[i++ % segments.length]!)
          const res = await send(op.method, path, body, authorization)
          expectErrorShape(res.status, res.headers, res.text)
        }
      ),
      { numRuns: Math.max(300, operations.length * 8) }
    )
  }, 120_000)

  test("mutated valid bodies: each field replaced by a value of another type", async () => {
    const samples: Array<[string, string, Record<string, unknown>]> = [
      ["POST", "/v1/signup", { name: "n", email: "a@b.co", mode: "live" }],
      ["PATCH", "/v1/me", { name: "n", fidoRequired: true }]
    ]
    const weird = fc.oneof(fc.constantFrom(null, true, 0, -1, 1e308, "", "x".repeat(5000), [], {}, [[]], { a: { b: {} } }), fc.anything({ maxDepth: 2 }))
    await fc.assert(
      fc.asyncProperty(fc.nat(), fc.nat(), weird, async (s, f, value) => {
        const [method, path, valid] = samples[s % samples.length]!
        const keys = Object.keys(valid)
        const body = { ...valid, [keys[f % keys.length]!]: value }
        const res = await send(method, path, JSON.stringify(body), "valid")
        expectErrorShape(res.status, res.headers, res.text)
      }),
      { numRuns: 150 }
    )
  }, 120_000)

  test("random paths and methods answer 404 or 405 in the error shape", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"), fc.array(segment, { maxLength: 5 }), async (method, segs) => {
        const res = await send(method, "/" + segs.join("/"), undefined, undefined)
        expectErrorShape(res.status, res.headers, res.text)
      }),
      { numRuns: 150 }
    )
  }, 120_000)

  test("oversized bodies are refused early with 413", async () => {
    const big = JSON.stringify({ name: "x".repeat(2 * 1024 * 1024) })
    const res = await send("POST", "/v1/signup", big, undefined)
    expect(res.status).toBe(413)
    expect(JSON.parse(res.text).code).toBe("PAYLOAD_TOO_LARGE")
  })

  const bodyOperations = () => operations.filter((op) => op.method !== "GET" && op.method !== "DELETE")
  const concrete = (path: string) => path.replace(/\{[^}]+\}/g, "x")

  test("every body endpoint: deep nesting, null-typed fields, multipart and chunked bodies never give a 5xx", async () => {
    const ops = bodyOperations()
    expect(ops.length).toBeGreaterThan(10)
    const deep = (levels: number) => `{"metadata":${"[".repeat(levels)}${"]".repeat(levels)}}`
    const nullTyped = ['{"response":null}', '{"name":null,"metadata":null,"entries":null,"scopes":null}', "null", "[null]", '{"challengeId":null,"response":null}']
    const form = new FormData()
    form.append("name", "x")
    form.append("file", new Blob(["{}"], { type: "application/json" }), "a.json")
    for (const op of ops) {
      const path = concrete(op.path)
      for (const authorization of [undefined, "valid"]) {
        for (const body of [deep(65), deep(10_000), deep(100_000), `{"a":"${"[".repeat(1000)}"}`, ...nullTyped]) {
          const res = await send(op.method, path, body, authorization)
          expectErrorShape(res.status, res.headers, res.text)
        }
        const headers: Record<string, string> = authorization ? { authorization: `Bearer ${apiKey}` } : {}
        const multipart = await fetch(app.url + path, { method: op.method, body: form, headers })
        expectErrorShape(multipart.status, multipart.headers, await multipart.text())
        const chunked = await chunkedRequest(app.url, op.method, path, { ...headers, "content-type": "application/json" }, ['{"name":', '"x","metadata":', deep(70).slice(13)])
        expect([op.method, path, chunked.status < 500]).toEqual([op.method, path, true])
      }
    }
  }, 120_000)

  test("chunked bodies over the limit answer 413 on every body endpoint", async () => {
    const chunk = "x".repeat(256 * 1024)
    for (const op of bodyOperations()) {
      const path = concrete(op.path)
      // offline sync (8 MiB) has its own test in test/platform/bodies.test.ts
      if (path === "/v1/audit/offline-sync") continue
      const res = await chunkedRequest(app.url, op.method, path, { authorization: `Bearer ${apiKey}`, "content-type": "application/json" }, [
        '{"name":"',
        ...Array.from({ length: 6 }, () => chunk),
        '"}'
      ])
      expect([op.method, path, res.status]).toEqual([op.method, path, 413])
    }
  }, 120_000)

  test("headers: huge, repeated or odd values never give a 5xx", async () => {
    for (const headers of <Array<Record<string, string>>>[
      { "x-request-id": "a".repeat(8000) },
      { "x-forwarded-for": "not-an-ip, ::1, 999.1.1.1" },
      { "content-type": "text/plain" },
      { "content-type": "application/json; charset=utf-16" },
      { authorization: "Bearer " + "x".repeat(6000) }
    ]) {
      const res = await send("POST", "/v1/signup", '{"name":"h"}', undefined, headers)
      expectErrorShape(res.status, res.headers, res.text)
    }
  })
})
