/**
 * SSRF defence for webhook receivers (decisions §7): outside WEBHOOK_ALLOW_PRIVATE_HOSTS=true only
 * https, and only hosts whose every resolved address is public. The caller then connects to the
 * checked address itself (pinning), so a second DNS answer cannot send the request elsewhere.
 */
import { lookup } from "node:dns/promises"
import { isIP } from "node:net"

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
  if (isIP(host) !== 0 && !isPublicAddress(host)) return { ok: false, reason: "url must not point to a private or local address" }
  if (/^(localhost|.*\.localhost|.*\.local|.*\.internal)$/i.test(host)) return { ok: false, reason: "url must not point to a local host" }
  return { ok: true, url }
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
