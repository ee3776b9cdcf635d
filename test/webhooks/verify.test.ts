/** The receiver-side verifier: both header families, tolerance, tampering, header shapes. */
import { describe, expect, test } from "bun:test"
import { signDelivery } from "../../src/webhooks/Delivery.ts"
import { verifyWebhook } from "../../src/webhooks/verify.ts"

const secret = "a".repeat(64)
const body = JSON.stringify({ id: "evt_1", type: "grant.created", createdAt: "2026-11-22T10:00:00.000Z", data: { note: "naïve ✓" } })
const ts = 1_800_000_000
const signed = () => ({ ...signDelivery(secret, "evt_1", body, ts) }) as Record<string, string>

describe("verifyWebhook", () => {
  test("accepts a genuine delivery as string, bytes, Headers or a record with any header case", async () => {
    const h = signed()
    expect(await verifyWebhook(body, h, secret, { nowSeconds: ts })).toBe(true)
    expect(await verifyWebhook(new TextEncoder().encode(body), new Headers(h), secret, { nowSeconds: ts + 299 })).toBe(true)
    const upper = Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toUpperCase(), v]))
    expect(await verifyWebhook(body, upper, secret, { nowSeconds: ts - 299 })).toBe(true)
  })

  test("refuses tampering, a wrong secret, a missing or malformed X-Service-Signature", async () => {
    const h = signed()
    expect(await verifyWebhook(body.replace("naïve", "naive"), h, secret, { nowSeconds: ts })).toBe(false)
    expect(await verifyWebhook(body, h, "b".repeat(64), { nowSeconds: ts })).toBe(false)
    const { "x-service-signature": _, ...noService } = h
    expect(await verifyWebhook(body, noService, secret, { nowSeconds: ts })).toBe(false)
    expect(await verifyWebhook(body, { ...h, "x-service-signature": h["x-service-signature"]!.slice(7) }, secret, { nowSeconds: ts })).toBe(false)
  })

  test("Standard Webhooks part: timestamp within 5 minutes, id and timestamp bound to the signature", async () => {
    const h = signed()
    expect(await verifyWebhook(body, h, secret, { nowSeconds: ts + 301 })).toBe(false)
    expect(await verifyWebhook(body, h, secret, { nowSeconds: ts - 301 })).toBe(false)
    expect(await verifyWebhook(body, { ...h, "webhook-id": "evt_2" }, secret, { nowSeconds: ts })).toBe(false)
    expect(await verifyWebhook(body, { ...h, "webhook-timestamp": String(ts + 1) }, secret, { nowSeconds: ts })).toBe(false)
    // one of several space-separated signatures may match (secret rotation on the receiver's side)
    expect(await verifyWebhook(body, { ...h, "webhook-signature": `v1,AAAA ${h["webhook-signature"]}` }, secret, { nowSeconds: ts })).toBe(true)
    // present but incomplete Standard Webhooks headers are refused
    const { "webhook-signature": _, ...partial } = h
    expect(await verifyWebhook(body, partial, secret, { nowSeconds: ts })).toBe(false)
  })

  test("a capture with the Standard Webhooks headers stripped is refused unless the caller opts into body-only", async () => {
    const h = signed()
    const only = { "x-service-signature": h["x-service-signature"]! }
    expect(await verifyWebhook(body, only, secret, { nowSeconds: ts })).toBe(false)
    expect(await verifyWebhook(body, only, secret, { nowSeconds: ts + 10_000, bodyOnly: true })).toBe(true)
    // opting in does not relax headers that are present
    expect(await verifyWebhook(body, h, secret, { nowSeconds: ts + 301, bodyOnly: true })).toBe(false)
    expect(await verifyWebhook(body, { ...only, "webhook-id": "evt_1" }, secret, { nowSeconds: ts, bodyOnly: true })).toBe(false)
  })

  test("the tolerance cannot be raised past 5 minutes", async () => {
    const h = signed()
    expect(await verifyWebhook(body, h, secret, { nowSeconds: ts + 301, toleranceSeconds: 3600 })).toBe(false)
    expect(await verifyWebhook(body, h, secret, { nowSeconds: ts + 61, toleranceSeconds: 60 })).toBe(false)
    expect(await verifyWebhook(body, h, secret, { nowSeconds: ts + 59, toleranceSeconds: 60 })).toBe(true)
  })

  test("uses the real clock by default", async () => {
    const now = Math.floor(Date.now() / 1000)
    const fresh = signDelivery(secret, "evt_1", body, now) as unknown as Record<string, string>
    expect(await verifyWebhook(body, fresh, secret)).toBe(true)
    expect(await verifyWebhook(body, signed(), secret)).toBe(false)
  })
})
