/**
 * GET /v1/billing/entitlements (decisions §16): `usage` lists every meter of the period by its
 * meter name, with the plan limit that bounds it (null when none), next to each capped limit.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { Effect } from "effect"
import { LiveCounts } from "../../src/billing/LiveCounts.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { authorize, exchange, freeWith, plansFile } from "./support.ts"

let app: TestApp
const START = Date.parse("2026-11-20T10:00:00.000Z")

beforeAll(async () => {
  app = await startTestApp({
    testClock: true,
    startTime: START,
    env: { PLANS_FILE: plansFile(freeWith({ agents: 4, activeGrants: 10, authorizationsPerMonth: 50, tokenExchangesPerMonth: 40 })) }
  })
})
afterAll(async () => {
  await app?.stop()
})

test("usage lists every meter of the period, counted from what is stored, with the limit that bounds it", async () => {
  const { apiKey, developerId } = await app.signup({ mode: "sandbox" })
  const agentId = await createAgent(app, developerId)
  const codes = [await authorize(app, apiKey, agentId), await authorize(app, apiKey, agentId)]
  expect(codes.map((r) => r.status)).toEqual([201, 201])
  expect((await exchange(app, apiKey, agentId, codes[0]!.body.code)).status).toBe(201)
  // a vault exchange as the vault records it
  await app.query("INSERT INTO events (id, developer_id, type, data, created_at) VALUES ('evt_billing_test_1', $1, 'vault.credential.exchanged', '{}'::jsonb, $2)",
    [developerId, new Date(START)])
  const res = await app.request("GET", "/v1/billing/entitlements", { apiKey })
  expect(res.status).toBe(200)
  // sandbox authorizations are approved at once: two grants
  expect(res.body.usage).toEqual({
    authorizations: { used: 2, limit: 50, pct: 4 },
    token_exchanges: { used: 1, limit: 40, pct: 2.5 },
    vault_exchanges: { used: 1, limit: null, pct: null },
    offline_entries: { used: 0, limit: null, pct: null },
    active_agents: { used: 1, limit: 4, pct: 25 },
    active_grants: { used: 2, limit: 10, pct: 20 },
    verifications: { used: 0, limit: null, pct: null, estimated: true },
    // the capped limits, by their limit names, as before
    agents: { used: 1, limit: 4, pct: 25 },
    webhooks: { used: 0, limit: null, pct: null },
    activeGrants: { used: 2, limit: 10, pct: 20 },
    policies: { used: 0, limit: null, pct: null },
    ssoConnections: { used: 0, limit: null, pct: null },
    authorizationsPerMonth: { used: 2, limit: 50, pct: 4 },
    tokenExchangesPerMonth: { used: 1, limit: 40, pct: 2.5 },
    resourceServers: { used: 0, limit: null, pct: null },
    oauthClients: { used: 0, limit: null, pct: null }
  })
  expect([res.body.periodStart, res.body.periodEnd]).toEqual(["2026-11-01T00:00:00.000Z", "2026-12-01T00:00:00.000Z"])
})

test("verifications (decisions §16, the published usage shape): every token check counted live, by day, an estimate that survives a flush", async () => {
  const { apiKey, developerId } = await app.signup({ mode: "sandbox" })
  const agentId = await createAgent(app, developerId)
  const code = (await authorize(app, apiKey, agentId)).body.code
  const token = (await exchange(app, apiKey, agentId, code)).body.grantToken
  const verify = (t: string) => app.request("POST", "/v1/tokens/verify", { apiKey, body: { token: t } })
  expect((await verify(token)).body.valid).toBe(true)
  expect((await verify(token)).body.valid).toBe(true)
  expect((await verify("not-a-token")).body.valid).toBe(false) // a check that fails is a check
  // counted before the flush (this instance adds what it has not written yet), and after it
  const today = (await app.request("GET", "/v1/usage", { apiKey })).body
  expect(today).toMatchObject({ verifications: 3, tokenExchanges: 1, authorizations: 1, totalRequests: 5 })
  await app.run(Effect.flatMap(LiveCounts, (c) => c.flush))
  expect(await app.query("SELECT n::int AS n, to_char(day, 'YYYY-MM-DD') AS day FROM live_meter_counts WHERE developer_id = $1", [developerId]))
    .toEqual([{ n: 3, day: "2026-11-20" }])
  await app.adjust("1 day")
  expect((await verify(token)).body.valid).toBe(false) // the token has expired by now: still a check
  const history = (await app.request("GET", "/v1/usage/history?days=2", { apiKey })).body.entries
  expect(history.map((e: any) => [e.date, e.verifications])).toEqual([["2026-11-21", 1], ["2026-11-20", 3]])
  expect((await app.request("GET", "/v1/billing/entitlements", { apiKey })).body.usage.verifications).toEqual({ used: 4, limit: null, pct: null, estimated: true })
  expect((await app.request("GET", "/v1/usage/summary", { apiKey })).body.meters.verifications).toBe(4)
})
