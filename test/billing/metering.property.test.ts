/**
 * Property (decisions §16): whatever mix of concurrent authorizations, code exchanges and refreshes
 * runs across a month boundary (TestClock), with the counter store (a private redis-server) stopped
 * part of the time, each closed invoice's quantities equal both the SQL counts of the durable rows in
 * its month and the successes the clients saw; the free plan never passes its authorization quota.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import fc from "fast-check"
import { closePeriod } from "../../src/billing/Invoices.ts"
import { periodOf } from "../../src/billing/Plans.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { REDIS_SERVER, startPrivateRedis, type PrivateRedis } from "../support/redis.ts"
import { authorize, count, exchange, plansFile, refresh } from "./support.ts"

const FREE_AUTHORIZATIONS = 3
let app: TestApp
let redis: PrivateRedis | undefined
let redisUp = true

beforeAll(async () => {
  if (REDIS_SERVER) redis = await startPrivateRedis()
  app = await startTestApp({
    testClock: true,
    startTime: Date.UTC(2027, 0, 15),
    env: {
      ...(redis ? { REDIS_URL: redis.url } : {}),
      PLANS_FILE: plansFile({
        free: { name: "Free", limits: { authorizationsPerMonth: FREE_AUTHORIZATIONS, tokenExchangesPerMonth: 1000 }, monthlyFee: 0 },
        pro: { name: "Pro", limits: { authorizationsPerMonth: 3 }, monthlyFee: 10, overage: { authorizations: 2 } }
      }),
      RATE_LIMIT_SCALE: "1000",
      RATE_LIMIT_AUTHORIZE_PER_DEVELOPER: "100000"
    }
  })
})
afterAll(async () => {
  await app?.stop()
  await redis?.stop()
})

type Op =
  | { readonly t: "authorize" | "exchange" | "refresh"; readonly dev: 0 | 1 }
  | { readonly t: "tick"; readonly minutes: number }
  | { readonly t: "redis"; readonly up: boolean }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ t: fc.constant("authorize" as const), dev: fc.constantFrom(0 as const, 1 as const) }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant("exchange" as const), dev: fc.constantFrom(0 as const, 1 as const) }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant("refresh" as const), dev: fc.constantFrom(0 as const, 1 as const) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("tick" as const), minutes: fc.integer({ min: 1, max: 25 }) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("redis" as const), up: fc.boolean() }) }
)

const setRedis = async (up: boolean) => {
  if (redis === undefined || up === redisUp) return
  if (up) await redis.start()
  else {
    await redis.stop()
    stats.outages++
  }
  redisUp = up
  // requests wait until the client has reconnected, so a batch is not all refusals by accident
  if (up) for (let i = 0; i < 100 && (await app.request("GET", "/health")).status !== 200; i++) await Bun.sleep(20)
}

let run = 0
/** what the runs went through, printed at the end so a reader sees the faults were exercised */
const stats = { ok: 0, refusedByQuota: 0, unavailable: 0, outages: 0 }

