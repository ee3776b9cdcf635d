/**
 * Webhooks that standard libraries verify (issue 17 item 6): the `whsec_` secret, the
 * `standardwebhooks` package on a real delivery, the older hex secrets, rotation with a 24-hour
 * overlap on TestClock, bulk replay, and `dpdp.breach.updated`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { createHmac } from "node:crypto"
import { Webhook } from "standardwebhooks"
import { Events } from "../../src/platform/Events.ts"
import { randomBytes } from "node:crypto"
import { formatKey, openSync, parseKeyring, seal, VaultKeys } from "../../src/vault/Crypto.ts"
import { rekey } from "../../src/vault/Rekey.ts"
import { secretContext } from "../../src/webhooks/Service.ts"
import { verifyWebhook } from "../../src/webhooks/verify.ts"
import { deliverDue } from "../../src/webhooks/Worker.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { type Received, startReceiver } from "./support.ts"

const T0 = Date.parse("2026-11-22T10:00:00.000Z")
let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: T0, env: { WEBHOOK_MAX_ATTEMPTS: "1" } })
})
afterAll(() => app.stop())

const register = (apiKey: string, url: string, events = ["grant.created"]) =>
  app.request("POST", "/v1/webhooks", { apiKey, body: { url, events } })
const emit = (developerId: string, data: Record<string, unknown> = { grantId: "grnt_x" }) =>
  app.run(Effect.flatMap(Events, (e) => e.emit(developerId, "grant.created", data)))
const round = () => app.run(deliverDue)
const headersOf = (r: Received) => Object.fromEntries(r.headers.entries())

/** the standardwebhooks package checks the timestamp against Date.now(); hold it at the signing time */
const atSigningTime = <A>(r: Received, f: () => A): A => {
  const real = Date.now
  Date.now = () => Number(r.headers.get("webhook-timestamp")) * 1000
  try {
    return f()
  } finally {
    Date.now = real
  }
}
const standardVerifies = (secret: string | Webhook, r: Received) =>
  atSigningTime(r, () => {
    try {
      ;(typeof secret === "string" ? new Webhook(secret) : secret).verify(r.body, headersOf(r))
      return true
    } catch {
      return false
    }
  })

describe("secret and signatures", () => {
  test("the secret is whsec_ + base64 of 32 bytes; the standardwebhooks package verifies a real delivery unchanged", async () => {
    const d = await app.signup()
    const receiver = startReceiver()
    try {
      const hook = (await register(d.apiKey, receiver.url)).body
      expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
      expect(Buffer.from(hook.secret.slice(6), "base64")).toHaveLength(32)
      const event = await emit(d.developerId, { grantId: "grnt_1", note: "café ✓" })
      expect((await round()).delivered).toBe(1)
      const got = receiver.received[0]!
      // the package's own verify, given the secret as the service showed it
      const payload = atSigningTime(got, () => new Webhook(hook.secret).verify(got.body, headersOf(got)))
      expect(payload).toEqual({ id: event.id, type: "grant.created", createdAt: event.createdAt, data: { grantId: "grnt_1", note: "café ✓" } })
      expect(standardVerifies(`whsec_${Buffer.alloc(32, 1).toString("base64")}`, got)).toBe(false)
      // X-Service-Signature stays keyed with the secret string's UTF-8 bytes (the interface)
      expect(got.headers.get("x-service-signature")).toBe(`sha256=${createHmac("sha256", hook.secret).update(got.raw).digest("hex")}`)
      expect(await verifyWebhook(got.raw, got.headers, hook.secret, { nowSeconds: Number(got.headers.get("webhook-timestamp")) })).toBe(true)
    } finally {
      receiver.stop()
    }
  })

  test("an endpoint whose stored secret has the older hex form is signed as before (UTF-8 key for both)", async () => {
    const d = await app.signup()
    const receiver = startReceiver()
    try {
      const hook = (await register(d.apiKey, receiver.url)).body
      const old = "0123456789abcdef".repeat(4)
      const sealed = await app.run(Effect.map(VaultKeys, (ring) => JSON.stringify(seal(ring, secretContext(hook.id, d.developerId), old))))
      await app.query("UPDATE webhook_endpoints SET secret_ciphertext = $1 WHERE id = $2", [sealed, hook.id])
      await emit(d.developerId)
      await round()
      const got = receiver.received[0]!
      const signed = `${got.headers.get("webhook-id")}.${got.headers.get("webhook-timestamp")}.${got.body}`
      expect(got.headers.get("webhook-signature")).toBe(`v1,${createHmac("sha256", old).update(signed).digest("base64")}`)
      expect(await verifyWebhook(got.raw, got.headers, old, { nowSeconds: Number(got.headers.get("webhook-timestamp")) })).toBe(true)
      // the library reads such a secret as raw bytes
      expect(standardVerifies(new Webhook(old, { format: "raw" }), got)).toBe(true)
    } finally {
      receiver.stop()
    }
  })
})

