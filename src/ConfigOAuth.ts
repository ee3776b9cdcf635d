/** The OAuth server's settings (decisions §22.9), parsed like the rest of the configuration. */
import { ConfigError } from "./ConfigParsing.ts"

type Env = Readonly<Record<string, string | undefined>>

const duration = (env: Env, name: string, fallback: string, minSeconds: number, maxSeconds: number) => {
  const text = env[name]?.trim() || fallback
  const match = /^(\d+)([smh])$/.exec(text)
  const seconds = match === null ? undefined : Number(match[1]) * ({ s: 1, m: 60, h: 3600 } as const)[match[2] as "s" | "m" | "h"]
  if (seconds === undefined || seconds < minSeconds || seconds > maxSeconds) throw new ConfigError(name, `must be a duration like ${fallback}, from ${minSeconds}s to ${maxSeconds}s`)
  return seconds * 1000
}

const integer = (env: Env, name: string, fallback: number, min: number, max: number) => {
  const text = env[name]?.trim()
  if (!text) return fallback
  const n = /^\d+$/.test(text) ? Number(text) : NaN
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new ConfigError(name, `must be a whole number from ${min} to ${max}`)
  return n
}

export const oauthSettings = (env: Env, production: boolean, publicBaseUrl: string) => {
  const given = env.OAUTH_ISSUER_BASE?.trim()
  let issuerBase = publicBaseUrl
  if (given) {
    let parsed: URL
    try {
      parsed = new URL(given)
    } catch {
      throw new ConfigError("OAUTH_ISSUER_BASE", "must be an absolute http(s) URL")
    }
    if (parsed.protocol !== "https:" && parsed.protocol !== "http:") throw new ConfigError("OAUTH_ISSUER_BASE", "must be an absolute http(s) URL")
    if (parsed.search !== "" || parsed.hash !== "") throw new ConfigError("OAUTH_ISSUER_BASE", "must not have a query or fragment")
    issuerBase = given.replace(/\/+$/, "")
  }
  // (an unset base follows PUBLIC_BASE_URL, whose own rules apply)
  if (production && given && !issuerBase.startsWith("https://")) throw new ConfigError("OAUTH_ISSUER_BASE", "must use https in production")
  // decisions §22.3: CIMD documents are fetched under the outbound rules; private hosts and http are for tests only
  const allowPrivateHosts = env.OAUTH_ALLOW_PRIVATE_HOSTS?.trim() === "true"
  if (production && allowPrivateHosts) throw new ConfigError("OAUTH_ALLOW_PRIVATE_HOSTS", "must not be true in production")
  return {
    issuerBase,
    cimd: {
      timeoutMs: integer(env, "OAUTH_CIMD_TIMEOUT_MS", 5000, 50, 60_000),
      maxBytes: integer(env, "OAUTH_CIMD_MAX_BYTES", 16_384, 1024, 1_048_576),
      allowPrivateHosts
    },
    codeTtlMs: duration(env, "OAUTH_CODE_TTL", "60s", 10, 600),
    interactionTtlMs: duration(env, "OAUTH_INTERACTION_TTL", "10m", 60, 3600)
  }
}
