/**
 * Verifying a delivery on the receiving side. Portable (Web Crypto only), so it runs in Bun, Node,
 * Deno, browsers and edge runtimes:
 *
 *   import { verifyWebhook } from "agent-auth-service/webhooks/verify"
 *   const ok = await verifyWebhook(rawBody, request.headers, secret)
 *
 * Pass the raw request body (string or bytes) exactly as received, never re-serialised JSON.
 * Checks the Standard Webhooks headers (`webhook-signature: v1,<base64>` over `id.timestamp.body`,
 * keyed by the bytes base64-encoded after `whsec_`, timestamp at most 5 minutes away: the replay
 * protection); they sign the body too. `X-Service-Signature: sha256=<hex>` (keyed by the secret
 * string's UTF-8 bytes) must be present and well formed; it is compared when it is all there is:
 * a delivery without the Standard Webhooks headers is refused unless `{ bodyOnly: true }` opts
 * into the body signature alone (decisions §19). During a secret rotation X-Service-Signature
 * carries the new secret's signature only, so a receiver still on the old secret is verified by
 * its `v1,` entry in webhook-signature. A secret of the older 64-hex form is used as UTF-8 bytes
 * for both, as it always was.
 */
const encoder = new TextEncoder()
const MAX_TOLERANCE_SECONDS = 300

const PREFIX = "whsec_"

const fromBase64 = (text: string): Uint8Array | undefined => {
  try {
    return Uint8Array.from(atob(text), (c) => c.charCodeAt(0))
  } catch {
    return undefined
  }
}

/** the Standard Webhooks key: the decoded bytes after `whsec_`; an older secret's UTF-8 bytes */
const standardKey = (secret: string): Uint8Array | undefined =>
  secret.startsWith(PREFIX) ? fromBase64(secret.slice(PREFIX.length)) : encoder.encode(secret)

const hmac = async (keyBytes: Uint8Array, data: Uint8Array): Promise<Uint8Array> => {
  const key = await crypto.subtle.importKey("raw", keyBytes as Uint8Array<ArrayBuffer>, { name: "HMAC", hash: "SHA-256" }, false, ["sign"])
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, data as Uint8Array<ArrayBuffer>))
}

const toHex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")
const toBase64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes))

/** Comparison whose time does not depend on where the strings differ. */
const safeEqual = (a: string, b: string) => {
  if (a.length !== b.length) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return diff === 0
}

const header = (headers: Record<string, string | undefined> | Headers, name: string): string | undefined => {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined
  const record = headers as Record<string, string | undefined>
  const key = Object.keys(record).find((k) => k.toLowerCase() === name)
  return key === undefined ? undefined : record[key]
}

export const verifyWebhook = async (
  rawBody: string | Uint8Array,
  headers: Record<string, string | undefined> | Headers,
  secret: string,
  options: {
    /** accept a delivery that carries only X-Service-Signature (no replay protection) */
    bodyOnly?: boolean
    /** how far the timestamp may be from now; at most (and by default) 300 */
    toleranceSeconds?: number
    nowSeconds?: number
  } = {}
): Promise<boolean> => {
  const body = typeof rawBody === "string" ? encoder.encode(rawBody) : rawBody
  const given = header(headers, "x-service-signature")
  if (given === undefined || !/^sha256=[0-9a-fA-F]{64}$/.test(given)) return false
  const id = header(headers, "webhook-id")
  const timestamp = header(headers, "webhook-timestamp")
  const signatures = header(headers, "webhook-signature")
  if (id === undefined && timestamp === undefined && signatures === undefined) {
    return options.bodyOnly === true && safeEqual(given.slice(7).toLowerCase(), toHex(await hmac(encoder.encode(secret), body)))
  }
  if (id === undefined || timestamp === undefined || signatures === undefined || !/^\d+$/.test(timestamp)) return false
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000)
  if (Math.abs(now - Number(timestamp)) > Math.min(options.toleranceSeconds ?? MAX_TOLERANCE_SECONDS, MAX_TOLERANCE_SECONDS)) return false
  const prefix = encoder.encode(`${id}.${timestamp}.`)
  const signed = new Uint8Array(prefix.length + body.length)
  signed.set(prefix)
  signed.set(body, prefix.length)
  const key = standardKey(secret)
  if (key === undefined || key.length === 0) return false
  const expected = toBase64(await hmac(key, signed))
  return signatures.split(" ").some((s) => s.startsWith("v1,") && safeEqual(s.slice(3), expected))
}
