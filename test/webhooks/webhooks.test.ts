/** Webhooks: registration, delivery with exact backoff on TestClock, signatures, retry, isolation, SSRF. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { Events } from "../../src/platform/Events.ts"
import { isPublicAddress, checkReceiverUrl } from "../../src/platform/Outbound.ts"
import { verifyWebhook } from "../../src/webhooks/verify.ts"
import { deliverDue } from "../../src/webhooks/Worker.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { startReceiver } from "./support.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
  dev = await app.signup({ plan: "enterprise" })
})
afterAll(() => app.stop())

const register = (url: string, events = ["grant.created"], apiKey = dev.apiKey) =>
  app.request("POST", "/v1/webhooks", { apiKey, body: { url, events } })
const emit = (developerId: string, data: Record<string, unknown> = { grantId: "grnt_x" }) =>
  app.run(Effect.flatMap(Events, (e) => e.emit(developerId, "grant.created", data)))
const round = () => app.run(deliverDue)
const deliveries = async (webhookId: string, apiKey = dev.apiKey) =>
  (await app.request("GET", `/v1/webhooks/${webhookId}/deliveries`, { apiKey })).body.deliveries

describe("endpoints", () => {
  test("register (secret once), list without secret, delete; unknown event 400; isolation", async () => {
    const res = await register("https://hooks.example/in", ["grant.created", "token.issued"])
    expect(res.status).toBe(201)
    expect(res.body).toMatchObject({ url: "https://hooks.example/in", events: ["grant.created", "token.issued"] })
    expect(res.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    const stored = await app.query<{ secretCiphertext: string }>("SELECT secret_ciphertext FROM webhook_endpoints WHERE id = $1", [res.body.id])
    expect(stored[0]!.secretCiphertext).not.toContain(res.body.secret)
    const list = await app.request("GET", "/v1/webhooks", { apiKey: dev.apiKey })
    expect(list.body.webhooks.find((w: any) => w.id === res.body.id)).toEqual({ id: res.body.id, url: res.body.url, events: res.body.events, enabled: true, createdAt: res.body.createdAt })
    const bad = await register("https://hooks.example/in", ["grant.exploded"])
    expect(bad.status).toBe(400)
    expect(bad.body.code).toBe("BAD_REQUEST")
    const other = await app.signup()
    expect((await app.request("DELETE", `/v1/webhooks/${res.body.id}`, { apiKey: other.apiKey })).status).toBe(404)
    expect((await app.request("GET", `/v1/webhooks/${res.body.id}/deliveries`, { apiKey: other.apiKey })).status).toBe(404)
    expect((await app.request("POST", `/v1/webhooks/${res.body.id}/rotate-secret`, { apiKey: other.apiKey })).status).toBe(404)
    expect((await app.request("GET", "/v1/webhooks", { apiKey: other.apiKey })).body.webhooks).toEqual([])
    expect((await app.request("DELETE", `/v1/webhooks/${res.body.id}`, { apiKey: dev.apiKey })).status).toBe(204)
    expect((await app.request("GET", "/v1/webhooks", { apiKey: dev.apiKey })).body.webhooks.find((w: any) => w.id === res.body.id)).toBeUndefined()
  })
})

describe("delivery", () => {
  test("fails twice then succeeds: delivered with 3 attempts; signed over the raw bytes; envelope exact", async () => {
    const d = await app.signup({ plan: "enterprise" })
    const receiver = startReceiver((n) => (n <= 2 ? 500 : 204))
    try {
      const hook = (await register(receiver.url, ["grant.created"], d.apiKey)).body
      const event = await emit(d.developerId, { grantId: "grnt_1", scopes: ["a"], note: "café ✓ 🔑" })
      expect((await round()).delivered).toBe(0)
      let [delivery] = await deliveries(hook.id, d.apiKey)
      expect(delivery).toMatchObject({ status: "pending", attempts: 1, lastResponseStatus: 500, lastError: "receiver answered 500" })
      expect(Date.parse(delivery.nextAttemptAt) - Date.parse(delivery.createdAt)).toBe(30_000)
      await app.adjust("30 seconds")
      await round()
      await app.adjust("60 seconds")
      expect((await round()).delivered).toBe(1)
      ;[delivery] = await deliveries(hook.id, d.apiKey)
      expect(delivery).toMatchObject({ status: "delivered", attempts: 3, lastResponseStatus: 204, eventId: event.id, eventType: "grant.created" })
      expect(receiver.received).toHaveLength(3)
      const last = receiver.received[2]!
      expect(JSON.parse(last.body)).toEqual({ id: event.id, type: "grant.created", createdAt: event.createdAt, data: { grantId: "grnt_1", scopes: ["a"], note: "café ✓ 🔑" } })
      expect(last.headers.get("user-agent")).toBe("Service-Webhooks/0.1")
      expect(last.headers.get("content-type")).toBe("application/json")
      expect(last.headers.get("webhook-id")).toBe(event.id)
      const now = Math.floor((Date.parse("2026-11-22T10:00:00Z") + 90_000) / 1000)
      // over the raw bytes as received (multi-byte UTF-8 in the body), and over the same text
      expect(last.raw.length).toBeGreaterThan(last.body.length)
      expect(await verifyWebhook(last.raw, last.headers, hook.secret, { nowSeconds: now })).toBe(true)
      expect(await verifyWebhook(last.body, last.headers, hook.secret, { nowSeconds: now })).toBe(true)
      const { createHmac } = await import("node:crypto")
      expect(last.headers.get("x-service-signature")).toBe(`sha256=${createHmac("sha256", hook.secret).update(last.raw).digest("hex")}`)
      expect(Number(last.headers.get("webhook-timestamp"))).toBe(now)
      // a re-serialised body (key order changed) does not verify
      const reordered = JSON.stringify({ type: JSON.parse(last.body).type, ...JSON.parse(last.body) })
      expect(reordered).not.toBe(last.body)
      expect(await verifyWebhook(reordered, last.headers, hook.secret, { nowSeconds: now })).toBe(false)
      expect(await verifyWebhook(last.body.replace("grnt_1", "grnt_2"), last.headers, hook.secret, { nowSeconds: now })).toBe(false)
      expect(await verifyWebhook(last.body, last.headers, "wrong", { nowSeconds: now })).toBe(false)
      // each attempt is signed afresh
      expect(receiver.received[0]!.headers.get("webhook-timestamp")).not.toBe(last.headers.get("webhook-timestamp"))
    } finally {
      receiver.stop()
    }
  })

  const schedule = async (maxAttempts: number) => {
    const clocked = await startTestApp({ testClock: true, env: { WEBHOOK_MAX_ATTEMPTS: String(maxAttempts) } })
    const receiver = startReceiver(() => 503)
    try {
      const d = await clocked.signup()
      const hook = (await clocked.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: receiver.url, events: ["grant.created"] } })).body
      await clocked.run(Effect.flatMap(Events, (e) => e.emit(d.developerId, "grant.created", { grantId: "g" })))
      const waits: Array<number> = []
      for (let attempt = 1; attempt <= maxAttempts; attempt++) {
        const before = receiver.received.length
        await clocked.run(deliverDue)
        expect(receiver.received.length).toBe(before + 1)
        const [delivery] = (await clocked.request("GET", `/v1/webhooks/${hook.id}/deliveries`, { apiKey: d.apiKey })).body.deliveries
        expect(delivery.attempts).toBe(attempt)
        if (attempt === maxAttempts) {
          expect(delivery.status).toBe("failed")
          expect(delivery.nextAttemptAt).toBeNull()
          break
        }
        expect(delivery.status).toBe("pending")
        const now = await clocked.run(Effect.flatMap(Effect.clock, (c) => c.currentTimeMillis))
        const seconds = (Date.parse(delivery.nextAttemptAt) - Number(now)) / 1000
        waits.push(seconds)
        // one second early nothing is sent
        await clocked.adjust(`${seconds - 1} seconds`)
        await clocked.run(deliverDue)
        expect(receiver.received.length).toBe(before + 1)
        await clocked.adjust("1 second")
      }
      return waits
    } finally {
      receiver.stop()
      await clocked.stop()
    }
  }

  test("backoff 30/60/120/240 s, failed at the 5th send (default maximum)", async () => {
    expect(await schedule(5)).toEqual([30, 60, 120, 240])
  })

  test("with WEBHOOK_MAX_ATTEMPTS=6 the 5th retry comes 480 s later", async () => {
    expect(await schedule(6)).toEqual([30, 60, 120, 240, 480])
  })

  test("retry re-queues a failed delivery; a delivered one cannot be retried", async () => {
    const d = await app.signup()
    let fail = true
    const receiver = startReceiver(() => (fail ? 500 : 200))
    const clocked = await startTestApp({ testClock: true, env: { WEBHOOK_MAX_ATTEMPTS: "1" } })
    try {
      const dd = await clocked.signup()
      const hook = (await clocked.request("POST", "/v1/webhooks", { apiKey: dd.apiKey, body: { url: receiver.url, events: ["grant.created"] } })).body
      await clocked.run(Effect.flatMap(Events, (e) => e.emit(dd.developerId, "grant.created", { grantId: "g" })))
      await clocked.run(deliverDue)
      const [failed] = (await clocked.request("GET", `/v1/webhooks/${hook.id}/deliveries?status=failed`, { apiKey: dd.apiKey })).body.deliveries
      expect(failed.status).toBe("failed")
      fail = false
      const retried = await clocked.request("POST", `/v1/webhooks/${hook.id}/deliveries/${failed.id}/retry`, { apiKey: dd.apiKey })
      expect(retried.status).toBe(200)
      expect(retried.body.status).toBe("pending")
      await clocked.run(deliverDue)
      const [done] = (await clocked.request("GET", `/v1/webhooks/${hook.id}/deliveries`, { apiKey: dd.apiKey })).body.deliveries
      expect(done.status).toBe("delivered")
      const again = await clocked.request("POST", `/v1/webhooks/${hook.id}/deliveries/${failed.id}/retry`, { apiKey: dd.apiKey })
      expect(again.status).toBe(409)
    } finally {
      receiver.stop()
      await clocked.stop()
    }
    void d
  })

  test("rotate-secret: later deliveries are signed with the new secret (the old one also, for 24 hours: standard.test.ts)", async () => {
    const d = await app.signup()
    const receiver = startReceiver()
    try {
      const hook = (await register(receiver.url, ["grant.created"], d.apiKey)).body
      const rotated = await app.request("POST", `/v1/webhooks/${hook.id}/rotate-secret`, { apiKey: d.apiKey })
      expect(rotated.body.secret).not.toBe(hook.secret)
      await emit(d.developerId)
      await round()
      const got = receiver.received[0]!
      // the service runs on TestClock: check at the time it signed
      const at = { nowSeconds: Number(got.headers.get("webhook-timestamp")) }
      expect(await verifyWebhook(got.body, got.headers, rotated.body.secret, at)).toBe(true)
      expect(await verifyWebhook(got.body, { ...Object.fromEntries(got.headers.entries()), "webhook-signature": got.headers.get("webhook-signature")!.split(" ")[0]! }, hook.secret, at)).toBe(false)
    } finally {
      receiver.stop()
    }
  })

  test("an event is written only when the change commits (outbox)", async () => {
    const d = await app.signup()
    const { SqlClient } = await import("@effect/sql")
    await app.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql.withTransaction(Effect.zipRight(Effect.flatMap(Events, (e) => e.emit(d.developerId, "grant.created", { grantId: "rolled-back" })), Effect.fail("boom")))
    ).pipe(Effect.ignore))
    expect(await app.query("SELECT id FROM events WHERE developer_id = $1", [d.developerId])).toEqual([])
  })
})

describe("SSRF", () => {
  test("address classification", () => {
    for (const ip of ["127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
      "224.0.0.1", "::1", "::", "fc00::1", "fd12:3456::1", "fe80::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:7f00:1",
      "64:ff9b::a00:1", "2002:0a00:0001::1", "ff02::1", "2001:db8::1",
      // the rest of the brief's list and other spellings of the same places
      "192.0.0.1", "198.18.0.1", "198.19.255.255", "255.255.255.255", "240.0.0.1", "100.127.255.255", "169.254.0.1",
      "::FFFF:127.0.0.1", "0:0:0:0:0:ffff:7f00:0001", "::ffff:169.254.169.254", "::ffff:0:127.0.0.1", "64:ff9b::7f00:1",
      "::127.0.0.1", "fe80::1%eth0", "febf::1", "fec0::1", "fe00::1", "100::1", "2001:0:4136:e378::1", "not-an-ip", "1.2.3"]) {
      expect([ip, isPublicAddress(ip)]).toEqual([ip, false])
    }
    for (const ip of ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808",
      "2001:4860:4860::8888", "2002:808:808::1"]) {
      expect([ip, isPublicAddress(ip)]).toEqual([ip, true])
    }
  })

  test("registration refuses http, local and private targets when private hosts are not allowed", async () => {
    for (const url of ["http://hooks.example/in", "https://127.0.0.1/in", "https://[::1]/in", "https://10.0.0.5/in", "https://localhost/in",
      "https://[::ffff:127.0.0.1]/in", "ftp://hooks.example", "https://user:pass@hooks.example/"]) {
      expect([url, checkReceiverUrl(url, false).ok]).toEqual([url, false])
    }
    expect(checkReceiverUrl("https://hooks.example/in", false).ok).toBe(true)
    const strict = await startTestApp({ env: { WEBHOOK_ALLOW_PRIVATE_HOSTS: "false" } })
    try {
      const d = await strict.signup()
      for (const url of ["http://127.0.0.1:9/hook", "https://127.0.0.1/hook", "https://169.254.169.254/latest"]) {
        const res = await strict.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url, events: ["grant.created"] } })
        expect(res.status).toBe(400)
        expect(res.body.code).toBe("BAD_REQUEST")
      }
    } finally {
      await strict.stop()
    }
  })
})
