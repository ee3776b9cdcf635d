import { describe, expect, test } from "bun:test"
import { randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ConfigError, loadConfig } from "../../src/Config.ts"
import { keyringFor, openSync, parseKeyring, seal } from "../../src/vault/Crypto.ts"
import { startTestApp, testPrivateKey } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"

const base = { DATABASE_URL: "pglite://memory", REDIS_URL: "memory://", AUTO_GENERATE_KEYS: "true" }
const k = () => randomBytes(32).toString("base64")

describe("VAULT_ENCRYPTION_KEYS", () => {
  test("well-formed lists are accepted; the first key is active", () => {
    const a = k()
    const b = k()
    const config = loadConfig({ ...base, VAULT_ENCRYPTION_KEYS: `k2:${a}, k1:${b}` })
    const ring = keyringFor(config)
    expect(ring.active.kid).toBe("k2")
    expect([...ring.byKid.keys()]).toEqual(["k2", "k1"])
    expect(ring.byKid.get("k1")!.key.toString("base64")).toBe(b)
  })

  test("malformed values fail configuration with one line naming the variable and no key material", () => {
    const secret = randomBytes(16).toString("base64")
    for (const raw of [`k1:${secret}`, "k1", `k1:${k()},k1:${k()}`, `bad kid:${k()}`, `k1:${k()}:x`, "k1:@@@@", `:${k()}`, `k1:${k()},`]) {
      let error: unknown
      try {
        loadConfig({ ...base, VAULT_ENCRYPTION_KEYS: raw })
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(ConfigError)
      expect((error as ConfigError).variable).toBe("VAULT_ENCRYPTION_KEYS")
      expect((error as Error).message).not.toContain(secret)
      expect((error as Error).message).not.toContain("\n")
    }
  })

  test("production refuses to start without a key", () => {
    expect(() => loadConfig({ ...base, NODE_ENV: "production", RSA_PRIVATE_KEY: testPrivateKey() })).toThrow(/VAULT_ENCRYPTION_KEYS/)
  })

  test("`agent-auth serve` with a malformed key exits 1 with one line on stderr", async () => {
    const proc = Bun.spawn([process.execPath, "src/main.ts", "serve"], {
      env: { ...process.env, ...base, PORT: "0", VAULT_ENCRYPTION_KEYS: "k1:c2hvcnQ=" },
      stdout: "pipe",
      stderr: "pipe"
    })
    const code = await proc.exited
    const stderr = await new Response(proc.stderr).text()
    expect(code).toBe(1)
    expect(stderr.trim().split("\n")).toHaveLength(1)
    expect(stderr).toContain("VAULT_ENCRYPTION_KEYS")
  })

  test("seal/open: round trip, wrong row, wrong key, tampered bytes", () => {
    const ring = parseKeyring(`k1:${k()}`)
    const row = { id: "vcred_1", developerId: "dev_1", principalId: "p", service: "github" }
    const sealed = seal(ring, row, "secret")
    expect(openSync(ring, row, sealed)).toBe("secret")
    for (const other of [{ ...row, id: "vcred_2" }, { ...row, developerId: "dev_2" }, { ...row, principalId: "q" }, { ...row, service: "gitlab" }]) {
      expect(openSync(ring, other, sealed)).toMatchObject({ _tag: "VaultDecryptError" })
    }
    expect(openSync(parseKeyring(`k1:${k()}`), row, sealed)).toMatchObject({ _tag: "VaultDecryptError" })
    expect(openSync(ring, row, { ...sealed, keyId: "k9" })).toMatchObject({ _tag: "VaultDecryptError", reason: "unknown key id k9" })
    const bytes = Buffer.from(sealed.ciphertext, "base64")
    bytes[0]! ^= 1
    expect(openSync(ring, row, { ...sealed, ciphertext: bytes.toString("base64") })).toMatchObject({ _tag: "VaultDecryptError" })
    // every encryption uses a fresh IV
    expect(seal(ring, row, "secret").iv).not.toBe(sealed.iv)
  })
})

describe("embedded mode without a configured key", () => {
  test("a key is generated once into <dataDir>/vault.key (0600) and credentials survive a restart", async () => {
    const dir = mkdtempSync(join(tmpdir(), "aas-vault-"))
    try {
      const url = `pglite://${dir}`
      const first = await startTestApp({ databaseUrl: url })
      let token: string
      try {
        const dev = await first.signup()
        const agent = await createAgent(first, dev.developerId, ["github:read"])
        const { token: t } = await issueGrant(first, { developerId: dev.developerId, agentId: agent, scopes: ["github:read"] })
        token = t.grantToken
        const stored = await first.request("POST", "/v1/vault/credentials", {
          apiKey: dev.apiKey,
          body: { principalId: "user_1", service: "github", accessToken: "gho_persisted" }
        })
        expect(stored.status).toBe(201)
      } finally {
        await first.stop()
      }
      const path = join(dir, "vault.key")
      expect(statSync(path).mode & 0o777).toBe(0o600)
      const keyText = readFileSync(path, "utf8")
      expect(() => parseKeyring(keyText.trim())).not.toThrow()

      const second = await startTestApp({ databaseUrl: url })
      try {
        const res = await second.request("POST", "/v1/vault/credentials/exchange", { bearer: token, body: { service: "github" } })
        expect(res.status).toBe(200)
        expect(res.body.accessToken).toBe("gho_persisted")
      } finally {
        await second.stop()
      }
      expect(readFileSync(path, "utf8")).toBe(keyText)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)
})
