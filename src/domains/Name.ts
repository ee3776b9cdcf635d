/**
 * Domain name normalisation: lowercase, no trailing dot, IDN → ASCII (punycode, via the WHATWG
 * host parser `domainToASCII`), syntax checked label by label; IP addresses (in any notation the
 * URL parser accepts, e.g. `127.1`) and single-label names are refused.
 */
import { isIP } from "node:net"
import { domainToASCII } from "node:url"

export type NormalisedDomain = { readonly ok: true; readonly domain: string } | { readonly ok: false; readonly reason: string }

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/

export const normaliseDomain = (input: string): NormalisedDomain => {
  let name = input.trim().toLowerCase()
  if (name.endsWith(".")) name = name.slice(0, -1)
  if (name === "") return { ok: false, reason: "domain is empty" }
  if (isIP(name) !== 0 || name.startsWith("[")) return { ok: false, reason: "IP addresses are not accepted, only domain names" }
  if (/[\s/\\:@?#*]/.test(name)) return { ok: false, reason: "domain must be a bare host name (no scheme, port, path or wildcard)" }
  const ascii = domainToASCII(name)
  if (ascii === "") return { ok: false, reason: "domain is not a valid host name" }
  if (isIP(ascii) !== 0) return { ok: false, reason: "IP addresses are not accepted, only domain names" }
  // the TXT record lives at _agent-auth.<domain>, itself at most 253 characters
  if (ascii.length > 253 - "_agent-auth.".length) return { ok: false, reason: `domain is longer than ${253 - "_agent-auth.".length} characters (its verification record name would exceed 253)` }
  const labels = ascii.split(".")
  if (labels.length < 2) return { ok: false, reason: "domain needs at least two labels (e.g. example.com)" }
  for (const label of labels) {
    if (!LABEL.test(label)) return { ok: false, reason: `"${label}" is not a valid label` }
  }
  if (/^\d+$/.test(labels[labels.length - 1]!)) return { ok: false, reason: "the top-level label cannot be numeric" }
  return { ok: true, domain: ascii }
}

/** the name of the TXT record that proves control of `domain` */
export const challengeName = (domain: string) => `_agent-auth.${domain}`
/** the value that record must hold */
export const challengeValue = (token: string) => `agent-auth-verify=${token}`
