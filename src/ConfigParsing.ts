/**
 * The readers and checks loadConfig applies to single variables: numbers, booleans, URLs, PEM keys,
 * TRUST_PROXY, WebAuthn trust anchors, vault keys, SSO settings. Separate from Config.ts so that file
 * reads as the list of settings; each check here throws a ConfigError naming its variable.
 */
import { createPrivateKey, createPublicKey, type KeyObject, randomBytes, X509Certificate } from "node:crypto"
import { readFileSync } from "node:fs"
import { BlockList, isIP } from "node:net"

export class ConfigError extends Error {
  constructor(readonly variable: string, readonly problem: string) {
    super(`${variable}: ${problem}`)
  }
}

export type Env = Record<string, string | undefined>

export const required = (env: Env, name: string): string => {
  const value = env[name]
  if (value === undefined || value.trim() === "") throw new ConfigError(name, "is required but not set")
  return value.trim()
}

export const integer = (env: Env, name: string, fallback: number, min = 0): number => {
  const raw = env[name]
  if (raw === undefined || raw.trim() === "") return fallback
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `must be a whole number, got "${raw}"`)
  const value = Number(raw.trim())
  if (value < min) throw new ConfigError(name, `must be at least ${min}`)
  return value
}

/** a whole number of at least 1, or "none" for no limit */
export const limitOrNone = (env: Env, name: string, fallback: number | null): number | null =>
  env[name]?.trim() === "none" ? null : env[name] === undefined || env[name]!.trim() === "" ? fallback : integer(env, name, 1, 1)

export const positiveNumber = (env: Env, name: string, fallback: number): number => {
  const raw = env[name]
  if (raw === undefined || raw.trim() === "") return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value <= 0) throw new ConfigError(name, `must be a positive number, got "${raw}"`)
  return value
}

export const boolean = (env: Env, name: string): boolean => {
  const raw = env[name]
  if (raw === undefined || raw === "") return false
  if (raw === "true") return true
  if (raw === "false") return false
  throw new ConfigError(name, `must be "true" or "false", got "${raw}"`)
}

