/**
 * Editing, pausing and testing a webhook endpoint (decisions §7, revised; issue 36 item 3): PATCH
 * with the registration checks, held deliveries while disabled (kept 7 days on TestClock) sent
 * oldest first once enabled, and a signed test send verified by the standardwebhooks package.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { createHmac } from "node:crypto"
import { Webhook } from "standardwebhooks"
import { Events } from "../../src/platform/Events.ts"
import { HELD_TOO_LONG } from "../../src/webhooks/Pause.ts"
import { deliverDue } from "../../src/webhooks/Worker.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { type Received, startReceiver } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  // one send per endpoint at a time, so the order the receiver sees is the order of the claims
  app = await startTestApp({ testClock: true, env: { WEBHOOK_ENDPOINT_CONCURRENCY: "1" } })
})
afterAll(() => app.stop())

const register = (apiKey: string, url: string, events = ["grant.created"]) =>
  app.request("POST", "/v1/webhooks", { apiKey, body: { url, events } })
const patch = (apiKey: string, id: string, body: unknown) => app.request("PATCH", `/v1/webhooks/${id}`, { apiKey, body })
const emit = (developerId: string, grantId: string) =>
  app.run(Effect.flatMap(Events, (e) => e.emit(developerId, "grant.created", { grantId })))
const round = () => app.run(deliverDue)
const history = async (apiKey: string, id: string, status?: string) =>
  (await app.request("GET", `/v1/webhooks/${id}/deliveries${status === undefined ? "" : `?status=${status}`}`, { apiKey })).body.deliveries
const grantIds = (received: ReadonlyArray<Received>) => received.map((r) => JSON.parse(r.body).data.grantId)

describe("PATCH /v1/webhooks/:id", () => {
  test("changes url, events and enabled; answers the endpoint without its secret; the list shows the change", async () => {
    const d = await app.signup()
    const hook = (await register(d.apiKey, "https://hooks.example/a")).body
    const byUrl = await patch(d.apiKey, hook.id, { url: "https://hooks.example/b" })
    expect(byUrl.status).toBe(200)
    expect(byUrl.body).toEqual({ id: hook.id, url: "https://hooks.example/b", events: ["grant.created"], enabled: true, createdAt: hook.createdAt })
    const byEvents = await patch(d.apiKey, hook.id, { events: ["token.issued", "grant.revoked", "token.issued"] })
    expect(byEvents.body).toMatchObject({ url: "https://hooks.example/b", events: ["token.issued", "grant.revoked"], enabled: true })
    const paused = await patch(d.apiKey, hook.id, { enabled: false })
    expect(paused.body).toEqual({ id: hook.id, url: "https://hooks.example/b", events: ["token.issued", "grant.revoked"], enabled: false, createdAt: hook.createdAt })
    expect((await app.request("GET", "/v1/webhooks", { apiKey: d.apiKey })).body.webhooks).toEqual([paused.body])
    // the secret is unchanged: still the one sealed at registration
    const [row] = await app.query<{ enabled: boolean }>("SELECT enabled FROM webhook_endpoints WHERE id = $1", [hook.id])
    expect(row!.enabled).toBe(false)
  })

  test("the registration checks: unknown event types, empty events, a bad URL; an empty body or unknown field is 400; nothing changes", async () => {
    const d = await app.signup()
    const hook = (await register(d.apiKey, "https://hooks.example/a")).body
    const created = await register(d.apiKey, "https://hooks.example/a", ["grant.exploded"])
    const unknown = await patch(d.apiKey, hook.id, { events: ["grant.exploded"] })
    expect(unknown.status).toBe(400)
    expect(unknown.body).toMatchObject({ code: "BAD_REQUEST", message: created.body.message })
    expect(unknown.body.message).toContain(`Unknown event types: "grant.exploded"`)
    expect((await patch(d.apiKey, hook.id, { events: [] })).body).toMatchObject({ code: "BAD_REQUEST", message: "events must name at least one event type" })
    expect((await patch(d.apiKey, hook.id, { url: "ftp://hooks.example/a" })).body).toMatchObject({ code: "BAD_REQUEST", message: "url must be http or https" })
    expect((await patch(d.apiKey, hook.id, { url: "not a url" })).body).toMatchObject({ code: "BAD_REQUEST", message: "url is not a valid absolute URL" })
    const empty = await patch(d.apiKey, hook.id, {})
    expect(empty.status).toBe(400)
    expect(empty.body).toMatchObject({ code: "BAD_REQUEST", message: "Nothing to update: give url, events or enabled" })
    const extra = await patch(d.apiKey, hook.id, { enabled: false, secret: "whsec_mine" })
    expect(extra.status).toBe(400)
    expect(extra.body.code).toBe("BAD_REQUEST")
    expect((await patch(d.apiKey, hook.id, { enabled: "no" })).status).toBe(400)
    expect((await app.request("GET", "/v1/webhooks", { apiKey: d.apiKey })).body.webhooks).toEqual([
      { id: hook.id, url: "https://hooks.example/a", events: ["grant.created"], enabled: true, createdAt: hook.createdAt }
    ])
  })

  test("another developer's endpoint, an unknown id and a deleted endpoint are 404", async () => {
    const d = await app.signup()
    const other = await app.signup()
    const hook = (await register(d.apiKey, "https://hooks.example/a")).body
    for (const [apiKey, id] of [[other.apiKey, hook.id], [d.apiKey, "wh_nope"]] as const) {
      const res = await patch(apiKey, id, { enabled: false })
      expect(res.status).toBe(404)
      expect(res.body).toMatchObject({ code: "NOT_FOUND", message: "Webhook not found" })
      expect((await app.request("POST", `/v1/webhooks/${id}/test`, { apiKey, body: {} })).status).toBe(404)
    }
    expect((await app.request("GET", "/v1/webhooks", { apiKey: d.apiKey })).body.webhooks[0].enabled).toBe(true)
    await app.request("DELETE", `/v1/webhooks/${hook.id}`, { apiKey: d.apiKey })
    expect((await patch(d.apiKey, hook.id, { enabled: true })).status).toBe(404)
  })

  test("with private hosts not allowed, a loopback, private or plain-http URL is refused as on registration", async () => {
    const strict = await startTestApp({ env: { WEBHOOK_ALLOW_PRIVATE_HOSTS: "false" } })
    try {
      const d = await strict.signup()
      const hook = (await strict.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: "https://hooks.example/in", events: ["grant.created"] } })).body
      for (const [url, message] of [
        ["https://127.0.0.1/hook", "url must not point to a private or local address"],
        ["https://[::1]/hook", "url must not point to a private or local address"],
        ["https://10.0.0.5/hook", "url must not point to a private or local address"],
        ["https://localhost/hook", "url must not point to a local host"],
        ["http://hooks.example/in", "url must use https"]
      ]) {
        const created = await strict.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url, events: ["grant.created"] } })
        const res = await strict.request("PATCH", `/v1/webhooks/${hook.id}`, { apiKey: d.apiKey, body: { url } })
        expect([url, res.status, res.body.code, res.body.message]).toEqual([url, 400, "BAD_REQUEST", message])
        expect(created.body.message).toBe(message)
      }
      const [row] = await strict.query<{ url: string }>("SELECT url FROM webhook_endpoints WHERE id = $1", [hook.id])
      expect(row!.url).toBe("https://hooks.example/in")
    } finally {
      await strict.stop()
    }
  })
})

describe("held deliveries", () => {
  test("disabled: new deliveries are held and nothing is sent; enabled: sent oldest first, then the newer ones", async () => {
    const d = await app.signup()
    const receiver = startReceiver()
    try {
      const hook = (await register(d.apiKey, receiver.url)).body
      expect((await patch(d.apiKey, hook.id, { enabled: false })).status).toBe(200)
      for (const grantId of ["g1", "g2", "g3"]) {
        await emit(d.developerId, grantId)
        await app.adjust("1 second")
      }
      expect((await round()).claimed).toBe(0)
      await app.adjust("1 hour")
      expect((await round()).claimed).toBe(0)
      expect(receiver.received).toHaveLength(0)
      const held = await history(d.apiKey, hook.id, "held")
      expect(held.map((h: any) => [h.status, h.attempts, h.nextAttemptAt])).toEqual([["held", 0, null], ["held", 0, null], ["held", 0, null]])
      expect(await history(d.apiKey, hook.id, "pending")).toEqual([])
      expect((await patch(d.apiKey, hook.id, { enabled: true })).body.enabled).toBe(true)
      await emit(d.developerId, "g4")
      expect(await history(d.apiKey, hook.id, "held")).toEqual([])
      for (let n = 0; n < 4; n++) expect((await round()).delivered).toBe(1)
      expect(grantIds(receiver.received)).toEqual(["g1", "g2", "g3", "g4"])
      const all = await history(d.apiKey, hook.id)
      expect(all.map((h: any) => [h.status, h.attempts])).toEqual([["delivered", 1], ["delivered", 1], ["delivered", 1], ["delivered", 1]])
    } finally {
      receiver.stop()
    }
  })

  test("disabling holds a delivery waiting for its retry; enabling sends it with its attempts counted and the usual backoff", async () => {
    const d = await app.signup()
    let answer = 500
    const receiver = startReceiver(() => answer)
    try {
      const hook = (await register(d.apiKey, receiver.url)).body
      await emit(d.developerId, "r1")
      await round()
      expect((await history(d.apiKey, hook.id))[0]).toMatchObject({ status: "pending", attempts: 1 })
      await patch(d.apiKey, hook.id, { enabled: false })
      expect((await history(d.apiKey, hook.id))[0]).toMatchObject({ status: "held", attempts: 1, nextAttemptAt: null })
      await app.adjust("10 minutes")
      await round()
      expect(receiver.received).toHaveLength(1)
      await patch(d.apiKey, hook.id, { enabled: true })
      await round()
      expect(receiver.received).toHaveLength(2)
      const [after] = await history(d.apiKey, hook.id)
      // the second failure waits 60 s, as it would have without the pause
      expect(after).toMatchObject({ status: "pending", attempts: 2, lastResponseStatus: 500 })
      const now = await app.now()
      expect(Date.parse(after.nextAttemptAt) - now).toBe(60_000)
      answer = 200
      await app.adjust("60 seconds")
      expect((await round()).delivered).toBe(1)
    } finally {
      receiver.stop()
    }
  })

  test("a delivery held longer than 7 days is not sent: failed with the reason; a younger one is sent", async () => {
    const d = await app.signup()
    const receiver = startReceiver()
    try {
      const hook = (await register(d.apiKey, receiver.url)).body
      await patch(d.apiKey, hook.id, { enabled: false })
      await emit(d.developerId, "old")
      await app.adjust("6 days")
      await emit(d.developerId, "young")
      await app.adjust("1 day")
      await app.adjust("1 second")
      // expired as the endpoint is enabled, before anything is released
      await patch(d.apiKey, hook.id, { enabled: true })
      for (let n = 0; n < 3; n++) await round()
      expect(grantIds(receiver.received)).toEqual(["young"])
      const [young, old] = await history(d.apiKey, hook.id)
      expect(young).toMatchObject({ status: "delivered", attempts: 1 })
      expect(old).toMatchObject({ status: "failed", attempts: 0, lastError: HELD_TOO_LONG, nextAttemptAt: null })
      // still the developer's to send: retry re-queues it
      expect((await app.request("POST", `/v1/webhooks/${hook.id}/deliveries/${old.id}/retry`, { apiKey: d.apiKey })).status).toBe(200)
      await round()
      expect(grantIds(receiver.received)).toEqual(["young", "old"])
    } finally {
      receiver.stop()
    }
  })

  test("the history shows a held delivery past its 7 days as failed while the endpoint stays disabled; deleting fails the held ones", async () => {
    const d = await app.signup()
    const hook = (await register(d.apiKey, "http://127.0.0.1:9/hook")).body
    await patch(d.apiKey, hook.id, { enabled: false })
    await emit(d.developerId, "a")
    await app.adjust("7 days")
    await emit(d.developerId, "b")
    await app.adjust("1 second")
    expect((await history(d.apiKey, hook.id)).map((h: any) => [h.status, h.lastError])).toEqual([["held", null], ["failed", HELD_TOO_LONG]])
    await app.request("DELETE", `/v1/webhooks/${hook.id}`, { apiKey: d.apiKey })
    const rows = await app.query<{ status: string; lastError: string }>(
      "SELECT status, last_error FROM webhook_deliveries WHERE endpoint_id = $1 ORDER BY created_at DESC", [hook.id])
    expect(rows).toEqual([{ status: "failed", lastError: "endpoint deleted" }, { status: "failed", lastError: HELD_TOO_LONG }])
  })
  test("a delivery retried while the endpoint is disabled waits as pending and is sent only once it is enabled", async () => {
    const d = await app.signup()
    const receiver = startReceiver()
    try {
      const hook = (await register(d.apiKey, receiver.url)).body
      await patch(d.apiKey, hook.id, { enabled: false })
      await emit(d.developerId, "late")
      await app.adjust("7 days")
      await app.adjust("1 second")
      const [expired] = await history(d.apiKey, hook.id, "failed")
      const retried = await app.request("POST", `/v1/webhooks/${hook.id}/deliveries/${expired.id}/retry`, { apiKey: d.apiKey })
      expect(retried.body.status).toBe("pending")
      expect((await round()).claimed).toBe(0)
      expect(receiver.received).toHaveLength(0)
      await patch(d.apiKey, hook.id, { enabled: true })
      expect((await round()).delivered).toBe(1)
      expect(grantIds(receiver.received)).toEqual(["late"])
    } finally {
      receiver.stop()
    }
  })
})

describe("POST /v1/webhooks/:id/test", () => {
  /** the standardwebhooks package checks the timestamp against Date.now(): hold it at the signing time */
  const standardVerify = (secret: string, r: Received) => {
    const real = Date.now
    Date.now = () => Number(r.headers.get("webhook-timestamp")) * 1000
    try {
      return new Webhook(secret).verify(r.body, Object.fromEntries(r.headers.entries()))
    } finally {
      Date.now = real
    }
  }

  test("sends a signed sample of the first subscribed type now; both signatures verify; nothing is recorded", async () => {
    const d = await app.signup()
    const receiver = startReceiver()
    try {
      const hook = (await register(d.apiKey, receiver.url, ["token.issued", "grant.created"])).body
      const res = await app.request("POST", `/v1/webhooks/${hook.id}/test`, { apiKey: d.apiKey, body: {} })
      expect(res.status).toBe(200)
      expect(res.body).toEqual({ eventId: expect.stringMatching(/^evt_/), eventType: "token.issued", ok: true, responseStatus: 200, error: null })
      expect(receiver.received).toHaveLength(1)
      const got = receiver.received[0]!
      const envelope = standardVerify(hook.secret, got) as any
      expect(envelope).toEqual({ id: res.body.eventId, type: "token.issued", createdAt: new Date(await app.now()).toISOString(), data: expect.any(Object) })
      expect(Object.keys(envelope.data).sort()).toEqual(["agentId", "expiresAt", "grantId", "principalId", "scopes", "tokenId"])
      expect(got.headers.get("webhook-id")).toBe(res.body.eventId)
      expect(got.headers.get("x-service-signature")).toBe(`sha256=${createHmac("sha256", hook.secret).update(got.raw).digest("hex")}`)
      expect(got.headers.get("user-agent")).toBe("Service-Webhooks/0.1")
      // a sample is not an event: no history, no event row, nothing for the worker
      expect(await history(d.apiKey, hook.id)).toEqual([])
      expect(await app.query("SELECT id FROM events WHERE developer_id = $1", [d.developerId])).toEqual([])
      expect((await round()).claimed).toBe(0)
    } finally {
      receiver.stop()
    }
  })

  test("a chosen event type; an unknown one is 400; a failing receiver is ok: false; a disabled endpoint is still sent to", async () => {
    const d = await app.signup()
    let answer = 200
    const receiver = startReceiver(() => answer)
    try {
      const hook = (await register(d.apiKey, receiver.url)).body
      const chosen = await app.request("POST", `/v1/webhooks/${hook.id}/test`, { apiKey: d.apiKey, body: { eventType: "budget.exhausted" } })
      expect(chosen.body).toMatchObject({ eventType: "budget.exhausted", ok: true, responseStatus: 200 })
      expect(JSON.parse(receiver.received[0]!.body)).toMatchObject({ type: "budget.exhausted", data: { grantId: "grnt_sample" } })
      const unknown = await app.request("POST", `/v1/webhooks/${hook.id}/test`, { apiKey: d.apiKey, body: { eventType: "grant.exploded" } })
      expect(unknown.status).toBe(400)
      expect(unknown.body.code).toBe("BAD_REQUEST")
      expect(unknown.body.message).toContain(`Unknown event types: "grant.exploded"`)
      expect((await app.request("POST", `/v1/webhooks/${hook.id}/test`, { apiKey: d.apiKey, body: { eventType: "grant.created", extra: 1 } })).status).toBe(400)
      expect(receiver.received).toHaveLength(1)
      answer = 503
      const failing = await app.request("POST", `/v1/webhooks/${hook.id}/test`, { apiKey: d.apiKey, body: {} })
      expect(failing.status).toBe(200)
      expect(failing.body).toMatchObject({ eventType: "grant.created", ok: false, responseStatus: 503, error: "receiver answered 503" })
      answer = 200
      await patch(d.apiKey, hook.id, { enabled: false })
      const paused = await app.request("POST", `/v1/webhooks/${hook.id}/test`, { apiKey: d.apiKey, body: {} })
      expect(paused.body).toMatchObject({ ok: true, responseStatus: 200 })
      expect(receiver.received).toHaveLength(3)
      const unreachable = (await register(d.apiKey, "http://127.0.0.1:9/hook")).body
      const refused = await app.request("POST", `/v1/webhooks/${unreachable.id}/test`, { apiKey: d.apiKey, body: {} })
      expect(refused.body).toMatchObject({ ok: false, responseStatus: null, error: expect.any(String) })
    } finally {
      receiver.stop()
    }
  })
})
