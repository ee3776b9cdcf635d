/**
 * Outbound HTTP for every capability that calls a URL someone else configured (webhook receivers,
 * the vault's token endpoints, OPA, SSO providers, anomaly channels): decisions §7's rules. Outside
 * an allow-private setting (tests, local development) only https, and only hosts whose every
 * resolved address is public; the request then connects to the checked address itself (pinning), so
 * a second DNS answer cannot send it elsewhere, with a deadline and a bounded answer.
 */
import { lookup } from "node:dns/promises"
import { request as httpsRequest } from "node:https"
import { isIP } from "node:net"
import { jsonNestsDeeperThan, MAX_JSON_DEPTH } from "./Body.ts"

const ipv4ToInt = (ip: string) => ip.split(".").reduce((n, part) => (n << 8) + Number(part), 0) >>> 0

const V4_BLOCKS: ReadonlyArray<readonly [string, number]> = [
  ["0.0.0.0", 8], ["10.0.0.0", 8], ["100.64.0.0", 10], ["127.0.0.0", 8], ["169.254.0.0", 16], ["172.16.0.0", 12],
  ["192.0.0.0", 24], ["192.0.2.0", 24], ["192.88.99.0", 24], ["192.168.0.0", 16], ["198.18.0.0", 15], ["198.51.100.0", 24],
  ["203.0.113.0", 24], ["224.0.0.0", 4], ["240.0.0.0", 4]
]

const isPublicV4 = (ip: string) => {
  const n = ipv4ToInt(ip)
  return !V4_BLOCKS.some(([base, bits]) => (n >>> (32 - bits)) === (ipv4ToInt(base) >>> (32 - bits)))
}

/** Expands an IPv6 address to eight 16-bit groups (handles :: and a trailing dotted IPv4). */
const ipv6Groups = (ip: string): Array<number> | undefined => {
  let address = ip.toLowerCase().split("%")[0]!
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(address)
  if (dotted) {
    const n = ipv4ToInt(dotted[1]!)
    address = address.slice(0, -dotted[1]!.length) + `${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`
  }
  const [head, tail] = address.split("::")
  const h = head ? head.split(":") : []
  const t = tail !== undefined && tail !== "" ? tail.split(":") : []
  const missing = address.includes("::") ? 8 - h.length - t.length : 0
  const groups = [...h, ...Array(missing).fill("0"), ...t].map((g) => parseInt(g, 16))
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined
}

const isPublicV6 = (ip: string) => {
  const g = ipv6Groups(ip)
  if (g === undefined) return false
  const v4 = (a: number, b: number) => `${a >> 8}.${a & 0xff}.${b >> 8}.${b & 0xff}`
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0)
  if (zeros(0, 5) && g[5] === 0xffff) return isPublicV4(v4(g[6]!, g[7]!)) // ::ffff:a.b.c.d (mapped)
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return isPublicV4(v4(g[6]!, g[7]!)) // ::ffff:0:a.b.c.d (translated)
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return isPublicV4(v4(g[6]!, g[7]!)) // 64:ff9b::/96 NAT64
  // Everything else outside global unicast 2000::/3 is not public: ::, ::1, ::a.b.c.d (compatible),
  // fc00::/7 unique local, fe80::/10 link local, fec0::/10 site local, ff00::/8 multicast, reserved space.
  if ((g[0]! & 0xe000) !== 0x2000) return false
  if (g[0] === 0x2001 && g[1] === 0x0db8) return false // documentation
  if (g[0] === 0x2001 && g[1] === 0x0000) return false // Teredo (embeds an obfuscated IPv4)
  if (g[0] === 0x2002) return isPublicV4(v4(g[1]!, g[2]!)) // 6to4 embeds an IPv4
  return true
}

/** True only for a globally routable unicast address. */
export const isPublicAddress = (ip: string): boolean => {
  const family = isIP(ip.split("%")[0]!)
  if (family === 4) return isPublicV4(ip)
  if (family === 6) return isPublicV6(ip)
  return false
}

export type UrlCheck = { readonly ok: true; readonly url: URL } | { readonly ok: false; readonly reason: string }

