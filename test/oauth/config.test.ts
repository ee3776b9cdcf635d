/** The OAuth variables (decisions §22.9): defaults, bounds, https in production when set. */
import { describe, expect, test } from "bun:test"
import { randomBytes } from "node:crypto"
import { loadConfig } from "../../src/Config.ts"
import { generateEd25519Pem } from "../../src/credentials/Keys.ts"
import { testPrivateKey } from "../support/app.ts"

const cimd = { timeoutMs: 5000, maxBytes: 16_384, allowPrivateHosts: false }

const base = { DATABASE_URL: "pglite://memory", REDIS_URL: "memory://", RSA_PRIVATE_KEY: testPrivateKey(), PUBLIC_BASE_URL: "https://auth.example" }

describe("OAUTH_* configuration", () => {
  test("defaults follow PUBLIC_BASE_URL, 60 s codes, 10 min sign-ins", () => {
    expect(loadConfig(base).oauth).toEqual({ issuerBase: "https://auth.example", codeTtlMs: 60_000, interactionTtlMs: 600_000, cimd })
    expect(loadConfig({ ...base, OAUTH_ISSUER_BASE: "https://id.example/", OAUTH_CODE_TTL: "30s", OAUTH_INTERACTION_TTL: "5m" }).oauth)
      .toEqual({ issuerBase: "https://id.example", codeTtlMs: 30_000, interactionTtlMs: 300_000, cimd })
    expect(loadConfig({ ...base, OAUTH_CIMD_TIMEOUT_MS: "300", OAUTH_CIMD_MAX_BYTES: "2048", OAUTH_ALLOW_PRIVATE_HOSTS: "true" }).oauth.cimd)
      .toEqual({ timeoutMs: 300, maxBytes: 2048, allowPrivateHosts: true })
  })

  test("out of bounds or malformed values stop the start, naming the variable", () => {
    expect(() => loadConfig({ ...base, OAUTH_CODE_TTL: "1h" })).toThrow("OAUTH_CODE_TTL")
    expect(() => loadConfig({ ...base, OAUTH_INTERACTION_TTL: "soon" })).toThrow("OAUTH_INTERACTION_TTL")
    expect(() => loadConfig({ ...base, OAUTH_ISSUER_BASE: "ftp://x" })).toThrow("OAUTH_ISSUER_BASE")
    expect(() => loadConfig({ ...base, OAUTH_CIMD_TIMEOUT_MS: "5s" })).toThrow("OAUTH_CIMD_TIMEOUT_MS")
    expect(() => loadConfig({ ...base, OAUTH_CIMD_MAX_BYTES: "100" })).toThrow("OAUTH_CIMD_MAX_BYTES")
  })

  test("OAUTH_ALLOW_PRIVATE_HOSTS=true is refused in production", () => {
    const production = {
      ...base, NODE_ENV: "production", VAULT_ENCRYPTION_KEYS: `k1:${randomBytes(32).toString("base64")}`, METRICS_TOKEN: "metrics-secret",
      VC_SIGNING_KEY: generateEd25519Pem(), SSO_STATE_SECRET: "sso-state-secret-of-at-least-32-characters"
    }
    expect(loadConfig(production).oauth.cimd.allowPrivateHosts).toBe(false)
    expect(() => loadConfig({ ...production, OAUTH_ALLOW_PRIVATE_HOSTS: "true" })).toThrow("OAUTH_ALLOW_PRIVATE_HOSTS")
  })
})
