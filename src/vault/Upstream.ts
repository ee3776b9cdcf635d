/**
 * A credential's upstream OAuth token endpoint: the check of the URL a credential is stored with, and
 * the refresh_token call itself. Separate from the vault's storage and exchange because it is the
 * vault's only outbound network code, with its own SSRF rules (public hosts, pinned addresses).
 */
import { Effect } from "effect"
import { isIP } from "node:net"
import { BadRequest, UpstreamRefreshFailed } from "../platform/Errors.ts"
import { requestPinned, resolvePublic } from "../platform/Outbound.ts"
import type { Secrets } from "./Crypto.ts"

const PRIVATE_V4 = [/^10\./, /^127\./, /^169\.254\./, /^192\.168\./, /^172\.(1[6-9]|2\d|3[01])\./, /^0\./, /^100\.(6[4-9]|[7-9]\d|1[01]\d|12[0-7])\./]
const isPrivateHost = (host: string) => {
  // (a trailing dot names the same host: "localhost." is localhost)
  const h = host.replace(/^\[|\]$/g, "").replace(/\.$/, "").toLowerCase()
  if (h === "localhost" || h.endsWith(".localhost") || h.endsWith(".internal") || h.endsWith(".local")) return true
  const family = isIP(h)
  if (family === 4) return PRIVATE_V4.some((r) => r.test(h))
  if (family === 6) return h === "::1" || h === "::" || h.startsWith("fc") || h.startsWith("fd") || h.startsWith("fe80") || h.startsWith("::ffff:")
  return false
}

/** The upstream token endpoint: https (http and private hosts only with WEBHOOK_ALLOW_PRIVATE_HOSTS). */
export const checkTokenEndpoint = (raw: string, allowPrivate: boolean): string | BadRequest => {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return new BadRequest({ message: "tokenEndpoint must be an absolute URL", details: [{ path: "tokenEndpoint", message: "must be an absolute URL" }] })
  }
  if (url.username !== "" || url.password !== "") {
    return new BadRequest({ message: "tokenEndpoint must not carry credentials", details: [{ path: "tokenEndpoint", message: "must not carry credentials" }] })
  }
  if (!(url.protocol === "https:" || (allowPrivate && url.protocol === "http:"))) {
    return new BadRequest({ message: "tokenEndpoint must use https", details: [{ path: "tokenEndpoint", message: "must use https" }] })
  }
  if (!allowPrivate && isPrivateHost(url.hostname)) {
    return new BadRequest({ message: "tokenEndpoint must be a public host", details: [{ path: "tokenEndpoint", message: "must be a public host" }] })
  }
  return url.toString()
}

export const REFRESH_TIMEOUT_MS = 10_000

export interface RefreshAnswer {
  readonly accessToken: string
  readonly refreshToken: string | undefined
  readonly expiresIn: number | undefined
}

/** the most of an upstream answer read (a token response is a few hundred bytes) */
const MAX_UPSTREAM_ANSWER_BYTES = 64 * 1024

/**
 * POSTs the refresh form. Outside WEBHOOK_ALLOW_PRIVATE_HOSTS the rule of webhook receivers
 * (decisions §7) holds here too: every address the host resolves to must be public, and the
 * connection goes to the address checked, so a host stored while it looked public cannot be made
 * to point into the private network later (or by a second DNS answer).
 */
const postForm = async (
  endpoint: string,
  form: string,
  headers: Record<string, string>,
  allowPrivate: boolean,
  signal: AbortSignal
): Promise<{ status: number; text: string }> => {
  if (allowPrivate) {
    const response = await fetch(endpoint, { method: "POST", headers, body: form, redirect: "error", signal })
    return { status: response.status, text: await response.text() }
  }
  const target = new URL(endpoint)
  if (target.protocol !== "https:") throw new RefreshFailure("token endpoint must use https")
  const timedOut = new Promise<never>((_, reject) =>
    signal.addEventListener("abort", () => reject(Object.assign(new Error("timed out"), { name: "TimeoutError" })), { once: true })
  )
  const resolved = await Promise.race([resolvePublic(target.hostname), timedOut])
  if (!resolved.ok) throw new RefreshFailure(`token endpoint: ${resolved.reason}`)
  return requestPinned(target, resolved.address, form, headers, { timeoutMs: REFRESH_TIMEOUT_MS, signal, maxBodyBytes: MAX_UPSTREAM_ANSWER_BYTES })
}

/**
 * OAuth 2.0 refresh_token grant (RFC 6749 §6): form POST, client authentication with HTTP Basic
 * when a secret is stored (client_id in the body when only an id is). The failure reason names the
 * status and the OAuth `error` code only, never a body that might echo a secret.
 */
export const callTokenEndpoint = (endpoint: string, secrets: Secrets, allowPrivate: boolean): Effect.Effect<RefreshAnswer, UpstreamRefreshFailed> =>
  Effect.tryPromise({
    try: async (signal) => {
      const form = new URLSearchParams({ grant_type: "refresh_token", refresh_token: secrets.refreshToken ?? "" })
      const headers: Record<string, string> = {
        "content-type": "application/x-www-form-urlencoded",
        accept: "application/json"
      }
      if (secrets.clientId && secrets.clientSecret) {
        const enc = (s: string) => encodeURIComponent(s)
        headers.authorization = `Basic ${Buffer.from(`${enc(secrets.clientId)}:${enc(secrets.clientSecret)}`).toString("base64")}`
      } else if (secrets.clientId) {
        form.set("client_id", secrets.clientId)
      }
      const { status, text } = await postForm(
        endpoint,
        form.toString(),
        headers,
        allowPrivate,
        AbortSignal.any([signal, AbortSignal.timeout(REFRESH_TIMEOUT_MS)])
      )
      let body: any
      try {
        body = JSON.parse(text)
      } catch {
        body = undefined
      }
      if (status < 200 || status > 299) {
        const code = typeof body?.error === "string" && /^[A-Za-z0-9_.-]{1,64}$/.test(body.error) ? ` ${body.error}` : ""
        throw new RefreshFailure(`upstream answered HTTP ${status}${code}`)
      }
      if (typeof body?.access_token !== "string" || body.access_token === "") {
        throw new RefreshFailure("upstream answer has no access_token")
      }
      const expiresIn = typeof body.expires_in === "number" ? body.expires_in
        : typeof body.expires_in === "string" && /^\d+$/.test(body.expires_in) ? Number(body.expires_in)
        : undefined
      return {
        accessToken: body.access_token as string,
        refreshToken: typeof body.refresh_token === "string" && body.refresh_token !== "" ? body.refresh_token : undefined,
        expiresIn: expiresIn !== undefined && Number.isFinite(expiresIn) && expiresIn >= 0 ? expiresIn : undefined
      }
    },
    catch: (e) => {
      const reason = e instanceof RefreshFailure
        ? e.message
        : (e as { name?: string })?.name === "TimeoutError"
        ? `upstream did not answer within ${REFRESH_TIMEOUT_MS / 1000} s`
        : "upstream could not be reached"
      return new UpstreamRefreshFailed({ message: `Refreshing the upstream access token failed: ${reason}` })
    }
  })

class RefreshFailure extends Error {}
