/**
 * The counter store goes away mid-run: requests fail closed with 503 RATE_LIMIT_UNAVAILABLE
 * quickly and their handlers never run; health says so; limiting resumes by itself when Redis
 * returns. (Containment routes keep working on a per-process counter: test/faults/containment.test.ts.)
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { REDIS_SERVER, startPrivateRedis, type PrivateRedis } from "../support/redis.ts"

let redis: PrivateRedis
let app: TestApp

beforeAll(async () => {
  if (!REDIS_SERVER) return
  redis = await startPrivateRedis()
  app = await startTestApp({ env: { REDIS_URL: redis.url } })
})
afterAll(async () => {
  await app?.stop()
  await redis?.stop()
})

test.skipIf(!REDIS_SERVER)("Redis stopped: 503 at once (no queued command), no handler runs, recovery without restart", async () => {
  const { apiKey } = await app.signup()
  expect((await app.request("GET", "/v1/me", { apiKey })).status).toBe(200)
  const before = (await app.query<{ n: number }>("SELECT count(*)::int AS n FROM developers"))[0]!.n

  await redis.stop()

  for (let i = 0; i < 5; i++) {
    const started = performance.now()
    const res = await app.request("POST", "/v1/signup", { body: { name: `during-outage-${i}` } })
    const elapsed = performance.now() - started
    expect(res.status).toBe(503)
    expect(res.body).toEqual({
      code: "RATE_LIMIT_UNAVAILABLE",
      message: expect.any(String),
      requestId: res.headers.get("x-request-id")
    })
    expect(elapsed).toBeLessThan(3000) // fails fast: a queued command would wait for Redis to come back
  }
  // the handler never ran: no developer was written
  const during = (await app.query<{ n: number }>("SELECT count(*)::int AS n FROM developers"))[0]!.n
  expect(during).toBe(before)
  expect((await app.request("GET", "/v1/me", { apiKey })).status).toBe(503)

  const health = await app.request("GET", "/health")
  expect(health.status).toBe(503)
  expect(health.body).toEqual({ status: "degraded", failing: ["redis"] })

  await redis.start()
  let recovered = false
  for (let i = 0; i < 100 && !recovered; i++) {
    recovered = (await app.request("GET", "/v1/me", { apiKey })).status === 200
    if (!recovered) await Bun.sleep(50)
  }
  expect(recovered).toBe(true)
  expect((await app.request("GET", "/health")).body).toEqual({ status: "ok" })
})
