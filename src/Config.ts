/**
 * Config: every environment variable of decisions §10, read once and validated.
 * A missing or malformed variable is a ConfigError naming it; main.ts prints that one line and exits 1.
 */
import { Context, Layer } from "effect"
import { createPrivateKey, createPublicKey, type KeyObject, randomBytes, X509Certificate } from "node:crypto"
import { readFileSync } from "node:fs"
import { BlockList, isIP } from "node:net"
import { loadPlans, type Plans, PlansProblem } from "./billing/Plans.ts"

/**
 * Every environment variable the service reads, with its default: the source of `agent-auth --help`,
 * checked against the README's configuration table and the env file example by tests, so the three
 * cannot drift apart. `loadConfig` reads no variable that is not listed here (a test checks that too).
 */
export const VARIABLES: ReadonlyArray<{ readonly name: string; readonly default: string; readonly meaning: string }> = [
  { name: "DATABASE_URL", default: "required", meaning: "postgres://… or pglite://<dir> | pglite://memory (embedded)" },
  { name: "REDIS_URL", default: "required", meaning: "redis://…[/db] or memory:// (one instance only)" },
  { name: "RSA_PRIVATE_KEY", default: "required unless AUTO_GENERATE_KEYS=true", meaning: "PEM RSA key signing grant tokens" },
  { name: "AUTO_GENERATE_KEYS", default: "false", meaning: "development only: generate the keys" },
  { name: "RSA_PREVIOUS_PUBLIC_KEYS", default: "unset", meaning: "PEMs still published in the JWKS during a rotation" },
  { name: "JWT_ISSUER", default: "https://agent-auth.local", meaning: "iss of grant tokens" },
  { name: "PORT", default: "3001", meaning: "listen port" },
  { name: "HOST", default: "0.0.0.0", meaning: "listen address" },
  { name: "PUBLIC_BASE_URL", default: "http://localhost:<PORT>", meaning: "absolute URLs (syncEndpoint, consentUrl)" },
  { name: "TRUST_PROXY", default: "unset", meaning: "hop count or CIDR list whose X-Forwarded-For is believed" },
  { name: "VAULT_ENCRYPTION_KEYS", default: "generated in dev, required in production", meaning: "kid:base64key,... (first is active)" },
  { name: "DID_METHOD", default: "service", meaning: "agent DIDs are did:<method>:<agentId>" },
  { name: "VC_SIGNING_KEY", default: "generated in dev, required in production", meaning: "Ed25519 PEM signing credentials" },
  { name: "VC_PREVIOUS_PUBLIC_KEYS", default: "unset", meaning: "Ed25519 public PEMs still accepted" },
  { name: "DID_WEB_DOMAIN", default: "host of PUBLIC_BASE_URL", meaning: "the service's did:web" },
  { name: "MAX_DELEGATION_DEPTH", default: "3", meaning: "" },
  { name: "WEBAUTHN_RP_ID", default: "localhost", meaning: "" },
  { name: "WEBAUTHN_ORIGIN", default: "PUBLIC_BASE_URL", meaning: "" },
  { name: "WEBAUTHN_RP_NAME", default: "agent-auth-service", meaning: "" },
  { name: "WEBAUTHN_ATTESTATION_ROOTS", default: "unset", meaning: "PEM trust anchors for passkey attestation (inline or a file path)" },
  { name: "WEBAUTHN_MDS_STATEMENTS", default: "unset", meaning: "JSON array of FIDO metadata statements (inline or a file path)" },
  { name: "COMPLIANCE_JOB_POLL_SECONDS", default: "5", meaning: "export job fiber poll (also woken when a job is created)" },
  { name: "ANOMALY_INTERVAL_SECONDS", default: "300", meaning: "anomaly detection fiber: how often each developer's windowed rules run" },
  { name: "PG_PREPARE", default: "true", meaning: "false: send every statement unnamed (benchmarks compare the two)" },
  { name: "POLICY_BACKEND", default: "builtin", meaning: "opa: also ask OPA (built-in rules and Cedar sets always run)" },
  { name: "OPA_URL", default: "unset", meaning: "OPA's base URL (required with POLICY_BACKEND=opa)" },
  { name: "OPA_TIMEOUT_MS", default: "2000", meaning: "OPA's deadline; a timeout denies" },
  { name: "WEBHOOK_ALLOW_PRIVATE_HOSTS", default: "false", meaning: "http and private receivers (refused in production)" },
  { name: "SSO_STATE_SECRET", default: "generated per process in dev, required in production", meaning: "keys the stored SSO login states (at least 32 characters)" },
  { name: "SSO_SESSION_TTL", default: "8h", meaning: "SSO session lifetime (at most 24h)" },
  { name: "SSO_ALLOW_PRIVATE_HOSTS", default: "false", meaning: "http and private identity providers (refused in production)" },
  { name: "WEBHOOK_POLL_INTERVAL_SECONDS", default: "30", meaning: "" },
  { name: "WEBHOOK_RETRY_BASE_SECONDS", default: "30", meaning: "" },
  { name: "WEBHOOK_TIMEOUT_SECONDS", default: "10", meaning: "" },
  { name: "WEBHOOK_MAX_ATTEMPTS", default: "5", meaning: "" },
  { name: "WEBHOOK_ENDPOINTS_FREE", default: "30", meaning: "endpoints per developer on the free plan" },
  { name: "WEBHOOK_ENDPOINTS_PRO", default: "200", meaning: "" },
  { name: "WEBHOOK_ENDPOINTS_ENTERPRISE", default: "none", meaning: "" },
  { name: "PLANS_FILE", default: "unset", meaning: "JSON file of plans (limits, monthly fee, overage) replacing or adding to the seeded ones" },
  { name: "WEBHOOK_ENDPOINT_CONCURRENCY", default: "4", meaning: "sends in flight per endpoint" },
  { name: "WEBHOOK_DEVELOPER_CONCURRENCY", default: "16", meaning: "per developer, all instances" },
  { name: "WEBHOOK_CONCURRENCY", default: "50", meaning: "per instance" },
  { name: "DPDP_BREACH_DEADLINE_ALERTS_ENABLED", default: "false", meaning: "exactly true turns the deadline fiber on" },
  { name: "DPDP_BREACH_ALERT_LEAD_MINUTES", default: "1440", meaning: "" },
  { name: "DPDP_BREACH_ALERT_INTERVAL_SECONDS", default: "300", meaning: "" },
  { name: "RATE_LIMIT_PLAN_FREE", default: "100", meaning: "per developer per minute" },
  { name: "RATE_LIMIT_PLAN_PRO", default: "500", meaning: "" },
  { name: "RATE_LIMIT_PLAN_ENTERPRISE", default: "2000", meaning: "" },
  { name: "RATE_LIMIT_ROUTE_DEFAULT", default: "5000", meaning: "per source address per route per minute" },
  { name: "RATE_LIMIT_CONTAINMENT", default: "2000", meaning: "" },
  { name: "RATE_LIMIT_REVOCATION_STATUS", default: "6000", meaning: "" },
  { name: "RATE_LIMIT_AUTHORIZE_PER_DEVELOPER", default: "10", meaning: "" },
  { name: "RATE_LIMIT_SIGNUP_PER_HOUR", default: "10", meaning: "sign-ups per source address per clock hour" },
  { name: "RATE_LIMIT_SCALE", default: "1", meaning: "multiplies every figure" },
  { name: "DNS_RESOLVER", default: "system", meaning: "host:port of the DNS server for domain verification" },
  { name: "NODE_ENV", default: "unset", meaning: "production: generated keys refused, more variables required" },
  { name: "METRICS_TOKEN", default: "unset (required in production)", meaning: "bearer token for GET /metrics" },
  { name: "LOG_LEVEL", default: "info", meaning: "debug, info, warn, error, none" },
  { name: "MIGRATE_ON_START", default: "true", meaning: "false: serve does not apply pending migrations" },
  { name: "REDIS_KEY_PREFIX", default: "aas:", meaning: "prefix of every Redis key" },
  { name: "WORKERS_ENABLED", default: "true", meaning: "false: this instance runs no scheduled fibers" },
  { name: "SIGNUP_ENABLED", default: "true", meaning: "false: POST /v1/signup answers 403 SIGNUP_DISABLED" },
  { name: "OTEL_EXPORTER_OTLP_ENDPOINT", default: "unset", meaning: "OTLP/HTTP base URL: spans per request and SQL statement" }
]

