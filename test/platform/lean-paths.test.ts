/**
 * Issue 27: GET /health and /health/live are answered outside HttpApiBuilder (src/system/Lean.ts).
 * The lean answer must be what the API answers: status, body, every header, the request metric
 * and the access line, healthy and with Redis stopped (503 degraded). `server.viaApi` is the same
 * server's handler without the lean path.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { REDIS_SERVER, startPrivateRedis, type PrivateRedis } from "../support/redis.ts"

let redis: PrivateRedis | undefined
let app: TestApp
const lines: Array<string> = []
const consoleLog = console.log

beforeAll(async () => {
  if (REDIS_SERVER) redis = await startPrivateRedis()
  app = await startTestApp({ env: { LOG_LEVEL: "info", ...(redis ? { REDIS_URL: redis.url } : {}) } })
  console.log = (...args: Array<unknown>) => void lines.push(args.map(String).join(" "))
})
afterAll(async () => {
  console.log = consoleLog
  await app?.stop()
  await redis?.stop()
})

interface Answer {
  readonly status: number
  readonly body: string
  readonly headers: Array<[string, string]>
  readonly metric: number
  readonly access: Array<Record<string, unknown>>
}

const metricOf = async (route: string, status: number) => {
  const text = await (await app.server.viaApi(new Request(`${app.url}/metrics`))).text()
  const match = text.split("\n").find((l) => l.includes(`http_requests_total{method="GET",route="${route}",status="${status}"}`))
  return match === undefined ? 0 : Number(match.split(" ").at(-1))
}

/** one request through `handler`: its answer, how much the metric moved, and the access lines it wrote */
const ask = async (handler: (r: Request) => Promise<Response>, path: string, requestId?: string, status = 200): Promise<Answer> => {
  const route = path
  const before = await metricOf(route, status)
  lines.length = 0
  const response = await handler(new Request(`${app.url}${path}`, { headers: requestId === undefined ? {} : { "x-request-id": requestId } }))
  const body = await response.text()
  const access = lines.map((l) => { try { return JSON.parse(l) } catch { return {} } })
    .filter((l) => l.message === "request")
    .map(({ time, durationMs, ...rest }) => ({ ...rest, timed: typeof time === "string" && typeof durationMs === "number" }))
  const metric = (await metricOf(route, status)) - before
  const headers = [...response.headers.entries()].filter(([k]) => k !== "date").sort(([a], [b]) => a.localeCompare(b))
  return { status: response.status, body, headers, metric, access }
}

const same = async (path: string, status: number) => {
  const lean = await ask(app.server.handler, path, "probe-1", status)
  const api = await ask(app.server.viaApi, path, "probe-1", status)
  expect(lean).toEqual(api)
  expect(lean.metric).toBe(1)
  expect(lean.access).toHaveLength(1)
  // an id that is not well-formed is replaced by a fresh one, on both paths
  const [a, b] = [await ask(app.server.handler, path, "bad id!", status), await ask(app.server.viaApi, path, "bad id!", status)]
  const idOf = (x: Answer) => x.headers.find(([k]) => k === "x-request-id")![1]
  expect(idOf(a)).toMatch(/^req_/)
  expect(idOf(b)).toMatch(/^req_/)
  expect(idOf(a)).not.toBe(idOf(b))
  expect({ ...a, headers: a.headers.filter(([k]) => k !== "x-request-id"), access: [] })
    .toEqual({ ...b, headers: b.headers.filter(([k]) => k !== "x-request-id"), access: [] })
  return lean
}

test("GET /health and /health/live: the lean answer is the API's (body, status, headers, metric, access line)", async () => {
  const health = await same("/health", 200)
  expect(health.status).toBe(200)
  expect(JSON.parse(health.body)).toEqual({ status: "ok" })
  expect(health.headers).toContainEqual(["x-content-type-options", "nosniff"])
  expect(health.headers).toContainEqual(["x-request-id", "probe-1"])
  expect(health.access[0]).toMatchObject({ method: "GET", route: "/health", status: 200, requestId: "probe-1" })
  const live = await same("/health/live", 200)
  expect(JSON.parse(live.body)).toEqual({ status: "ok", version: expect.any(String) })
  // over the wire too, with a query string
  const wire = await app.request("GET", "/health?verbose=1")
  expect(wire.status).toBe(200)
  expect(wire.body).toEqual({ status: "ok" })
})

test.skipIf(!REDIS_SERVER)("Redis stopped: both paths answer 503 degraded, failing redis, alike", async () => {
  await redis!.stop()
  try {
    const health = await same("/health", 503)
    expect(health.status).toBe(503)
    expect(JSON.parse(health.body)).toEqual({ status: "degraded", failing: ["redis"] })
  } finally {
    await redis!.start()
  }
})

test.skipIf(!REDIS_SERVER)("Redis stopped: a light read whose key is cached (admitted without a fiber) answers 503 RATE_LIMIT_UNAVAILABLE as the API does", async () => {
  // (after the test above restarted Redis, the service's client reconnects within a second or so)
  for (let i = 0; i < 50 && (await app.request("GET", "/health")).status !== 200; i++) await Bun.sleep(100)
  const { apiKey } = await app.signup()
  // the key is resolved and cached by a first request, so the lean path's fiberless admission takes the next
  expect((await app.server.lean(new Request(`${app.url}/v1/me`, { headers: { authorization: `Bearer ${apiKey}` } }))!).status).toBe(200)
  await redis!.stop()
  try {
    const ask = async (handler: (r: Request) => Promise<Response> | undefined) => {
      const response = await handler(new Request(`${app.url}/v1/me`, { headers: { authorization: `Bearer ${apiKey}`, "x-request-id": "redis-cut-1" } }))!
      const headers = [...response.headers.entries()].filter(([k]) => k !== "date").sort(([a], [b]) => a.localeCompare(b))
      return { status: response.status, body: await response.text(), headers }
    }
    const lean = await ask(app.server.lean)
    expect(lean.status).toBe(503)
    expect(JSON.parse(lean.body)).toEqual({ code: "RATE_LIMIT_UNAVAILABLE", message: "Rate limiter unavailable; try again shortly", requestId: "redis-cut-1" })
    expect(lean).toEqual(await ask(app.server.viaApi))
  } finally {
    await redis!.start()
  }
})
