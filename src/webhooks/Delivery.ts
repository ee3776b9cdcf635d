/**
 * One delivery attempt: sign the envelope, POST it, report what happened. No redirects are
 * followed (a 3xx is a failure); any 2xx succeeds. Outside WEBHOOK_ALLOW_PRIVATE_HOSTS the host is
 * resolved and checked here and the connection made to that very address (TLS still verifies the
 * certificate for the host name).
 */
import { createHmac } from "node:crypto"
import { requestPinned, resolvePublic } from "../platform/Outbound.ts"

export const USER_AGENT = "Service-Webhooks/0.1"

// a type, not an interface, so it is a Record<string, string> wherever headers are taken
export type SignedHeaders = {
  readonly "content-type": string
  readonly "user-agent": string
  readonly "x-service-signature": string
  readonly "webhook-id": string
  readonly "webhook-timestamp": string
  readonly "webhook-signature": string
}

/** `whsec_` + base64 of 32 random bytes (issue 17); endpoints made before keep their 64-hex secret. */
export const SECRET_PREFIX = "whsec_"

/**
 * The Standard Webhooks key of a secret: the bytes base64-encoded after `whsec_`, as that standard
 * (and its libraries) read a secret; an older 64-hex secret keeps the UTF-8 bytes it was always
 * signed with, so receivers set up before the change go on verifying.
 */
export const standardKey = (secret: string): Buffer =>
  secret.startsWith(SECRET_PREFIX) ? Buffer.from(secret.slice(SECRET_PREFIX.length), "base64") : Buffer.from(secret, "utf8")

const standardSignature = (secret: string, signed: string) =>
  `v1,${createHmac("sha256", standardKey(secret)).update(signed, "utf8").digest("base64")}`

/**
 * Both signature families over the raw body (decisions §7, issue 17): X-Service-Signature keyed by
 * the secret string's UTF-8 bytes, as the interface says; webhook-signature by the Standard Webhooks
 * key. While a rotated-out secret is still valid (`previous`), webhook-signature carries one `v1,`
 * entry per secret, space-separated, the new one first, and X-Service-Signature (one value by the
 * interface) the new secret's.
 */
export const signDelivery = (secret: string, eventId: string, body: string, timestampSeconds: number, previous?: string): SignedHeaders => {
  const signed = `${eventId}.${timestampSeconds}.${body}`
  return {
    "content-type": "application/json",
    "user-agent": USER_AGENT,
    "x-service-signature": `sha256=${createHmac("sha256", secret).update(body, "utf8").digest("hex")}`,
    "webhook-id": eventId,
    "webhook-timestamp": String(timestampSeconds),
    "webhook-signature": [secret, ...(previous === undefined ? [] : [previous])].map((s) => standardSignature(s, signed)).join(" ")
  }
}

/** the JSON body of every delivery (and of a test send): the event envelope */
export const envelopeBody = (eventId: string, type: string, createdAt: Date, data: unknown) =>
  JSON.stringify({ id: eventId, type, createdAt: createdAt.toISOString(), data })

export type Outcome =
  | { readonly ok: true; readonly status: number }
  | { readonly ok: false; readonly status: number | null; readonly error: string }

const describe = (e: unknown) => {
  const err = e as { name?: string; code?: string; message?: string }
  if (err?.name === "TimeoutError" || err?.name === "AbortError") return "timed out"
  return (err?.code ?? err?.message ?? "network error").toString().slice(0, 200)
}

const outcomeOf = (status: number): Outcome =>
  status >= 200 && status < 300 ? { ok: true, status } : { ok: false, status, error: `receiver answered ${status}` }

/** One webhook POST to a checked address: the receiver's status is all that counts. */
export const postPinned = (
  target: URL,
  address: string,
  body: string,
  headers: Readonly<Record<string, string>>,
  options: { timeoutMs: number; ca?: string | Buffer; signal?: AbortSignal }
): Promise<Outcome> =>
  requestPinned(target, address, body, headers, options).then(
    (answer) => outcomeOf(answer.status),
    (e) => ({ ok: false, status: null, error: describe(e) })
  )

/**
 * One attempt, finished (successfully or not) within `timeoutMs` in all, name resolution included.
 */
export const send = async (
  url: string,
  body: string,
  headers: Readonly<Record<string, string>>,
  options: { timeoutMs: number; allowPrivateHosts: boolean }
): Promise<Outcome> => {
  const deadline = AbortSignal.timeout(options.timeoutMs)
  if (options.allowPrivateHosts) {
    try {
      const response = await fetch(url, {
        method: "POST",
        headers,
        body,
        redirect: "manual",
        signal: deadline
      })
      await response.arrayBuffer().catch(() => undefined)
      return outcomeOf(response.status)
    } catch (e) {
      return { ok: false, status: null, error: describe(e) }
    }
  }
  let target: URL
  try {
    target = new URL(url)
  } catch {
    return { ok: false, status: null, error: "receiver url is not valid" }
  }
  if (target.protocol !== "https:") return { ok: false, status: null, error: "receiver url must use https" }
  const timedOut = new Promise<{ ok: false; status: null; error: string }>((resolve) =>
    deadline.addEventListener("abort", () => resolve({ ok: false, status: null, error: "timed out" }), { once: true })
  )
  const resolved = await Promise.race([resolvePublic(target.hostname), timedOut])
  if ("error" in resolved) return resolved
  if (!resolved.ok) return { ok: false, status: null, error: resolved.reason }
  return postPinned(target, resolved.address, body, headers, { timeoutMs: options.timeoutMs, signal: deadline })
}