export class ConfigError extends Error {
  constructor(readonly variable: string, readonly problem: string) {
    super(`${variable}: ${problem}`)
  }
}

export interface AppConfig {
  readonly production: boolean
  readonly databaseUrl: string
  readonly redisUrl: string
  readonly rsaPrivateKey: string | undefined
  readonly autoGenerateKeys: boolean
  readonly rsaPreviousPublicKeys: ReadonlyArray<string>
  readonly jwtIssuer: string
  readonly port: number
  readonly host: string
  readonly publicBaseUrl: string
  readonly trustProxy: TrustProxy
  readonly vaultEncryptionKeys: string | undefined
  readonly didMethod: string
  readonly maxDelegationDepth: number
  readonly webauthn: { readonly rpId: string; readonly origin: string; readonly rpName: string }
  /** attestation trust anchors (decisions §17): root certificates and local metadata statements */
  readonly webauthnTrust: { readonly roots: ReadonlyArray<string>; readonly statements: ReadonlyArray<Record<string, unknown>> }
  readonly webhooks: {
    readonly allowPrivateHosts: boolean
    readonly pollIntervalSeconds: number
    readonly retryBaseSeconds: number
    readonly timeoutSeconds: number
    readonly maxAttempts: number
    /** endpoints a developer may have, per plan (null: no cap); decisions §16, §19 */
    readonly endpointLimits: { readonly free: number | null; readonly pro: number | null; readonly enterprise: number | null }
    /** sends in flight at once: per endpoint, per developer (across instances) and per instance */
    readonly endpointConcurrency: number
    readonly developerConcurrency: number
    readonly concurrency: number
  }
  readonly compliance: { readonly jobPollSeconds: number }
  /** decisions §12: the key of stored login states, the session lifetime, private providers (tests) */
  readonly sso: { readonly stateSecret: string; readonly sessionTtlSeconds: number; readonly allowPrivateHosts: boolean }
  /** decisions §14: the windowed rules' pass, per developer */
  readonly anomalies: { readonly intervalSeconds: number }
  readonly breaches: {
    readonly deadlineAlertsEnabled: boolean
    readonly alertLeadMinutes: number
    readonly alertIntervalSeconds: number
  }
  readonly rateLimits: RateLimitFigures
  /** decisions §13: built-in rules and Cedar always; OPA over HTTP when `backend` is "opa" */
  readonly policy: { readonly backend: "builtin" | "opa"; readonly opaUrl: string | undefined; readonly opaTimeoutMs: number }
  /** decisions §16: every plan's limits, fee and overage prices (defaults, WEBHOOK_ENDPOINTS_*, PLANS_FILE) */
  readonly plans: Plans
  readonly dnsResolver: string | undefined
  readonly metricsToken: string | undefined
  readonly logLevel: "debug" | "info" | "warn" | "error" | "none"
  /** where the embedded mode keeps generated secrets (vault key); derived from a pglite:// path */
  readonly dataDir: string | undefined
  readonly migrateOnStart: boolean
  /** prefix of every Redis key (tests give each app its own) */
  readonly redisKeyPrefix: string
  readonly workersEnabled: boolean
  /** open sign-up (POST /v1/signup); off, operators create developers with the binary */
  readonly signupEnabled: boolean
  /** OTLP/HTTP base URL for trace export; unset, tracing stays off */
  readonly otlpEndpoint: string | undefined
  /** decisions §18: the Ed25519 credential key (PEM), previous public keys, the did:web domain override */
  readonly vc: {
    readonly signingKey: string | undefined
    readonly previousPublicKeys: ReadonlyArray<string>
    readonly didWebDomain: string | undefined
  }
}

