/**
 * The running delivery fiber (not a round driven by the test) sends an alert to a channel right
 * after the emitting commit, and its retry when the TestClock reaches the backoff.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { startReceiver } from "../webhooks/support.ts"
import { addChannel, alertData, emitAlert } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({
    testClock: true,
    workers: true,
    // the webhook poll at its default (the retry below waits for it); the other fibers out of the way
    env: { WEBHOOK_POLL_INTERVAL_SECONDS: "30", COMPLIANCE_JOB_POLL_SECONDS: "3600", DPDP_BREACH_ALERT_INTERVAL_SECONDS: "3600" }
  })
})
afterAll(() => app.stop())

/** waits (real time) for the fiber to have done something; fails the test if it does not */
const waitFor = async (predicate: () => boolean | Promise<boolean>, ms = 5_000) => {
  const until = performance.now() + ms
  while (!(await predicate()) && performance.now() < until) await Bun.sleep(10)
  return predicate()
}

test("the fiber delivers an alert after its commit and retries a failed send when the backoff has passed", async () => {
  const d = await app.signup()
  const receiver = startReceiver((n) => (n === 1 ? 500 : 204))
  try {
    const channel = (await addChannel(app, d.apiKey, { type: "slack", url: receiver.url })).body
    const data = alertData({ severity: "critical" })
    await emitAlert(app, d.developerId, data)
    expect(await waitFor(() => receiver.received.length === 1)).toBe(true)
    const history = async () => (await app.request("GET", `/v1/anomaly/channels/${channel.id}/deliveries`, { apiKey: d.apiKey })).body.deliveries[0]
    expect(await waitFor(async () => (await history())?.attempts === 1)).toBe(true)
    // let the fiber settle into its poll sleep before moving the clock
    await Bun.sleep(200)
    await app.adjust("29 seconds")
    await Bun.sleep(300)
    expect(receiver.received).toHaveLength(1)
    await app.adjust("1 second")
    expect(await waitFor(() => receiver.received.length === 2)).toBe(true)
    expect(await waitFor(async () => (await history()).status === "delivered")).toBe(true)
    expect(await history()).toMatchObject({ status: "delivered", attempts: 2, lastResponseStatus: 204 })
    expect(JSON.parse(receiver.received[1]!.body).text).toContain(data.alertId)
  } finally {
    receiver.stop()
  }
}, 120_000)
