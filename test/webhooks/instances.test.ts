/**
 * Several delivery fibers on one database deliver each event exactly once; an event committed by
 * an instance that then dies is delivered by the next one.
 */
import { expect, test } from "bun:test"
import { Effect } from "effect"
import { Events } from "../../src/platform/Events.ts"
import { startTestApp, usingRealPostgres } from "../support/app.ts"
import { startReceiver } from "./support.ts"

const waitFor = async (predicate: () => boolean, ms = 20_000) => {
  const until = Date.now() + ms
  while (!predicate() && Date.now() < until) await Bun.sleep(25)
  return predicate()
}

test.skipIf(!usingRealPostgres)("two instances with running fibers deliver 200 events exactly once each", async () => {
  const receiver = startReceiver()
  const env = { WEBHOOK_POLL_INTERVAL_SECONDS: "1" }
  const one = await startTestApp({ workers: true, env })
  const two = await startTestApp({ workers: true, env, databaseUrl: one.databaseUrl })
  try {
    const d = await one.signup()
    await one.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: receiver.url, events: ["grant.created"] } })
    await Promise.all(Array.from({ length: 200 }, (_, i) =>
      (i % 2 ? one : two).run(Effect.flatMap(Events, (e) => e.emit(d.developerId, "grant.created", { n: i })))))
    expect(await waitFor(() => receiver.received.length >= 200)).toBe(true)
    await Bun.sleep(1500) // a duplicate would arrive in this window
    const ids = receiver.received.map((r) => JSON.parse(r.body).id)
    expect(ids).toHaveLength(200)
    expect(new Set(ids).size).toBe(200)
    const [{ n }] = await one.query<{ n: number }>("SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'delivered' AND attempts = 1") as any
    expect(n).toBe(200)
  } finally {
    await two.stop()
    await one.stop()
    receiver.stop()
  }
}, 120_000)

test.skipIf(!usingRealPostgres)("an event committed just before the instance stops is delivered after restart", async () => {
  const receiver = startReceiver()
  const first = await startTestApp({ workers: false })
  const d = await first.signup()
  await first.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: receiver.url, events: ["grant.created"] } })
  const event = await first.run(Effect.flatMap(Events, (e) => e.emit(d.developerId, "grant.created", { n: 1 })))
  // the instance goes away before any delivery attempt (its fibers were off)
  await first.server.stop()
  const second = await startTestApp({ workers: true, databaseUrl: first.databaseUrl, env: { WEBHOOK_POLL_INTERVAL_SECONDS: "1" } })
  try {
    expect(await waitFor(() => receiver.received.length >= 1)).toBe(true)
    expect(JSON.parse(receiver.received[0]!.body).id).toBe(event.id)
  } finally {
    await second.stop()
    receiver.stop()
  }
}, 120_000)

test("the first attempt follows the commit at once, without waiting for the 30 s poll", async () => {
  const receiver = startReceiver()
  const app = await startTestApp({ workers: true, env: { WEBHOOK_POLL_INTERVAL_SECONDS: "30" } })
  try {
    const d = await app.signup()
    await app.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: receiver.url, events: ["grant.created"] } })
    await Bun.sleep(300) // the worker's first round (at start) is over; it now waits for a wake-up or the poll
    const event = await app.run(Effect.flatMap(Events, (e) => e.emit(d.developerId, "grant.created", { n: 1 })))
    expect(await waitFor(() => receiver.received.length >= 1, 5_000)).toBe(true)
    expect(JSON.parse(receiver.received[0]!.body).id).toBe(event.id)
  } finally {
    await app.stop()
    receiver.stop()
  }
}, 120_000)

test.skipIf(!usingRealPostgres)("a notification committed by any connection (LISTEN/NOTIFY, not the in-process nudge) wakes the worker", async () => {
  const receiver = startReceiver()
  const app = await startTestApp({ workers: true, env: { WEBHOOK_POLL_INTERVAL_SECONDS: "30" } })
  try {
    const d = await app.signup()
    const hook = (await app.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: receiver.url, events: ["grant.created"] } })).body
    await Bun.sleep(500)
    // rows and notification written as another process would, over a plain connection
    await app.query(
      `WITH ev AS (INSERT INTO events (id, developer_id, type, data, created_at) VALUES ('evt_listen_1', $1, 'grant.created', '{}'::jsonb, now()) RETURNING id)
       INSERT INTO webhook_deliveries (id, endpoint_id, event_id, developer_id, status, attempts, max_attempts, next_attempt_at, created_at, updated_at)
       SELECT 'whd_listen_1', $2, ev.id, $1, 'pending', 0, 5, now() - interval '1 second', now(), now() FROM ev`,
      [d.developerId, hook.id]
    )
    await app.query("SELECT pg_notify('webhook_deliveries', $1)", [d.developerId])
    expect(await waitFor(() => receiver.received.length >= 1, 5_000)).toBe(true)
    expect(JSON.parse(receiver.received[0]!.body).id).toBe("evt_listen_1")
  } finally {
    await app.stop()
    receiver.stop()
  }
}, 120_000)
