/**
 * One delivery attempt: sign the envelope, POST it, report what happened. No redirects are
 * followed (a 3xx is a failure); any 2xx succeeds. Outside WEBHOOK_ALLOW_PRIVATE_HOSTS the host is
 * resolved and checked here and the connection made to that very address (TLS still verifies the
 * certificate for the host name).
 */
import { createHmac } from "node:crypto"
import { request as httpsRequest } from "node:https"
import { resolvePublic } from "./Ssrf.ts"

export const USER_AGENT = "Service-Webhooks/0.1"

export interface SignedHeaders {
  readonly "content-type": string
  readonly "user-agent": string
  readonly "x-service-signature": string
  readonly "webhook-id": string
  readonly "webhook-timestamp": string
  readonly "webhook-signature": string
}

/** Both signature families over the raw body, keyed by the secret's UTF-8 bytes (decisions §7). */
export const signDelivery = (secret: string, eventId: string, body: string, timestampSeconds: number): SignedHeaders => ({
  "content-type": "application/json",
  "user-agent": USER_AGENT,
  "x-service-signature": `sha256=${createHmac("sha256", secret).update(body, "utf8").digest("hex")}`,
  "webhook-id": eventId,
  "webhook-timestamp": String(timestampSeconds),
  "webhook-signature": `v1,${createHmac("sha256", secret).update(`${eventId}.${timestampSeconds}.${body}`, "utf8").digest("base64")}`
})

export type Outcome =
  | { readonly ok: true; readonly status: number }
  | { readonly ok: false; readonly status: number | null; readonly error: string }

const describe = (e: unknown) => {
  const err = e as { name?: string; code?: string; message?: string }
  if (err?.name === "TimeoutError" || err?.name === "AbortError") return "timed out"
  return (err?.code ?? err?.message ?? "network error").toString().slice(0, 200)
}

export const send = async (
  url: string,
  body: string,
  headers: SignedHeaders,
  options: { timeoutMs: number; allowPrivateHosts: boolean }
): Promise<Outcome> => {
  if (options.allowPrivateHosts) {
    try {
      const response = await fetch(url, {
        method: "POST",
        headers: headers as unknown as Record<string, string>,
        body,
        redirect: "manual",
        signal: AbortSignal.timeout(options.timeoutMs)
      })
      await response.arrayBuffer().catch(() => undefined)
      return response.status >= 200 && response.status < 300
        ? { ok: true, status: response.status }
        : { ok: false, status: response.status, error: `receiver answered ${response.status}` }
    } catch (e) {
      return { ok: false, status: null, error: describe(e) }
    }
  }
  const target = new URL(url)
  if (target.protocol !== "https:") return { ok: false, status: null, error: "receiver url must use https" }
  const resolved = await resolvePublic(target.hostname)
  if (!resolved.ok) return { ok: false, status: null, error: resolved.reason }
  return new Promise<Outcome>((resolve) => {
    const req = httpsRequest({
      host: resolved.address,
      port: target.port || 443,
      path: `${target.pathname}${target.search}`,
      method: "POST",
      servername: target.hostname,
      headers: { ...headers, host: target.host, "content-length": String(Buffer.byteLength(body)) },
      timeout: options.timeoutMs
    }, (res) => {
      res.resume()
      const status = res.statusCode ?? 0
      resolve(status >= 200 && status < 300 ? { ok: true, status } : { ok: false, status, error: `receiver answered ${status}` })
    })
    req.on("timeout", () => req.destroy(Object.assign(new Error("timed out"), { name: "TimeoutError" })))
    req.on("error", (e) => resolve({ ok: false, status: null, error: describe(e) }))
    req.end(body)
  })
}
