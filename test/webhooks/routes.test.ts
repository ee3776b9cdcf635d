/** Webhook routes beyond registration: delivery history (filter, cursor, limit), retry, delete, isolation. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { Events } from "../../src/platform/Events.ts"
import { deliverDue } from "../../src/webhooks/Worker.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { startReceiver } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true, env: { WEBHOOK_MAX_ATTEMPTS: "1" } })
})
afterAll(() => app.stop())

const emit = (developerId: string, grantId = "g") => app.run(Effect.flatMap(Events, (e) => e.emit(developerId, "grant.created", { grantId })))

describe("delivery history", () => {
  test("status filter, cursor pages without gaps or repeats, limit and cursor validation", async () => {
    const d = await app.signup()
    let n = 0
    // odd sends fail, even succeed: with one attempt allowed, deliveries alternate failed / delivered
    const receiver = startReceiver(() => (++n % 2 === 1 ? 500 : 200))
    try {
      const hook = (await app.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: receiver.url, events: ["grant.created"] } })).body
      for (let i = 0; i < 7; i++) {
        await emit(d.developerId, `g${i}`)
        await app.run(deliverDue)
        await app.adjust("1 second")
      }
      const all = (await app.request("GET", `/v1/webhooks/${hook.id}/deliveries`, { apiKey: d.apiKey })).body
      expect(all.deliveries).toHaveLength(7)
      expect(all.nextCursor).toBeNull()
      // newest first
      const created = all.deliveries.map((x: any) => Date.parse(x.createdAt))
      expect(created).toEqual([...created].sort((a, b) => b - a))
      expect(all.deliveries.filter((x: any) => x.status === "failed")).toHaveLength(4)
      const failed = (await app.request("GET", `/v1/webhooks/${hook.id}/deliveries?status=failed`, { apiKey: d.apiKey })).body.deliveries
      expect(failed.map((x: any) => x.id)).toEqual(all.deliveries.filter((x: any) => x.status === "failed").map((x: any) => x.id))
      expect(failed[0]).toMatchObject({ attempts: 1, maxAttempts: 1, lastResponseStatus: 500, lastError: "receiver answered 500", nextAttemptAt: null, deliveredAt: null })
      const ok = (await app.request("GET", `/v1/webhooks/${hook.id}/deliveries?status=delivered`, { apiKey: d.apiKey })).body.deliveries
      expect(ok).toHaveLength(3)
      expect(ok[0].deliveredAt).not.toBeNull()
      const seen: Array<string> = []
      let cursor: string | null = null
      do {
        const page: any = (await app.request("GET", `/v1/webhooks/${hook.id}/deliveries?limit=3${cursor ? `&cursor=${cursor}` : ""}`, { apiKey: d.apiKey })).body
        expect(page.deliveries.length).toBeLessThanOrEqual(3)
        seen.push(...page.deliveries.map((x: any) => x.id))
        cursor = page.nextCursor
      } while (cursor)
      expect(seen).toEqual(all.deliveries.map((x: any) => x.id))
      for (const q of ["limit=0", "limit=101", "limit=x", "cursor=notacursor", "status=lost"]) {
        const res = await app.request("GET", `/v1/webhooks/${hook.id}/deliveries?${q}`, { apiKey: d.apiKey })
        expect([q, res.status, res.body.code]).toEqual([q, 400, "BAD_REQUEST"])
      }
    } finally {
      receiver.stop()
    }
  })
})

describe("retry", () => {
  test("404 for another developer, an unknown delivery or another endpoint's delivery; 409 for pending", async () => {
    const d = await app.signup()
    const other = await app.signup()
    const receiver = startReceiver(() => 500)
    try {
      const hook = (await app.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: receiver.url, events: ["grant.created"] } })).body
      const second = (await app.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: receiver.url, events: ["token.issued"] } })).body
      await emit(d.developerId)
      const [pending] = (await app.request("GET", `/v1/webhooks/${hook.id}/deliveries`, { apiKey: d.apiKey })).body.deliveries
      expect(pending.status).toBe("pending")
      const conflict = await app.request("POST", `/v1/webhooks/${hook.id}/deliveries/${pending.id}/retry`, { apiKey: d.apiKey })
      expect([conflict.status, conflict.body.code]).toEqual([409, "CONFLICT"])
      await app.run(deliverDue)
      const [failed] = (await app.request("GET", `/v1/webhooks/${hook.id}/deliveries`, { apiKey: d.apiKey })).body.deliveries
      expect(failed.status).toBe("failed")
      for (const [apiKey, path] of [
        [other.apiKey, `/v1/webhooks/${hook.id}/deliveries/${failed.id}/retry`],
        [d.apiKey, `/v1/webhooks/${hook.id}/deliveries/whd_missing/retry`],
        [d.apiKey, `/v1/webhooks/${second.id}/deliveries/${failed.id}/retry`],
        [d.apiKey, `/v1/webhooks/wh_missing/deliveries/${failed.id}/retry`]
      ] as const) {
        const res = await app.request("POST", path, { apiKey })
        expect([path, res.status, res.body.code]).toEqual([path, 404, "NOT_FOUND"])
      }
      // nothing above changed the failed delivery
      const [still] = (await app.request("GET", `/v1/webhooks/${hook.id}/deliveries`, { apiKey: d.apiKey })).body.deliveries
      expect(still.status).toBe("failed")
      const now = Number(await app.run(Effect.flatMap(Effect.clock, (c) => c.currentTimeMillis)))
      const retried = await app.request("POST", `/v1/webhooks/${hook.id}/deliveries/${failed.id}/retry`, { apiKey: d.apiKey })
      expect(retried.status).toBe(200)
      expect(retried.body).toMatchObject({ id: failed.id, status: "pending", attempts: 0 })
      expect(Date.parse(retried.body.nextAttemptAt)).toBe(now)
      const [stored] = await app.query<any>("SELECT status, lease_until FROM webhook_deliveries WHERE id = $1", [failed.id])
      expect(stored).toEqual({ status: "pending", leaseUntil: null })
    } finally {
      receiver.stop()
    }
  })
})

describe("delete", () => {
  test("a deleted endpoint gets nothing more: pending deliveries end failed, new events create none", async () => {
    const d = await app.signup()
    const receiver = startReceiver()
    try {
      const hook = (await app.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: receiver.url, events: ["grant.created"] } })).body
      await emit(d.developerId)
      expect((await app.request("DELETE", `/v1/webhooks/${hook.id}`, { apiKey: d.apiKey })).status).toBe(204)
      expect((await app.request("DELETE", `/v1/webhooks/${hook.id}`, { apiKey: d.apiKey })).status).toBe(404)
      await emit(d.developerId)
      await app.run(deliverDue)
      expect(receiver.received).toHaveLength(0)
      const rows = await app.query<any>("SELECT status, last_error FROM webhook_deliveries WHERE endpoint_id = $1", [hook.id])
      expect(rows).toEqual([{ status: "failed", lastError: "endpoint deleted" }])
      expect((await app.request("GET", `/v1/webhooks/${hook.id}/deliveries`, { apiKey: d.apiKey })).status).toBe(404)
      expect((await app.request("POST", `/v1/webhooks/${hook.id}/rotate-secret`, { apiKey: d.apiKey })).status).toBe(404)
    } finally {
      receiver.stop()
    }
  })

  test("without an API key every route answers 401", async () => {
    for (const [method, path] of [["POST", "/v1/webhooks"], ["GET", "/v1/webhooks"], ["DELETE", "/v1/webhooks/x"], ["GET", "/v1/webhooks/x/deliveries"],
      ["POST", "/v1/webhooks/x/deliveries/y/retry"], ["POST", "/v1/webhooks/x/rotate-secret"]] as const) {
      const res = await app.request(method, path, method === "POST" ? { body: {} } : {})
      expect([path, res.status, res.body.code]).toEqual([path, 401, "UNAUTHORIZED"])
    }
  })
})

describe("registration input", () => {
  test("bad bodies answer 400 BAD_REQUEST and store nothing; duplicate event types collapse", async () => {
    const d = await app.signup()
    for (const body of [
      { url: "https://hooks.example/in", events: [] },
      { url: "not a url", events: ["grant.created"] },
      { url: "ftp://hooks.example/in", events: ["grant.created"] },
      { url: "https://hooks.example/in" },
      { events: ["grant.created"] },
      { url: "https://hooks.example/in", events: "grant.created" },
      { url: "https://hooks.example/in", events: ["grant.created", "Grant.Created"] }
    ]) {
      const res = await app.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body })
      expect([body, res.status, res.body.code]).toEqual([body, 400, "BAD_REQUEST"])
    }
    expect(await app.query("SELECT id FROM webhook_endpoints WHERE developer_id = $1", [d.developerId])).toEqual([])
    const ok = await app.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: "https://hooks.example/in", events: ["grant.revoked", "grant.revoked", "budget.exhausted"] } })
    expect(ok.status).toBe(201)
    expect(ok.body.events).toEqual(["grant.revoked", "budget.exhausted"])
    expect(Object.keys(ok.body).sort()).toEqual(["createdAt", "enabled", "events", "id", "secret", "url"])
  })
})