export const url = (name: string, value: string, protocols: ReadonlyArray<string>): string => {
  let parsed: URL
  try {
    parsed = new URL(value)
  } catch {
    throw new ConfigError(name, "is not a valid URL")
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must use one of ${protocols.join(", ")}`)
  }
  return value
}

/** which proxies' X-Forwarded-For to believe (TRUST_PROXY) */
export type TrustProxy =
  | { readonly _tag: "none" }
  | { readonly _tag: "hops"; readonly hops: number }
  | { readonly _tag: "cidrs"; readonly trusted: BlockList }

/** attestation trust anchors (decisions §17): root certificates and local metadata statements */
export interface WebauthnTrust {
  readonly roots: ReadonlyArray<string>
  readonly statements: ReadonlyArray<Record<string, unknown>>
}

/** decisions §12: the key of stored login states, the session lifetime, private providers (tests) */
export interface SsoSettings {
  readonly stateSecret: string
  readonly sessionTtlSeconds: number
  readonly allowPrivateHosts: boolean
}

export const parseTrustProxy = (raw: string | undefined): TrustProxy => {
  if (raw === undefined || raw.trim() === "" || raw === "false") return { _tag: "none" }
  if (raw === "true") return { _tag: "hops", hops: 1 }
  if (/^\d+$/.test(raw.trim())) return { _tag: "hops", hops: Number(raw.trim()) }
  const cidrs = raw.split(",").map((s) => s.trim()).filter(Boolean)
  // Built here, once: an address or prefix BlockList refuses (999.1.1.1, 10.0.0.0/40) stops the
  // start with one line, instead of failing every forwarded request later.
  const trusted = new BlockList()
  for (const cidr of cidrs) {
    const [address, bits, extra] = cidr.split("/")
    const family = isIP(address ?? "")
    const prefix = bits === undefined ? undefined : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN
    if (family === 0 || extra !== undefined || (prefix !== undefined && !(prefix <= (family === 6 ? 128 : 32)))) {
      throw new ConfigError("TRUST_PROXY", `must be a hop count or a CIDR list, got "${cidr}"`)
    }
    const type = family === 6 ? "ipv6" : "ipv4"
    if (prefix === undefined) trusted.addAddress(address!, type)
    else trusted.addSubnet(address!, prefix, type)
  }
  return { _tag: "cidrs", trusted }
}

export const splitPems = (raw: string | undefined): ReadonlyArray<string> => {
  if (raw === undefined || raw.trim() === "") return []
  const text = raw.replace(/\\n/g, "\n")
  const pems = text.match(/-----BEGIN [A-Z ]+-----[\s\S]+?-----END [A-Z ]+-----/g)
  if (!pems) throw new ConfigError("RSA_PREVIOUS_PUBLIC_KEYS", "must hold one or more PEM public keys")
  pems.forEach((pem, i) => {
    if (!isRsaKey(() => createPublicKey(pem))) throw new ConfigError("RSA_PREVIOUS_PUBLIC_KEYS", `key ${i + 1} is not a readable RSA public key`)
  })
  return pems
}

/** whether the PEM parses, and as an RSA key (the service signs and publishes RS256 only) */
export const isRsaKey = (read: () => KeyObject): boolean => {
  try {
    return read().asymmetricKeyType === "rsa"
  } catch {
    return false
  }
}

/** `HOST`: an IP address or a host name to listen on */
export const checkHost = (host: string): string => {
  if (isIP(host) === 0 && !/^[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*$/.test(host)) {
    throw new ConfigError("HOST", "must be an IP address or a host name")
  }
  return host
}

/** `WEBAUTHN_RP_ID`: a bare host name (no scheme, port or path), as WebAuthn requires */
export const checkRpId = (rpId: string): string => {
  if (!/^[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*$/.test(rpId)) {
    throw new ConfigError("WEBAUTHN_RP_ID", "must be a bare host name, e.g. example.com")
  }
  return rpId
}

/** `WEBAUTHN_ORIGIN`: an http(s) origin (scheme, host, optional port; no path) */
export const checkOrigin = (origin: string): string => {
  let url: URL
  try {
    url = new URL(origin)
  } catch {
    throw new ConfigError("WEBAUTHN_ORIGIN", "must be an origin such as https://example.com")
  }
  if ((url.protocol !== "https:" && url.protocol !== "http:") || url.pathname !== "/" || url.search !== "" || url.hash !== "" || url.username !== "") {
    throw new ConfigError("WEBAUTHN_ORIGIN", "must be an origin such as https://example.com (no path)")
  }
  return url.origin
}

/**
 * `WEBAUTHN_ATTESTATION_ROOTS` (PEM certificates, inline or a file path) and `WEBAUTHN_MDS_STATEMENTS`
 * (a JSON array of FIDO metadata statements, inline or a file path): the only trust anchors an
 * attestation policy with an AAGUID allow-list can rely on (the FIDO MDS is not reachable).
 */
export const webauthnTrust = (env: Env): WebauthnTrust => {
  const read = (name: string): string | undefined => {
    const raw = env[name]?.trim()
    if (!raw) return undefined
    if (raw.startsWith("-----BEGIN")) return raw.replace(/\\n/g, "\n")
    if (raw.startsWith("[")) return raw
    try {
      return readFileSync(raw, "utf8")
    } catch {
      throw new ConfigError(name, "must be the value itself or a readable file")
    }
  }
  const rootsText = read("WEBAUTHN_ATTESTATION_ROOTS")
  const roots = rootsText?.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []
  if (rootsText !== undefined && roots.length === 0) throw new ConfigError("WEBAUTHN_ATTESTATION_ROOTS", "must hold PEM certificates")
  for (const pem of roots) {
    try {
      new X509Certificate(pem)
    } catch {
      throw new ConfigError("WEBAUTHN_ATTESTATION_ROOTS", "holds a certificate that does not parse")
    }
  }
  const statementsText = read("WEBAUTHN_MDS_STATEMENTS")
  let statements: Array<Record<string, unknown>> = []
  if (statementsText !== undefined) {
    try {
      statements = JSON.parse(statementsText)
    } catch {
      throw new ConfigError("WEBAUTHN_MDS_STATEMENTS", "must be a JSON array of metadata statements")
    }
    if (!Array.isArray(statements) || statements.some((s) => typeof s !== "object" || s === null || typeof s.aaguid !== "string")) {
      throw new ConfigError("WEBAUTHN_MDS_STATEMENTS", "must be a JSON array of metadata statements, each with an aaguid")
    }
  }
  return { roots, statements }
}

/** `DNS_RESOLVER`: an IP address with an optional port (`1.1.1.1`, `127.0.0.1:5353`, `[::1]:53`): what the resolver accepts */
export const checkResolver = (raw: string): string => {
  const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(raw)
  const plain = /^([^:]+)(?::(\d{1,5}))?$/.exec(raw)
  const [address, port] = bracketed ? [bracketed[1]!, bracketed[2]] : plain ? [plain[1]!, plain[2]] : [raw, undefined]
  const family = isIP(address)
  if (family === 0 || (family === 6 && !bracketed && raw.includes("]")) || (port !== undefined && (Number(port) < 1 || Number(port) > 65535))) {
    throw new ConfigError("DNS_RESOLVER", "must be an IP address with an optional port (host:port with an IP host)")
  }
  return raw
}

/** `kid:base64key,...`: each kid unique, each key exactly 32 bytes (AES-256). Never echoes key material. */
export const checkVaultKeys = (raw: string): void => {
  const seen = new Set<string>()
  raw.split(",").forEach((entry, i) => {
    const [kid, key, extra] = entry.trim().split(":")
    const problem = (what: string) => new ConfigError("VAULT_ENCRYPTION_KEYS", `entry ${i + 1} ${what} (expected kid:base64key,... with 32-byte keys)`)
    if (kid === undefined || key === undefined || extra !== undefined || !/^[A-Za-z0-9._-]{1,64}$/.test(kid)) throw problem("is malformed")
    if (seen.has(kid)) throw problem(`repeats key id "${kid}"`)
    seen.add(kid)
    if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(key) || Buffer.from(key, "base64").length !== 32) throw problem(`("${kid}") does not decode to 32 bytes`)
  })
}

/** `VC_SIGNING_KEY`: an Ed25519 private key in PEM (credentials are signed EdDSA only) */
export const vcSigningKey = (env: Env, production: boolean): string | undefined => {
  const raw = env.VC_SIGNING_KEY?.trim() ? env.VC_SIGNING_KEY.replace(/\\n/g, "\n").trim() : undefined
  if (raw === undefined) {
    if (production) throw new ConfigError("VC_SIGNING_KEY", "is required in production (generated keys are for development)")
    return undefined
  }
  const ok = (() => {
    try {
      return createPrivateKey(raw).asymmetricKeyType === "ed25519"
    } catch {
      return false
    }
  })()
  if (!ok) throw new ConfigError("VC_SIGNING_KEY", "must be a readable PEM Ed25519 private key")
  return raw
}

/** `VC_PREVIOUS_PUBLIC_KEYS`: Ed25519 public keys (PEM) still published and accepted while their credentials live */
export const vcPreviousKeys = (raw: string | undefined): ReadonlyArray<string> => {
  if (raw === undefined || raw.trim() === "") return []
  const pems = raw.replace(/\\n/g, "\n").match(/-----BEGIN [A-Z ]+-----[\s\S]+?-----END [A-Z ]+-----/g)
  if (!pems) throw new ConfigError("VC_PREVIOUS_PUBLIC_KEYS", "must hold one or more PEM Ed25519 public keys")
  pems.forEach((pem, i) => {
    let type: string | undefined
    try {
      type = createPublicKey(pem).asymmetricKeyType
    } catch {
      type = undefined
    }
    if (type !== "ed25519") throw new ConfigError("VC_PREVIOUS_PUBLIC_KEYS", `key ${i + 1} is not a readable Ed25519 public key`)
  })
  return pems
}

/** `DID_WEB_DOMAIN`: a host with an optional percent-encoded port, as it appears in did:web */
export const didWebDomain = (raw: string | undefined): string | undefined => {
  if (raw === undefined || raw.trim() === "") return undefined
  if (!/^[A-Za-z0-9]([A-Za-z0-9.-]{0,252})(%3A\d{1,5})?(:[A-Za-z0-9._-]+)*$/.test(raw.trim())) {
    throw new ConfigError("DID_WEB_DOMAIN", "must be a host name, e.g. auth.example.com or localhost%3A3001")
  }
  return raw.trim()
}

let processStateSecret: string | undefined

export const ssoSettings = (env: Env, production: boolean): SsoSettings => {
  const secret = env.SSO_STATE_SECRET?.trim() || undefined
  if (secret === undefined && production) throw new ConfigError("SSO_STATE_SECRET", "is required in production")
  if (secret !== undefined && secret.length < 32) throw new ConfigError("SSO_STATE_SECRET", "must be at least 32 characters")
  const ttlText = env.SSO_SESSION_TTL?.trim() || "8h"
  const ttl = /^\d+[smh]$/.test(ttlText) ? Number(ttlText.slice(0, -1)) * ({ s: 1, m: 60, h: 3600 } as const)[ttlText.slice(-1) as "s" | "m" | "h"] : undefined
  if (ttl === undefined || ttl < 60 || ttl > 24 * 3600) throw new ConfigError("SSO_SESSION_TTL", "must be a duration like 8h or 90m, from 1m to 24h")
  // without a configured secret (development, tests) one per process: states do not outlive it anyway
  processStateSecret ??= randomBytes(32).toString("base64url")
  return { stateSecret: secret ?? processStateSecret, sessionTtlSeconds: ttl, allowPrivateHosts: boolean(env, "SSO_ALLOW_PRIVATE_HOSTS") }
}
