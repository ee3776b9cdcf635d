/**
 * Readiness follows the dependencies (issue 18, item 3): Redis stopped → /health/ready 503 naming it,
 * /health/live still 200, one "dependency unavailable" line; Redis back → ready again and one
 * "dependency available again" line.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import pkg from "../../package.json" with { type: "json" }
import { createDatabase, startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { startProxy } from "../support/proxy.ts"
import { REDIS_SERVER, startPrivateRedis, type PrivateRedis } from "../support/redis.ts"

let redis: PrivateRedis
let app: TestApp
const lines: Array<any> = []
const originalLog = console.log

beforeAll(async () => {
  if (!REDIS_SERVER) return
  console.log = (...args: Array<unknown>) => {
    for (const arg of args) {
      try {
        lines.push(JSON.parse(String(arg)))
      } catch {
        // not a log line
      }
    }
  }
  redis = await startPrivateRedis()
  app = await startTestApp({ env: { REDIS_URL: redis.url, LOG_LEVEL: "warn" } })
})
afterAll(async () => {
  await app?.stop()
  await redis?.stop()
  console.log = originalLog
})

test.skipIf(!REDIS_SERVER)("Redis stopped: ready 503 (live 200, /metrics 200), logged once; back: ready 200, logged once", async () => {
  const { apiKey } = await app.signup()
  const fetchKey = async () => apiKey
  expect((await app.request("GET", "/health/ready")).status).toBe(200)
  await redis.stop()
  for (let i = 0; i < 3; i++) {
    const started = performance.now()
    const ready = await app.request("GET", "/health/ready")
    expect(performance.now() - started).toBeLessThan(4000) // each probe is bounded to 1 s (slack for a loaded machine)
    expect([ready.status, ready.body]).toEqual([503, { status: "not_ready", version: pkg.version, commit: expect.any(String), builtAt: "source", checks: { db: "ok", redis: "unavailable", migrations: "ok" } }])
    expect(ready.headers.get("x-request-id")).toBeTruthy()
  }
  expect((await app.request("GET", "/health/live")).status).toBe(200)
  // the scrape answers during the outage (its limit counted in process), and shows the failed probes
  const during = await app.request("GET", "/metrics")
  expect(during.status).toBe(200)
  expect(during.text).toMatch(/^agent_auth_dependency_probe_duration_seconds_count\{dependency="redis",result="failed"\} 3$/m)
  expect((await app.request("GET", "/v1/me", { apiKey: (await fetchKey()) })).status).toBe(503)
  expect(lines.filter((l) => l.message === "dependency unavailable")).toEqual([
    expect.objectContaining({ level: "warn", dependency: "redis", reason: expect.any(String) })
  ])

  await redis.start()
  let ready = 0
  for (let i = 0; i < 100 && ready !== 200; i++) {
    ready = (await app.request("GET", "/health/ready")).status
    if (ready !== 200) await Bun.sleep(50)
  }
  expect(ready).toBe(200)
  // info is below this app's level (warn): the warning is there, the recovery line is filtered
  expect(lines.filter((l) => l.dependency === "redis").map((l) => l.message)).toEqual(["dependency unavailable"])
})

test.skipIf(!usingRealPostgres)("PostgreSQL cut: requests answer 503, ready says db, one line away and one back", async () => {
  const db = await createDatabase()
  const direct = new URL(db.url)
  const proxy = await startProxy(direct.hostname, Number(direct.port || 5432))
  const viaProxy = new URL(db.url)
  viaProxy.hostname = "127.0.0.1"
  viaProxy.port = String(proxy.port)
  const own = await startTestApp({ databaseUrl: viaProxy.toString(), env: { LOG_LEVEL: "info", RATE_LIMIT_SCALE: "100" } })
  const from = lines.length
  try {
    expect((await own.request("POST", "/v1/signup", { body: { name: "before" } })).status).toBe(201)
    await proxy.cut()
    for (let i = 0; i < 3; i++) expect((await own.request("POST", "/v1/signup", { body: { name: "during" } })).status).toBe(503)
    const ready = await own.request("GET", "/health/ready")
    expect([ready.status, ready.body.checks]).toEqual([503, { db: "unavailable", redis: "ok", migrations: "unknown" }])
    await proxy.restore()
    let back = 0
    for (let i = 0; i < 100 && back !== 200; i++) {
      back = (await own.request("GET", "/health/ready")).status
      if (back !== 200) await Bun.sleep(50)
    }
    expect(back).toBe(200)
    const transitions = lines.slice(from).filter((l) => l.dependency === "db").map((l) => [l.level, l.message])
    expect(transitions).toEqual([["warn", "dependency unavailable"], ["info", "dependency available again"]])
  } finally {
    await own.stop()
    await proxy.close()
    await db.drop()
  }
}, 120_000)
