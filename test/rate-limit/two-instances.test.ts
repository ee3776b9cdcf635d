/** Two service instances against one database and one Redis share every budget. */
import { expect, test } from "bun:test"
import { startTestApp, usingRealPostgres, usingRealRedis } from "../support/app.ts"

test.skipIf(!usingRealPostgres || !usingRealRedis)("the plan budget and route limits are shared across instances", async () => {
  const one = await startTestApp({ testClock: true, env: { RATE_LIMIT_ROUTE_DEFAULT: "1000" } })
  const two = await startTestApp({
    testClock: true,
    databaseUrl: one.databaseUrl,
    redisKeyPrefix: one.config.redisKeyPrefix,
    env: { RATE_LIMIT_ROUTE_DEFAULT: "1000" }
  })
  try {
    const { apiKey } = await one.signup()
    const statuses: Array<number> = []
    for (let i = 0; i < 50; i++) {
      const [a, b] = await Promise.all([
        one.request("GET", "/v1/me", { apiKey }),
        two.request("GET", "/v1/me", { apiKey })
      ])
      statuses.push(a.status, b.status)
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(100)
    expect((await one.request("GET", "/v1/me", { apiKey })).status).toBe(429)
    expect((await two.request("GET", "/v1/me", { apiKey })).status).toBe(429)

    // a route's own per-address limit (POST /v1/token, 20/min) is shared too
    const enterprise = await one.signup({ plan: "enterprise" })
    let counted = 0
    for (let i = 0; i < 15; i++) {
      for (const instance of [one, two]) {
        if ((await instance.request("POST", "/v1/token", { apiKey: enterprise.apiKey, body: {} })).status !== 429) counted++
      }
    }
    expect(counted).toBe(20)
  } finally {
    await two.stop()
    await one.stop()
  }
})