describe("rotation", () => {
  test("the old secret stays valid for 24 hours (both v1 entries), then only the new one signs", async () => {
    const d = await app.signup()
    const receiver = startReceiver()
    try {
      const hook = (await register(d.apiKey, receiver.url)).body
      const rotated = await app.request("POST", `/v1/webhooks/${hook.id}/rotate-secret`, { apiKey: d.apiKey })
      expect(rotated.status).toBe(200)
      expect(rotated.body.secret).toMatch(/^whsec_/)
      expect(rotated.body.secret).not.toBe(hook.secret)
      const rotatedAt = Date.parse(rotated.body.previousSecretExpiresAt) - 24 * 3600_000
      await emit(d.developerId)
      await round()
      const during = receiver.received[0]!
      expect(during.headers.get("webhook-signature")!.split(" ")).toHaveLength(2)
      for (const secret of [hook.secret, rotated.body.secret]) {
        expect(standardVerifies(secret, during)).toBe(true)
        expect(await verifyWebhook(during.raw, during.headers, secret, { nowSeconds: Number(during.headers.get("webhook-timestamp")) })).toBe(true)
      }
      // X-Service-Signature has one value (the interface): the new secret's
      expect(during.headers.get("x-service-signature")).toBe(`sha256=${createHmac("sha256", rotated.body.secret).update(during.raw).digest("hex")}`)

      // one second before the overlap ends the old secret still signs; from its end on it does not
      await app.setTime(rotatedAt + 24 * 3600_000 - 1000)
      await emit(d.developerId)
      await round()
      expect(standardVerifies(hook.secret, receiver.received[1]!)).toBe(true)
      await app.setTime(rotatedAt + 24 * 3600_000)
      await emit(d.developerId)
      await round()
      const after = receiver.received[2]!
      expect(after.headers.get("webhook-signature")!.split(" ")).toHaveLength(1)
      expect(standardVerifies(hook.secret, after)).toBe(false)
      expect(standardVerifies(rotated.body.secret, after)).toBe(true)
    } finally {
      receiver.stop()
    }
  })

  test("vault rekey re-encrypts a still-valid previous secret too, and clears an expired one", async () => {
    const d = await app.signup()
    const hook = (await register(d.apiKey, "http://127.0.0.1:9/hook")).body
    await app.request("POST", `/v1/webhooks/${hook.id}/rotate-secret`, { apiKey: d.apiKey })
    const current = await app.run(VaultKeys)
    const fresh = `k${Date.now()}:${randomBytes(32).toString("base64")}`
    const ring = parseKeyring([fresh, ...[...current.byKid.values()].map(formatKey)].join(","))
    await app.run(rekey(ring))
    const [row] = await app.query("SELECT previous_secret_ciphertext FROM webhook_endpoints WHERE id = $1", [hook.id])
    // opened with the new key alone: the old key can be dropped without losing the overlap
    const alone = parseKeyring(fresh)
    expect(openSync(alone, secretContext(hook.id, d.developerId), JSON.parse(row.previousSecretCiphertext))).toBe(hook.secret)
    // past the overlap, rekey clears it rather than carry a secret nothing reads
    const [{ expires }] = await app.query("SELECT previous_secret_expires_at AS expires FROM webhook_endpoints WHERE id = $1", [hook.id])
    const now = await app.run(Effect.clockWith((c) => c.currentTimeMillis))
    await app.setTime(new Date(expires).getTime())
    await app.run(rekey(alone))
    expect(await app.query("SELECT previous_secret_ciphertext AS c, previous_secret_expires_at AS e FROM webhook_endpoints WHERE id = $1", [hook.id]))
      .toEqual([{ c: null, e: null }])
    await app.setTime(now)
    // back under the service's own keys, for the tests that follow
    await app.run(rekey(parseKeyring([...[...current.byKid.values()].map(formatKey), fresh].join(","))))
  })
})

