/** The delivery round's claims: a crashed instance's lease runs out and the row comes back; deletion mid-send wins. */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { Effect } from "effect"
import { Events } from "../../src/platform/Events.ts"
import { deliverDue } from "../../src/webhooks/Worker.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { startReceiver } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
})
afterAll(() => app.stop())

const nowMs = async () => Number(await app.run(Effect.flatMap(Effect.clock, (c) => c.currentTimeMillis)))

test("a row claimed by an instance that died is sent once its lease has run out, not before", async () => {
  const d = await app.signup()
  const receiver = startReceiver()
  try {
    const hook = (await app.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: receiver.url, events: ["grant.created"] } })).body
    await app.run(Effect.flatMap(Events, (e) => e.emit(d.developerId, "grant.created", { grantId: "g" })))
    // another instance claimed it (lease of the default 10 s timeout + margin) and died
    const leaseUntil = new Date((await nowMs()) + 15_000)
    await app.query("UPDATE webhook_deliveries SET lease_until = $1 WHERE endpoint_id = $2", [leaseUntil, hook.id])
    expect((await app.run(deliverDue)).claimed).toBe(0)
    await app.adjust("15 seconds")
    expect((await app.run(deliverDue)).claimed).toBe(0)
    await app.adjust("1 second")
    expect(await app.run(deliverDue)).toEqual({ claimed: 1, delivered: 1, failedAttempts: 0 })
    expect(receiver.received).toHaveLength(1)
    const [row] = await app.query<any>("SELECT status, attempts, lease_until FROM webhook_deliveries WHERE endpoint_id = $1", [hook.id])
    expect(row).toEqual({ status: "delivered", attempts: 1, leaseUntil: null })
  } finally {
    receiver.stop()
  }
})

test("an endpoint deleted while a send is in flight stays deleted: the failed send does not re-queue it", async () => {
  const d = await app.signup()
  let hookId = ""
  const receiver = startReceiver()
  const deleting = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async () => {
      await app.request("DELETE", `/v1/webhooks/${hookId}`, { apiKey: d.apiKey })
      return new Response("no", { status: 500 })
    }
  })
  try {
    hookId = (await app.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: `http://127.0.0.1:${deleting.port}/hook`, events: ["grant.created"] } })).body.id
    await app.run(Effect.flatMap(Events, (e) => e.emit(d.developerId, "grant.created", { grantId: "g" })))
    expect((await app.run(deliverDue)).failedAttempts).toBe(1)
    const [row] = await app.query<any>("SELECT status, attempts, last_error FROM webhook_deliveries WHERE endpoint_id = $1", [hookId])
    expect(row).toEqual({ status: "failed", attempts: 0, lastError: "endpoint deleted" })
    await app.adjust("1 hour")
    expect((await app.run(deliverDue)).claimed).toBe(0)
  } finally {
    deleting.stop(true)
    receiver.stop()
  }
})
