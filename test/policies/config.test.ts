/** decisions §13: the policy variables are checked at start like the others (one line naming the variable). */
import { expect, test } from "bun:test"
import { ConfigError, loadConfig } from "../../src/Config.ts"

const base = { DATABASE_URL: "pglite://memory", REDIS_URL: "memory://", AUTO_GENERATE_KEYS: "true" }
const problem = (env: Record<string, string>) => {
  try {
    loadConfig({ ...base, ...env })
    return undefined
  } catch (e) {
    return e instanceof ConfigError ? e.variable : String(e)
  }
}

test("POLICY_BACKEND, OPA_URL and OPA_TIMEOUT_MS", () => {
  expect(loadConfig(base).policy).toEqual({ backend: "builtin", opaUrl: undefined, opaTimeoutMs: 2000 })
  expect(problem({ POLICY_BACKEND: "cedar-http" })).toBe("POLICY_BACKEND")
  expect(problem({ POLICY_BACKEND: "opa" })).toBe("OPA_URL")
  expect(problem({ POLICY_BACKEND: "opa", OPA_URL: "ftp://opa" })).toBe("OPA_URL")
  expect(problem({ OPA_TIMEOUT_MS: "soon" })).toBe("OPA_TIMEOUT_MS")
  expect(loadConfig({ ...base, POLICY_BACKEND: "opa", OPA_URL: "https://opa.example.com", OPA_TIMEOUT_MS: "500" }).policy)
    .toEqual({ backend: "opa", opaUrl: "https://opa.example.com", opaTimeoutMs: 500 })
})