/** Static checks at registration: scheme, credentials, literal addresses. */
export const checkReceiverUrl = (raw: string, allowPrivateHosts: boolean): UrlCheck => {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return { ok: false, reason: "url is not a valid absolute URL" }
  }
  if (raw.length > 2000) return { ok: false, reason: "url is too long" }
  if (url.username || url.password) return { ok: false, reason: "url must not carry credentials" }
  if (allowPrivateHosts) {
    return url.protocol === "https:" || url.protocol === "http:" ? { ok: true, url } : { ok: false, reason: "url must be http or https" }
  }
  if (url.protocol !== "https:") return { ok: false, reason: "url must use https" }
  const host = url.hostname.replace(/^\[|\]$/g, "")
  if (isIP(host) !== 0 && !isPublicAddress(host)) return { ok: false, reason: PRIVATE_ADDRESS }
  // `localhost.` is localhost to the resolver but slips past a comparison of names
  if (host.endsWith(".")) return { ok: false, reason: "url must not end its host name with a dot" }
  if (LOCAL_NAME.test(host)) return { ok: false, reason: "url must not point to a local host" }
  return { ok: true, url }
}

const PRIVATE_ADDRESS = "url must not point to a private or local address"
const LOCAL_NAME = /^(localhost\d*|ip6-localhost|ip6-loopback|.*\.localhost|.*\.localdomain|.*\.local|.*\.internal)$/i
const REGISTRATION_LOOKUP_MS = 2_000

/**
 * At registration (decisions §19, revised), after `checkReceiverUrl`: a name that resolves to a
 * loopback or private address is refused like the address itself. A name that does not resolve now
 * is let through (each connection resolves, checks and pins it again, and refuses it then).
 */
export const checkReceiverName = async (url: URL, allowPrivateHosts: boolean): Promise<UrlCheck> => {
  const host = url.hostname.replace(/^\[|\]$/g, "")
  if (allowPrivateHosts || isIP(host) !== 0) return { ok: true, url }
  let timer: ReturnType<typeof setTimeout> | undefined
  const addresses = await Promise.race([
    lookup(host, { all: true, verbatim: true }).catch(() => []),
    new Promise<[]>((resolve) => timer = setTimeout(() => resolve([]), REGISTRATION_LOOKUP_MS))
  ]).finally(() => clearTimeout(timer))
  return addresses.some((a) => !isPublicAddress(a.address)) ? { ok: false, reason: PRIVATE_ADDRESS } : { ok: true, url }
}

/**
 * One text for every refusal at connection time: a host that does not resolve and one that resolves
 * somewhere private must look the same to the caller, or the service answers DNS questions about
 * the inside of its network.
 */
export const NOT_ALLOWED_OR_UNREACHABLE = "receiver not allowed or unreachable"

/** Resolves the host; every address must be public. Returns the address to connect to. */
export const resolvePublic = async (host: string): Promise<{ ok: true; address: string; family: number } | { ok: false; reason: string }> => {
  const bare = host.replace(/^\[|\]$/g, "")
  if (isIP(bare) !== 0) {
    return isPublicAddress(bare) ? { ok: true, address: bare, family: isIP(bare) } : { ok: false, reason: NOT_ALLOWED_OR_UNREACHABLE }
  }
  let addresses: Array<{ address: string; family: number }>
  try {
    addresses = await lookup(bare, { all: true, verbatim: true })
  } catch {
    return { ok: false, reason: NOT_ALLOWED_OR_UNREACHABLE }
  }
  if (addresses.length === 0) return { ok: false, reason: NOT_ALLOWED_OR_UNREACHABLE }
  const bad = addresses.find((a) => !isPublicAddress(a.address))
  if (bad) return { ok: false, reason: NOT_ALLOWED_OR_UNREACHABLE }
  return { ok: true, address: addresses[0]!.address, family: addresses[0]!.family }
}

/**
 * POST to `url` over TLS, connecting to `address` (already checked) rather than resolving the host
 * again; the certificate is still verified for the URL's host name (`servername`). Answers the
 * status and up to `maxBodyBytes` of the body (0: the body is discarded); rejects on a network
 * error or when `signal` aborts. `ca` is for tests. Also used for the vault's upstream refresh.
 */