test("invoice quantities equal the durable counts and the successes seen, across a month boundary with Redis outages", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(opArb, { minLength: 8, maxLength: 30 }), fc.integer({ min: 1, max: 4 }), fc.nat(), async (generated, width, at) => {
      // every run stops the store at least once, somewhere among its operations
      const ops = [...generated]
      ops.splice(at % (ops.length + 1), 0, { t: "redis", up: false })
      // run n uses months 2n and 2n+1 of 2027 (time only moves forward)
      const boundary = Date.UTC(2027, 2 * run + 1, 1)
      run++
      let clock = boundary - 30 * 60_000
      await app.setTime(clock)
      await setRedis(true)
      const devs = [await app.signup({ mode: "sandbox" }), await app.signup({ mode: "sandbox", plan: "pro" })]
      const agents = await Promise.all(devs.map((d) => createAgent(app, d.developerId)))
      const codes: Array<Array<string>> = [[], []]
      const refreshTokens: Array<Array<string>> = [[], []]
      // successes the clients saw, by developer and month
      const seen = new Map<string, { authorizations: number; token_exchanges: number }>()
      const note = (dev: number, meter: "authorizations" | "token_exchanges") => {
        const key = `${dev}:${periodOf(clock).label}`
        const entry = seen.get(key) ?? { authorizations: 0, token_exchanges: 0 }
        entry[meter]++
        seen.set(key, entry)
      }
      const tally = (status: number) => {
        if (status === 201) stats.ok++
        if (status === 402) stats.refusedByQuota++
        if (status === 503) stats.unavailable++
      }
      const perform = async (op: Op) => {
        if (op.t === "tick" || op.t === "redis") return
        const { apiKey } = devs[op.dev]!
        const agentId = agents[op.dev]!
        if (op.t === "authorize") {
          const res = await authorize(app, apiKey, agentId)
          tally(res.status)
          expect([201, 402, 503]).toContain(res.status)
          if (res.status === 201) {
            note(op.dev, "authorizations")
            codes[op.dev]!.push(res.body.code)
          }
        } else if (op.t === "exchange") {
          const code = codes[op.dev]!.pop()
          if (code === undefined) return
          const res = await exchange(app, apiKey, agentId, code)
          tally(res.status)
          // 400: the code outlived its ten minutes while the clock moved
          expect([201, 400, 402, 503]).toContain(res.status)
          if (res.status === 201) {
            note(op.dev, "token_exchanges")
            refreshTokens[op.dev]!.push(res.body.refreshToken)
          }
        } else {
          const token = refreshTokens[op.dev]!.pop()
          if (token === undefined) return
          const res = await refresh(app, apiKey, agentId, token)
          tally(res.status)
          expect([201, 503]).toContain(res.status)
          if (res.status === 201) {
            note(op.dev, "token_exchanges")
            refreshTokens[op.dev]!.push(res.body.refreshToken)
          }
        }
      }
      // consecutive requests run concurrently, `width` at a time; clock and Redis changes between them
      let batch: Array<Op> = []
      const flush = async () => {
        await Promise.all(batch.map(perform))
        batch = []
      }
      for (const op of ops) {
        if (op.t === "tick") {
          await flush()
          clock += op.minutes * 60_000
          await app.setTime(clock)
        } else if (op.t === "redis") {
          await flush()
          await setRedis(op.up)
        } else {
          batch.push(op)
          if (batch.length >= width) await flush()
        }
      }
      await flush()
      await setRedis(true)

      // close both months once they have ended
      clock = Date.UTC(2027, 2 * run, 1) + 1_000
      await app.setTime(clock)
      for (const month of [periodOf(boundary - 1), periodOf(boundary)]) {
        expect((await app.run(closePeriod(month.start))).status).toBe("closed")
        for (const [n, dev] of devs.entries()) {
          const [invoice] = await app.query<{ usage: any }>(
            "SELECT usage FROM invoices WHERE developer_id = $1 AND period_start = $2", [dev.developerId, month.start])
          const params = [dev.developerId, month.start, month.end]
          const durable = {
            authorizations: await count(app, "SELECT count(*) AS n FROM auth_requests WHERE developer_id = $1 AND created_at >= $2 AND created_at < $3", params),
            token_exchanges: await count(app, "SELECT count(*) AS n FROM grant_tokens WHERE developer_id = $1 AND issued_at >= $2 AND issued_at < $3", params)
          }
          const clients = seen.get(`${n}:${month.label}`) ?? { authorizations: 0, token_exchanges: 0 }
          expect({ authorizations: invoice!.usage.authorizations, token_exchanges: invoice!.usage.token_exchanges }).toEqual(durable)
          expect(durable).toEqual(clients)
          if (n === 0) expect(durable.authorizations).toBeLessThanOrEqual(FREE_AUTHORIZATIONS)
        }
      }
    }),
    { numRuns: Number(process.env.BILLING_PROPERTY_RUNS ?? 10), endOnFailure: true }
  )
  console.log("billing property:", JSON.stringify(stats))
  expect(stats.ok).toBeGreaterThan(0)
}, 600_000)
