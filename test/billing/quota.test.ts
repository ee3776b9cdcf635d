/**
 * Free-plan monthly quotas (decisions §16): authorize and code exchange stop at exactly 100 % with
 * 402 QUOTA_EXCEEDED, refresh never does, the thresholds are announced once per period, and a new
 * month starts afresh. Plans come from PLANS_FILE so the figures are small.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { authorize, count, exchange, freeWith, plansFile, refresh } from "./support.ts"

let app: TestApp
const START = Date.parse("2026-11-29T10:00:00.000Z")

beforeAll(async () => {
  app = await startTestApp({
    testClock: true,
    startTime: START,
    env: {
      PLANS_FILE: plansFile(freeWith({ authorizationsPerMonth: 5, tokenExchangesPerMonth: 3 })),
      RATE_LIMIT_SCALE: "1000",
      RATE_LIMIT_AUTHORIZE_PER_DEVELOPER: "100000"
    }
  })
})
afterAll(async () => {
  await app?.stop()
})

const thresholds = (developerId: string) =>
  app.query<{ data: any }>("SELECT data FROM events WHERE developer_id = $1 AND type = 'billing.quota.threshold' ORDER BY data->>'meter', (data->>'pct')::int", [developerId])

test("authorize: the 5th of 5 passes, the 6th is 402 QUOTA_EXCEEDED; 80 % and 100 % announced once", async () => {
  const { apiKey, developerId } = await app.signup({ mode: "sandbox" })
  const agentId = await createAgent(app, developerId)
  for (let i = 0; i < 5; i++) expect((await authorize(app, apiKey, agentId)).status).toBe(201)
  const refused = await authorize(app, apiKey, agentId)
  expect(refused.status).toBe(402)
  expect(refused.body).toEqual({ code: "QUOTA_EXCEEDED", message: expect.stringContaining("2026-11"), requestId: refused.headers.get("x-request-id") })
  expect((await authorize(app, apiKey, agentId)).status).toBe(402)
  // nothing was written for the refused requests
  expect(await count(app, "SELECT count(*) AS n FROM auth_requests WHERE developer_id = $1", [developerId])).toBe(5)
  expect((await thresholds(developerId)).map((r) => r.data)).toEqual([
    { meter: "authorizations", pct: 80, period: "2026-11" },
    { meter: "authorizations", pct: 100, period: "2026-11" }
  ])
  // the entitlements say so too
  const ent = await app.request("GET", "/v1/billing/entitlements", { apiKey })
  expect([ent.status, ent.text]).toEqual([200, expect.any(String)])
  expect(ent.body.usage.authorizationsPerMonth).toEqual({ used: 5, limit: 5, pct: 100 })
  expect(ent.body.periodEnd).toBe("2026-12-01T00:00:00.000Z")

  // a new month: the quota starts again, and the thresholds can be announced again for it
  await app.setTime(Date.parse("2026-12-01T00:00:01.000Z"))
  expect((await authorize(app, apiKey, agentId)).status).toBe(201)
  expect(await count(app, "SELECT count(*) AS n FROM billing_thresholds WHERE developer_id = $1", [developerId])).toBe(2)
  await app.setTime(START)
})

test("code exchange stops at 100 %; refresh is never blocked", async () => {
  const { apiKey, developerId } = await app.signup({ mode: "sandbox" })
  const agentId = await createAgent(app, developerId)
  const codes: Array<string> = []
  for (let i = 0; i < 4; i++) codes.push((await authorize(app, apiKey, agentId)).body.code)
  let refreshToken = ""
  for (let i = 0; i < 3; i++) {
    const res = await exchange(app, apiKey, agentId, codes[i]!)
    expect(res.status).toBe(201)
    refreshToken = res.body.refreshToken
  }
  const refused = await exchange(app, apiKey, agentId, codes[3]!)
  expect([refused.status, refused.body.code]).toEqual([402, "QUOTA_EXCEEDED"])
  // the refused code was not spent
  expect(await count(app, "SELECT count(*) AS n FROM auth_codes WHERE developer_id = $1 AND used_at IS NULL", [developerId])).toBe(1)
  // refresh goes on past the quota (a running agent must not break mid-grant) and is metered
  for (let i = 0; i < 3; i++) {
    const res = await refresh(app, apiKey, agentId, refreshToken)
    expect(res.status).toBe(201)
    refreshToken = res.body.refreshToken
  }
  expect(await count(app, "SELECT count(*) AS n FROM grant_tokens WHERE developer_id = $1", [developerId])).toBe(6)
  const summary = await app.request("GET", "/v1/usage/summary?period=2026-11", { apiKey })
  expect(summary.body.meters).toMatchObject({ authorizations: 4, token_exchanges: 6 })
})

test("a paid plan is never blocked: past its quota it is billed overage", async () => {
  const { apiKey, developerId } = await app.signup({ mode: "sandbox", plan: "pro" })
  const agentId = await createAgent(app, developerId)
  for (let i = 0; i < 3; i++) expect((await authorize(app, apiKey, agentId)).status).toBe(201)
})