export const requestPinned = (
  target: URL,
  address: string,
  body: string,
  headers: Readonly<Record<string, string>>,
  options: { timeoutMs: number; ca?: string | Buffer; signal?: AbortSignal; maxBodyBytes?: number; method?: "GET" | "POST" }
): Promise<PinnedAnswer> =>
  new Promise((resolve, reject) => {
    const maxBodyBytes = options.maxBodyBytes ?? 0
    const req = httpsRequest({
      host: address,
      port: target.port || 443,
      path: `${target.pathname}${target.search}`,
      method: options.method ?? "POST",
      servername: target.hostname,
      headers: { ...headers, host: target.host, ...(options.method === "GET" ? {} : { "content-length": String(Buffer.byteLength(body)) }) },
      timeout: options.timeoutMs,
      ...(options.ca === undefined ? {} : { ca: options.ca })
    }, (res) => {
      const status = res.statusCode ?? 0
      if (maxBodyBytes === 0) {
        res.resume()
        return resolve({ status, text: "", headers: headersOf(res.headers) })
      }
      const chunks: Array<Buffer> = []
      let size = 0
      res.on("data", (chunk: Buffer) => {
        if (size > maxBodyBytes) return
        size += chunk.length
        if (size <= maxBodyBytes) return void chunks.push(chunk)
        reject(new Error("answer too large"))
        res.destroy()
      })
      res.on("error", reject)
      res.on("end", () => resolve({ status, text: Buffer.concat(chunks).toString("utf8"), headers: headersOf(res.headers) }))
    })
    const abort = () => req.destroy(Object.assign(new Error("timed out"), { name: "TimeoutError" }))
    options.signal?.addEventListener("abort", abort, { once: true })
    req.on("timeout", abort)
    req.on("error", reject)
    req.on("close", () => options.signal?.removeEventListener("abort", abort))
    req.end(options.method === "GET" ? undefined : body)
  })

export interface PinnedAnswer {
  readonly status: number
  readonly text: string
  readonly headers: Headers
}

const headersOf = (raw: Readonly<Record<string, string | Array<string> | undefined>>): Headers => {
  const headers = new Headers()
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one)
  }
  return headers
}

export interface OutboundOptions {
  /** Tests and local development only (refused in production by each capability's setting). */
  readonly allowPrivateHosts: boolean
  /** The whole call, name resolution included. */
  readonly timeoutMs: number
  /** Larger answers are refused (the promise rejects). */
  readonly maxBodyBytes: number
}

/**
 * A `fetch` with the outbound rules, for libraries that take a custom fetch (openid-client) and for
 * our own GETs of provider metadata: https to a public, pinned address (or anything with
 * allowPrivateHosts), no redirects followed, a deadline and a bounded answer. Rejects with an Error
 * whose message is safe to show (never the resolved address).
 */
export const pinnedFetch = (options: OutboundOptions) =>
  async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : String(input))
    const method = (init?.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase()
    if (method !== "GET" && method !== "POST") throw new Error(`method ${method} not allowed`)
    const headers: Record<string, string> = {}
    new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined)).forEach((value, name) => {
      headers[name] = value
    })
    const rawBody = init?.body
    const body = rawBody === undefined || rawBody === null ? "" : rawBody instanceof URLSearchParams ? rawBody.toString() : typeof rawBody === "string" ? rawBody : new TextDecoder().decode(rawBody as ArrayBuffer)
    const deadline = AbortSignal.timeout(options.timeoutMs)
    const signal = init?.signal ? AbortSignal.any([deadline, init.signal]) : deadline
    if (options.allowPrivateHosts) {
      if (url.protocol !== "https:" && url.protocol !== "http:") throw new Error("url must be http or https")
      const response = await fetch(url, { method, headers, body: method === "GET" ? undefined : body, redirect: "manual", signal })
      const buffer = await response.arrayBuffer()
      if (buffer.byteLength > options.maxBodyBytes) throw new Error("answer too large")
      refuseDeepJson(new TextDecoder().decode(buffer))
      return new Response(response.status === 204 || response.status === 304 ? null : buffer, { status: response.status, headers: response.headers })
    }
    if (url.protocol !== "https:") throw new Error("url must use https")
    const timedOut = new Promise<never>((_, reject) =>
      signal.addEventListener("abort", () => reject(Object.assign(new Error("timed out"), { name: "TimeoutError" })), { once: true })
    )
    const resolved = await Promise.race([resolvePublic(url.hostname), timedOut])
    if (!resolved.ok) throw new Error(resolved.reason)
    const answer = await Promise.race([
      requestPinned(url, resolved.address, body, headers, { timeoutMs: options.timeoutMs, signal, maxBodyBytes: options.maxBodyBytes, method }),
      timedOut
    ])
    refuseDeepJson(answer.text)
    return new Response(answer.status === 204 || answer.status === 304 ? null : answer.text, { status: answer.status, headers: answer.headers })
  }

/**
 * The libraries parse what a provider answers (discovery, JWKS, tokens) with JSON.parse, which
 * takes ~280 ms of the event loop on 1 MiB nested 500,000 deep: the §19 depth rule, checked by the
 * same linear scan as request bodies, before any of them sees the text.
 */
const refuseDeepJson = (text: string) => {
  if (jsonNestsDeeperThan(text)) throw new Error(`answer nested deeper than ${MAX_JSON_DEPTH} levels`)
}