describe("replay", () => {
  test("re-queues an endpoint's failed deliveries in a window, once; tenant-scoped; dates validated", async () => {
    const d = await app.signup()
    const other = await app.signup()
    let answer = 500
    const receiver = startReceiver(() => answer)
    try {
      const hook = (await register(d.apiKey, receiver.url)).body
      const start = new Date(await app.run(Effect.clockWith((c) => c.currentTimeMillis))).toISOString()
      for (let i = 0; i < 3; i++) await emit(d.developerId, { grantId: `grnt_${i}` })
      await round()
      const history = async () => (await app.request("GET", `/v1/webhooks/${hook.id}/deliveries`, { apiKey: d.apiKey })).body.deliveries
      expect((await history()).map((x: any) => x.status)).toEqual(["failed", "failed", "failed"])
      const replay = (body: unknown, apiKey = d.apiKey, id = hook.id) => app.request("POST", `/v1/webhooks/${id}/replay`, { apiKey, body })

      for (const bad of [{ since: "yesterday" }, { since: "2026-02-31T00:00:00Z" }, { since: start, until: "soon" }, { since: start, until: start }, {}]) {
        const res = await replay(bad)
        expect([res.status, res.body.code]).toEqual([400, "BAD_REQUEST"])
      }
      expect((await replay({ since: start }, other.apiKey)).status).toBe(404)
      // a window before the deliveries re-queues nothing
      expect((await replay({ since: "2026-01-01", until: "2026-02-01T00:00:00Z" })).body).toEqual({ requeued: 0, nextSince: null })

      answer = 200
      expect((await replay({ since: start })).body).toEqual({ requeued: 3, nextSince: null })
      // idempotent: the rows wait as pending, a second call finds nothing failed
      expect((await replay({ since: start })).body).toEqual({ requeued: 0, nextSince: null })
      expect((await history()).map((x: any) => [x.status, x.attempts])).toEqual([["pending", 0], ["pending", 0], ["pending", 0]])
      expect((await round()).delivered).toBe(3)
      expect((await history()).map((x: any) => x.status)).toEqual(["delivered", "delivered", "delivered"])
      // status=delivered sends delivered ones again (same event id: receivers deduplicate on webhook-id)
      expect((await replay({ since: start, status: "delivered" })).body.requeued).toBe(3)
      await round()
      expect(new Set(receiver.received.slice(-3).map((r) => r.headers.get("webhook-id")))).toEqual(new Set(receiver.received.slice(0, 3).map((r) => r.headers.get("webhook-id"))))
      // the other developer's endpoint is not touched
      expect(await app.query("SELECT count(*)::int AS n FROM webhook_deliveries WHERE developer_id = $1", [other.developerId])).toEqual([{ n: 0 }])
    } finally {
      receiver.stop()
    }
  })

  test("one call re-queues at most 1000 and says where to continue", async () => {
    const d = await app.signup()
    const hook = (await register(d.apiKey, "http://127.0.0.1:9/hook")).body
    const event = await emit(d.developerId)
    await app.query("DELETE FROM webhook_deliveries WHERE endpoint_id = $1", [hook.id])
    await app.query(
      `INSERT INTO webhook_deliveries (id, endpoint_id, event_id, developer_id, status, attempts, max_attempts, next_attempt_at, created_at, updated_at)
       SELECT 'whd_bulk' || lpad(i::text, 5, '0'), $1, $2, $3, 'failed', 1, 1, $4::timestamptz, $4::timestamptz + i * interval '1 millisecond', $4::timestamptz
       FROM generate_series(1, 1001) i`,
      [hook.id, event.id, d.developerId, "2026-11-20T00:00:00Z"]
    )
    const first = await app.request("POST", `/v1/webhooks/${hook.id}/replay`, { apiKey: d.apiKey, body: { since: "2026-11-20T00:00:00Z" } })
    expect(first.body).toEqual({ requeued: 1000, nextSince: "2026-11-20T00:00:01.001Z" })
    const second = await app.request("POST", `/v1/webhooks/${hook.id}/replay`, { apiKey: d.apiKey, body: { since: first.body.nextSince } })
    expect(second.body).toEqual({ requeued: 1, nextSince: null })
    await app.query("UPDATE webhook_deliveries SET status = 'failed' WHERE endpoint_id = $1", [hook.id])
  })
})

describe("dpdp.breach.updated", () => {
  test("a status change emits breachId, status and previousStatus in the update's transaction; a refused update emits nothing", async () => {
    const d = await app.signup()
    const created = await app.request("POST", "/v1/dpdp/breaches", {
      apiKey: d.apiKey,
      body: { description: "Laptop stolen", nature: "Loss of device", extent: "Customer records", affectedDataPrincipalIds: ["p1"] }
    })
    const id = created.body.breachId
    const patch = (body: unknown) => app.request("PATCH", `/v1/dpdp/breaches/${id}`, { apiKey: d.apiKey, body })
    const updates = () => app.query<{ data: any }>("SELECT data FROM events WHERE developer_id = $1 AND type = 'dpdp.breach.updated' ORDER BY created_at, id", [d.developerId])
    expect((await patch({ status: "reported" })).status).toBe(409)
    expect((await patch({ detailedReport: { mitigation: "m" } })).status).toBe(200)
    expect(await updates()).toEqual([])
    expect((await patch({ status: "initial_intimated" })).status).toBe(200)
    expect(await updates()).toEqual([{ data: { breachId: id, status: "initial_intimated", previousStatus: "open" } }])
    // subscribable, and the type is listed where unknown types are refused
    const receiver = startReceiver()
    try {
      expect((await register(d.apiKey, receiver.url, ["dpdp.breach.updated"])).status).toBe(201)
      await patch({ status: "reported", detailedReport: { updatedDetails: "u", factsCircumstancesReasons: "f", mitigation: "m", causeFindings: "c", remedialMeasures: "r" } })
      await round()
      expect(JSON.parse(receiver.received[0]!.body).data).toEqual({ breachId: id, status: "reported", previousStatus: "initial_intimated" })
    } finally {
      receiver.stop()
    }
  })
})