export interface RateLimitFigures {
  readonly planFree: number
  readonly planPro: number
  readonly planEnterprise: number
  readonly routeDefault: number
  readonly containment: number
  readonly revocationStatus: number
  readonly authorizePerDeveloper: number
  /** sign-ups per source address per clock hour */
  readonly signupPerHour: number
  readonly scale: number
}

export type TrustProxy =
  | { readonly _tag: "none" }
  | { readonly _tag: "hops"; readonly hops: number }
  | { readonly _tag: "cidrs"; readonly trusted: BlockList }

export class Config extends Context.Tag("agent-auth/Config")<Config, AppConfig>() {
  static layer = (config: AppConfig) => Layer.succeed(Config, config)
}

type Env = Record<string, string | undefined>

const required = (env: Env, name: string): string => {
  const value = env[name]
  if (value === undefined || value.trim() === "") throw new ConfigError(name, "is required but not set")
  return value.trim()
}

const integer = (env: Env, name: string, fallback: number, min = 0): number => {
  const raw = env[name]
  if (raw === undefined || raw.trim() === "") return fallback
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `must be a whole number, got "${raw}"`)
  const value = Number(raw.trim())
  if (value < min) throw new ConfigError(name, `must be at least ${min}`)
  return value
}

/** a whole number of at least 1, or "none" for no limit */
const limitOrNone = (env: Env, name: string, fallback: number | null): number | null =>
  env[name]?.trim() === "none" ? null : env[name] === undefined || env[name]!.trim() === "" ? fallback : integer(env, name, 1, 1)

