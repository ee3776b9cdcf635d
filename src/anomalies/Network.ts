/**
 * Addresses for anomaly detection: the network an address belongs to (IPv4 /24, IPv6 /48, for
 * AD-003) and the developer's allow-list (IPs or CIDRs, at most 100) that exempts requests from it.
 */
import { BlockList, isIP } from "node:net"

export const MAX_ALLOW_LIST = 100

/** the address without an IPv4-mapped IPv6 prefix, or undefined when it is not an IP */
const plain = (address: string): string | undefined => {
  const a = address.replace(/^::ffff:(?=\d+\.)/i, "")
  return isIP(a) === 0 ? undefined : a
}

const expand6 = (a: string): Array<string> => {
  const [head, tail] = a.split("::") as [string, string | undefined]
  const h = head === "" ? [] : head.split(":")
  const t = tail === undefined ? [] : tail === "" ? [] : tail.split(":")
  const fill = tail === undefined ? [] : Array(8 - h.length - t.length).fill("0")
  return [...h, ...fill, ...t].map((g) => g.toLowerCase().replace(/^0+(?=.)/, ""))
}

/** the networks of recent addresses: the token paths ask for the same few again and again */
const networks = new Map<string, string | undefined>()

/** "203.0.113.0/24" or "2001:db8:1::/48"; undefined for what is not an IP (e.g. "unknown") */
export const networkOf = (address: string): string | undefined => {
  if (networks.has(address)) return networks.get(address)
  if (networks.size >= 10_000) networks.clear()
  const network = computeNetwork(address)
  networks.set(address, network)
  return network
}

const computeNetwork = (address: string): string | undefined => {
  const a = plain(address)
  if (a === undefined) return undefined
  if (isIP(a) === 4) return `${a.split(".").slice(0, 3).join(".")}.0/24`
  return `${expand6(a).slice(0, 3).join(":")}::/48`
}

/** an entry of the allow-list: an IPv4/IPv6 address, or one with a prefix length */
export const allowEntryProblem = (entry: string): string | undefined => {
  const [address, bits, ...rest] = entry.split("/")
  const family = isIP(address ?? "")
  if (family === 0 || rest.length > 0) return `${entry} is not an IP address or CIDR`
  if (bits !== undefined) {
    const n = /^\d{1,3}$/.test(bits) ? Number(bits) : -1
    if (n < 0 || n > (family === 4 ? 32 : 128)) return `${entry} has an invalid prefix length`
  }
  return undefined
}

/** a matcher for a (checked) allow-list */
export const allowMatcher = (entries: ReadonlyArray<string>): (address: string | undefined) => boolean => {
  if (entries.length === 0) return () => false
  const list = new BlockList()
  for (const entry of entries) {
    const [address, bits] = entry.split("/") as [string, string | undefined]
    const type = isIP(address) === 6 ? "ipv6" : "ipv4"
    if (bits === undefined) list.addAddress(address, type)
    else list.addSubnet(address, Number(bits), type)
  }
  return (address) => {
    const a = address === undefined ? undefined : plain(address)
    if (a === undefined) return false
    return list.check(a, isIP(a) === 6 ? "ipv6" : "ipv4")
  }
}
