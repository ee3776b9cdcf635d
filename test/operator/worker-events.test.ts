/**
 * The events an operator must see from the scheduled work and the device sync (issue 18): a webhook
 * delivery given up on, a breach deadline alert, offline entries accepted and rejected, each logged
 * and counted; the scrape-time gauges (oldest pending delivery, breaches open and overdue) follow.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { Effect } from "effect"
import { alertDeadlines } from "../../src/breaches/Worker.ts"
import { OfflineAgent, type ConsentBundle } from "../../src/offline/index.ts"
import { Events } from "../../src/platform/Events.ts"
import { deliverDue } from "../../src/webhooks/Worker.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { startReceiver } from "../webhooks/support.ts"

let app: TestApp
const lines: Array<any> = []
const originalLog = console.log
beforeAll(async () => {
  console.log = (...args: Array<unknown>) => {
    for (const arg of args) {
      try {
        lines.push(JSON.parse(String(arg)))
      } catch {
        // not a log line
      }
    }
  }
  app = await startTestApp({
    testClock: true,
    env: { LOG_LEVEL: "info", WEBHOOK_MAX_ATTEMPTS: "2", WEBHOOK_RETRY_BASE_SECONDS: "1", DPDP_BREACH_DEADLINE_ALERTS_ENABLED: "true", RATE_LIMIT_SCALE: "100" }
  })
})
afterAll(async () => {
  await app.stop()
  console.log = originalLog
})

const scrape = async () => (await app.request("GET", "/metrics")).text
const value = (text: string, series: string) => {
  const line = text.split("\n").find((l) => l.startsWith(series + " "))
  return line === undefined ? 0 : Number(line.slice(series.length + 1))
}

test("a delivery that fails for good: a warning naming it, counted by outcome; the oldest pending age is a gauge", async () => {
  const d = await app.signup()
  const failing = startReceiver(() => 500)
  const fine = startReceiver()
  try {
    const bad = (await app.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: failing.url, events: ["grant.created"] } })).body
    await app.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: fine.url, events: ["grant.created"] } })
    await app.run(Effect.flatMap(Events, (e) => e.emit(d.developerId, "grant.created", { grantId: "g" })))
    await app.adjust("90 seconds")
    expect(value(await scrape(), "agent_auth_webhook_oldest_pending_delivery_age_seconds")).toBe(90)
    expect(await app.run(deliverDue)).toMatchObject({ claimed: 2, delivered: 1, failedAttempts: 1 })
    await app.adjust("2 seconds")
    expect(await app.run(deliverDue)).toMatchObject({ claimed: 1, failedAttempts: 1 })
    const text = await scrape()
    expect(value(text, 'agent_auth_webhook_deliveries_total{outcome="delivered"}')).toBe(1)
    expect(value(text, 'agent_auth_webhook_deliveries_total{outcome="retrying"}')).toBe(1)
    expect(value(text, 'agent_auth_webhook_deliveries_total{outcome="failed"}')).toBe(1)
    expect(value(text, "agent_auth_webhook_oldest_pending_delivery_age_seconds")).toBe(0)
    const [row] = await app.query<{ id: string }>("SELECT id FROM webhook_deliveries WHERE endpoint_id = $1", [bad.id])
    const warned = lines.filter((l) => l.message === "webhook delivery failed for good")
    expect(warned).toEqual([expect.objectContaining({
      level: "warn", deliveryId: row!.id, endpointId: bad.id, developerId: d.developerId, attempts: 2, lastStatus: 500, lastError: "receiver answered 500"
    })])
    // the endpoint's secret is never in the line
    expect(JSON.stringify(warned)).not.toContain(bad.secret)
  } finally {
    failing.stop()
    fine.stop()
  }
})

test("a breach past its due time: open and overdue gauges; the alert is logged and counted", async () => {
  const { apiKey } = await app.signup()
  const before = await scrape()
  const now = Number(await app.run(Effect.flatMap(Effect.clock, (c) => c.currentTimeMillis)))
  const awareAt = new Date(now - 100 * 3600_000).toISOString()
  const id = (await app.request("POST", "/v1/dpdp/breaches", { apiKey, body: { description: "d", nature: "n", extent: "e", affectedCount: 1, awareAt } })).body.breachId
  await app.request("POST", "/v1/dpdp/breaches", { apiKey, body: { description: "d", nature: "n", extent: "e", affectedCount: 1 } })
  const during = await scrape()
  expect(value(during, "agent_auth_breaches_open") - value(before, "agent_auth_breaches_open")).toBe(2)
  expect(value(during, "agent_auth_breaches_overdue") - value(before, "agent_auth_breaches_overdue")).toBe(1)
  await app.run(alertDeadlines)
  expect(lines.filter((l) => l.message === "breach deadline alert sent" && l.breachId === id)).toEqual([
    expect.objectContaining({ level: "info", stage: "overdue", dueAt: new Date(Date.parse(awareAt) + 72 * 3600_000).toISOString() })
  ])
  expect(value(await scrape(), 'agent_auth_breach_alerts_sent_total{stage="overdue"}')).toBe(1)
})

test("offline entries: accepted and rejected by code", async () => {
  const dev = await app.signup({ plan: "enterprise" })
  const agentId = await createAgent(app, dev.developerId, ["email:read"])
  const bundle: ConsentBundle = (await app.request("POST", "/v1/consent-bundles", { apiKey: dev.apiKey, body: { agentId, userId: "user_1", scopes: ["email:read"] } })).body
  // the device reads the service's clock: the bundle was made on the test's fixed date, not today's
  const at = await app.now()
  const agent = await OfflineAgent.load(bundle, { now: () => at })
  for (let i = 0; i < 3; i++) agent.record("email.read", "success")
  const entries = agent.batches(1000)[0]!
  const tampered = [...entries.slice(0, 2), { ...entries[2]!, signature: "00".repeat(64) }]
  const res = await app.request("POST", "/v1/audit/offline-sync", { apiKey: dev.apiKey, body: { bundleId: bundle.bundleId, entries: tampered } })
  expect([res.body.accepted, res.body.rejected]).toEqual([2, 1])
  const text = await scrape()
  expect(value(text, 'agent_auth_offline_entries_total{result="accepted"}')).toBe(2)
  expect(value(text, `agent_auth_offline_entries_total{result="rejected",code="${res.body.errors[0].code}"}`)).toBe(1)
})