const positiveNumber = (env: Env, name: string, fallback: number): number => {
  const raw = env[name]
  if (raw === undefined || raw.trim() === "") return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value <= 0) throw new ConfigError(name, `must be a positive number, got "${raw}"`)
  return value
}

const boolean = (env: Env, name: string): boolean => {
  const raw = env[name]
  if (raw === undefined || raw === "") return false
  if (raw === "true") return true
  if (raw === "false") return false
  throw new ConfigError(name, `must be "true" or "false", got "${raw}"`)
}

const url = (name: string, value: string, protocols: ReadonlyArray<string>): string => {
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

const parseTrustProxy = (raw: string | undefined): TrustProxy => {
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

const splitPems = (raw: string | undefined): ReadonlyArray<string> => {
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
const isRsaKey = (read: () => KeyObject): boolean => {
  try {
    return read().asymmetricKeyType === "rsa"
  } catch {
    return false
  }
}

/** `HOST`: an IP address or a host name to listen on */
const checkHost = (host: string): string => {
  if (isIP(host) === 0 && !/^[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*$/.test(host)) {
    throw new ConfigError("HOST", "must be an IP address or a host name")
  }
  return host
}

/** `WEBAUTHN_RP_ID`: a bare host name (no scheme, port or path), as WebAuthn requires */
const checkRpId = (rpId: string): string => {
  if (!/^[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*$/.test(rpId)) {
    throw new ConfigError("WEBAUTHN_RP_ID", "must be a bare host name, e.g. example.com")
  }
  return rpId
}

/** `WEBAUTHN_ORIGIN`: an http(s) origin (scheme, host, optional port; no path) */
const checkOrigin = (origin: string): string => {
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
const webauthnTrust = (env: Env): AppConfig["webauthnTrust"] => {
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
const checkResolver = (raw: string): string => {
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
const checkVaultKeys = (raw: string): void => {
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
const vcSigningKey = (env: Env, production: boolean): string | undefined => {
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
const vcPreviousKeys = (raw: string | undefined): ReadonlyArray<string> => {
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
const didWebDomain = (raw: string | undefined): string | undefined => {
  if (raw === undefined || raw.trim() === "") return undefined
  if (!/^[A-Za-z0-9]([A-Za-z0-9.-]{0,252})(%3A\d{1,5})?(:[A-Za-z0-9._-]+)*$/.test(raw.trim())) {
    throw new ConfigError("DID_WEB_DOMAIN", "must be a host name, e.g. auth.example.com or localhost%3A3001")
  }
  return raw.trim()
}

let processStateSecret: string | undefined

const ssoSettings = (env: Env, production: boolean): AppConfig["sso"] => {
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

const LOG_LEVELS = ["debug", "info", "warn", "error", "none"] as const

/** Reads and validates the environment. Throws ConfigError on the first bad variable. */
export const loadConfig = (env: Env = process.env): AppConfig => {
  const production = env.NODE_ENV === "production"
  const databaseUrl = url("DATABASE_URL", required(env, "DATABASE_URL"), ["postgres:", "postgresql:", "pglite:"])
  const redisUrl = url("REDIS_URL", required(env, "REDIS_URL"), ["redis:", "rediss:", "memory:"])
  // the database index is the path (redis://host:6379/2): anything else would silently mean db 0
  if (!redisUrl.startsWith("memory:") && !/^\/?(\d{1,5})?$/.test(new URL(redisUrl).pathname)) {
    throw new ConfigError("REDIS_URL", "the path must be a database index, e.g. redis://host:6379/0")
  }
  const autoGenerateKeys = boolean(env, "AUTO_GENERATE_KEYS")
  const rsaPrivateKey = env.RSA_PRIVATE_KEY?.trim() ? env.RSA_PRIVATE_KEY.replace(/\\n/g, "\n") : undefined
  if (rsaPrivateKey === undefined && !autoGenerateKeys) {
    throw new ConfigError("RSA_PRIVATE_KEY", "is required unless AUTO_GENERATE_KEYS=true")
  }
  if (rsaPrivateKey === undefined && production) {
    throw new ConfigError("RSA_PRIVATE_KEY", "is required in production (generated keys are for development)")
  }
  if (rsaPrivateKey !== undefined && (!rsaPrivateKey.includes("PRIVATE KEY-----") || !isRsaKey(() => createPrivateKey(rsaPrivateKey)))) {
    throw new ConfigError("RSA_PRIVATE_KEY", "must be a readable PEM RSA private key")
  }
  const vaultEncryptionKeys = env.VAULT_ENCRYPTION_KEYS?.trim() || undefined
  if (vaultEncryptionKeys === undefined && production) {
    throw new ConfigError("VAULT_ENCRYPTION_KEYS", "is required in production")
  }
  if (vaultEncryptionKeys !== undefined) checkVaultKeys(vaultEncryptionKeys)
  const vc = {
    signingKey: vcSigningKey(env, production),
    previousPublicKeys: vcPreviousKeys(env.VC_PREVIOUS_PUBLIC_KEYS),
    didWebDomain: didWebDomain(env.DID_WEB_DOMAIN)
  }
  const port = integer(env, "PORT", 3001)
  if (port > 65535) throw new ConfigError("PORT", "must be at most 65535")
  const publicBaseUrl = (env.PUBLIC_BASE_URL?.trim()
    ? url("PUBLIC_BASE_URL", env.PUBLIC_BASE_URL.trim(), ["http:", "https:"])
    : `http://localhost:${port}`).replace(/\/+$/, "")
  const logLevel = (env.LOG_LEVEL?.trim() || "info") as AppConfig["logLevel"]
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError("LOG_LEVEL", `must be one of ${LOG_LEVELS.join(", ")}`)
  const didMethod = env.DID_METHOD?.trim() || "service"
  if (!/^[a-z0-9]+$/.test(didMethod)) throw new ConfigError("DID_METHOD", "must be lowercase letters and digits")
  const jwtIssuer = env.JWT_ISSUER?.trim() || "https://agent-auth.local"
  // production refuses what exposes internals: private webhook receivers, a public /metrics
  if (production && env.WEBHOOK_ALLOW_PRIVATE_HOSTS === "true") {
    throw new ConfigError("WEBHOOK_ALLOW_PRIVATE_HOSTS", "must not be true in production")
  }
  if (production && env.SSO_ALLOW_PRIVATE_HOSTS === "true") {
    throw new ConfigError("SSO_ALLOW_PRIVATE_HOSTS", "must not be true in production")
  }
  const sso = ssoSettings(env, production)
  if (production && !env.METRICS_TOKEN?.trim()) {
    throw new ConfigError("METRICS_TOKEN", "is required in production (/metrics is not served publicly)")
  }
  const policyBackend = env.POLICY_BACKEND?.trim() || "builtin"
  if (policyBackend !== "builtin" && policyBackend !== "opa") throw new ConfigError("POLICY_BACKEND", "must be builtin or opa")
  const opaUrl = env.OPA_URL?.trim() ? url("OPA_URL", env.OPA_URL.trim(), ["http:", "https:"]) : undefined
  if (policyBackend === "opa" && opaUrl === undefined) throw new ConfigError("OPA_URL", "is required when POLICY_BACKEND=opa")
  const endpointLimits = {
    free: limitOrNone(env, "WEBHOOK_ENDPOINTS_FREE", 30),
    pro: limitOrNone(env, "WEBHOOK_ENDPOINTS_PRO", 200),
    enterprise: limitOrNone(env, "WEBHOOK_ENDPOINTS_ENTERPRISE", null)
  }
  let plans: Plans
  try {
    plans = loadPlans(endpointLimits, env.PLANS_FILE?.trim() || undefined)
  } catch (e) {
    throw new ConfigError("PLANS_FILE", e instanceof PlansProblem ? e.message : "is malformed")
  }
  const dataDir = databaseUrl.startsWith("pglite://") && databaseUrl !== "pglite://memory"
    ? databaseUrl.slice("pglite://".length)
    : undefined
  return {
    production,
    databaseUrl,
    redisUrl,
    rsaPrivateKey,
    autoGenerateKeys,
    rsaPreviousPublicKeys: splitPems(env.RSA_PREVIOUS_PUBLIC_KEYS),
    jwtIssuer,
    port,
    host: checkHost(env.HOST?.trim() || "0.0.0.0"),
    publicBaseUrl,
    trustProxy: parseTrustProxy(env.TRUST_PROXY),
    vaultEncryptionKeys,
    didMethod,
    maxDelegationDepth: integer(env, "MAX_DELEGATION_DEPTH", 3, 1),
    webauthn: {
      rpId: checkRpId(env.WEBAUTHN_RP_ID?.trim() || "localhost"),
      // by default the origin of PUBLIC_BASE_URL (an origin never has a path)
      origin: env.WEBAUTHN_ORIGIN?.trim() ? checkOrigin(env.WEBAUTHN_ORIGIN.trim()) : new URL(publicBaseUrl).origin,
      rpName: env.WEBAUTHN_RP_NAME?.trim() || "agent-auth-service"
    },
    webauthnTrust: webauthnTrust(env),
    webhooks: {
      allowPrivateHosts: boolean(env, "WEBHOOK_ALLOW_PRIVATE_HOSTS"),
      pollIntervalSeconds: positiveNumber(env, "WEBHOOK_POLL_INTERVAL_SECONDS", 30),
      retryBaseSeconds: positiveNumber(env, "WEBHOOK_RETRY_BASE_SECONDS", 30),
      timeoutSeconds: positiveNumber(env, "WEBHOOK_TIMEOUT_SECONDS", 10),
      maxAttempts: integer(env, "WEBHOOK_MAX_ATTEMPTS", 5, 1),
      // the plans' webhook caps (PLANS_FILE may change them); kept here for readers of the old field
      endpointLimits: {
        free: plans.free?.limits.webhooks ?? null,
        pro: plans.pro?.limits.webhooks ?? null,
        enterprise: plans.enterprise?.limits.webhooks ?? null
      },
      endpointConcurrency: integer(env, "WEBHOOK_ENDPOINT_CONCURRENCY", 4, 1),
      developerConcurrency: integer(env, "WEBHOOK_DEVELOPER_CONCURRENCY", 16, 1),
      concurrency: integer(env, "WEBHOOK_CONCURRENCY", 50, 1)
    },
    compliance: { jobPollSeconds: positiveNumber(env, "COMPLIANCE_JOB_POLL_SECONDS", 5) },
    sso,
    anomalies: { intervalSeconds: positiveNumber(env, "ANOMALY_INTERVAL_SECONDS", 300) },
    breaches: {
      deadlineAlertsEnabled: env.DPDP_BREACH_DEADLINE_ALERTS_ENABLED === "true",
      alertLeadMinutes: integer(env, "DPDP_BREACH_ALERT_LEAD_MINUTES", 1440),
      alertIntervalSeconds: positiveNumber(env, "DPDP_BREACH_ALERT_INTERVAL_SECONDS", 300)
    },
    rateLimits: {
      planFree: integer(env, "RATE_LIMIT_PLAN_FREE", 100, 1),
      planPro: integer(env, "RATE_LIMIT_PLAN_PRO", 500, 1),
      planEnterprise: integer(env, "RATE_LIMIT_PLAN_ENTERPRISE", 2000, 1),
      routeDefault: integer(env, "RATE_LIMIT_ROUTE_DEFAULT", 5000, 1),
      containment: integer(env, "RATE_LIMIT_CONTAINMENT", 2000, 1),
      revocationStatus: integer(env, "RATE_LIMIT_REVOCATION_STATUS", 6000, 1),
      authorizePerDeveloper: integer(env, "RATE_LIMIT_AUTHORIZE_PER_DEVELOPER", 10, 1),
      signupPerHour: integer(env, "RATE_LIMIT_SIGNUP_PER_HOUR", 10, 1),
      scale: positiveNumber(env, "RATE_LIMIT_SCALE", 1)
    },
    policy: { backend: policyBackend, opaUrl, opaTimeoutMs: integer(env, "OPA_TIMEOUT_MS", 2000, 1) },
    plans,
    dnsResolver: env.DNS_RESOLVER?.trim() ? checkResolver(env.DNS_RESOLVER.trim()) : undefined,
    metricsToken: env.METRICS_TOKEN?.trim() || undefined,
    logLevel,
    dataDir,
    migrateOnStart: env.MIGRATE_ON_START !== "false",
    redisKeyPrefix: env.REDIS_KEY_PREFIX?.trim() || "aas:",
    workersEnabled: env.WORKERS_ENABLED !== "false",
    signupEnabled: env.SIGNUP_ENABLED === undefined || env.SIGNUP_ENABLED === "" ? true : boolean(env, "SIGNUP_ENABLED"),
    otlpEndpoint: env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim()
      ? url("OTEL_EXPORTER_OTLP_ENDPOINT", env.OTEL_EXPORTER_OTLP_ENDPOINT.trim(), ["http:", "https:"]).replace(/\/+$/, "")
      : undefined,
    vc
  }
}
