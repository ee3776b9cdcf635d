/**
 * decisions §18: stable credential keys. VC_SIGNING_KEY is validated at start; the embedded mode keeps
 * a generated key in its data directory; a credential issued before a rotation still verifies after
 * it (VC_PREVIOUS_PUBLIC_KEYS), and its old key stays in did.json only while such credentials live.
 */
import { afterAll, describe, expect, test } from "bun:test"
import { createPublicKey } from "node:crypto"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ConfigError, loadConfig } from "../../src/Config.ts"
import { generateEd25519Pem, makeVcKeys } from "../../src/credentials/Keys.ts"
import { createDatabase, startTestApp, testPrivateKey, usingRealPostgres } from "../support/app.ts"
import { bitstringStatus, joseVerify, payloadOf, resolveDid, routeTo, sandbox, sdJwtVc } from "./support.ts"

const dirs: Array<string> = []
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "aas-vc-"))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const base = { DATABASE_URL: "pglite://memory", REDIS_URL: "memory://", RSA_PRIVATE_KEY: testPrivateKey() }

describe("configuration", () => {
  test("VC_SIGNING_KEY: required in production, must be an Ed25519 private key; previous keys Ed25519 public keys", () => {
    const production = { ...base, NODE_ENV: "production", METRICS_TOKEN: "metrics-secret", SSO_STATE_SECRET: "sso-state-secret-of-at-least-32-characters", VAULT_ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 1).toString("base64")}` }
    const problem = (env: Record<string, string>) => {
      try {
        loadConfig(env)
      } catch (e) {
        return e instanceof ConfigError ? e.variable : String(e)
      }
      return undefined
    }
    expect(problem(production)).toBe("VC_SIGNING_KEY")
    expect(problem({ ...production, VC_SIGNING_KEY: generateEd25519Pem() })).toBeUndefined()
    expect(problem({ ...base, VC_SIGNING_KEY: testPrivateKey() })).toBe("VC_SIGNING_KEY")
    expect(problem({ ...base, VC_SIGNING_KEY: "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----" })).toBe("VC_SIGNING_KEY")
    expect(problem({ ...base, VC_PREVIOUS_PUBLIC_KEYS: "garbage" })).toBe("VC_PREVIOUS_PUBLIC_KEYS")
    const rsaPublic = createPublicKey(testPrivateKey()).export({ type: "spki", format: "pem" }).toString()
    expect(problem({ ...base, VC_PREVIOUS_PUBLIC_KEYS: rsaPublic })).toBe("VC_PREVIOUS_PUBLIC_KEYS")
    expect(problem({ ...base, DID_WEB_DOMAIN: "https://x.example/" })).toBe("DID_WEB_DOMAIN")
    expect(loadConfig({ ...base, DID_WEB_DOMAIN: "auth.example.com" }).vc.didWebDomain).toBe("auth.example.com")
  })

  test("embedded mode: a generated key is kept in the data directory (0600) and reused after a restart", async () => {
    const dir = tempDir()
    const config = loadConfig({ ...base, DATABASE_URL: `pglite://${dir}` })
    const first = await makeVcKeys(config)
    const again = await makeVcKeys(config)
    expect(again.current.kid).toBe(first.current.kid)
    expect(statSync(join(dir, "vc-signing.key")).mode & 0o777).toBe(0o600)
    expect(first.did).toBe("did:web:localhost%3A3001")
  })
})

describe("rotation", () => {
  test("a credential issued before a rotation verifies after it, and reads revoked when its grant is revoked; the old key leaves did.json with its last credential", async () => {
    const db = usingRealPostgres ? await createDatabase() : { url: `pglite://${tempDir()}`, drop: async () => {} }
    const k1 = generateEd25519Pem()
    const k2 = generateEd25519Pem()
    const pub1 = createPublicKey(k1).export({ type: "spki", format: "pem" }).toString()
    const env = { RATE_LIMIT_SCALE: "100", PUBLIC_BASE_URL: "http://localhost:3001" }
    try {
      const before = await startTestApp({ databaseUrl: db.url, env: { ...env, VC_SIGNING_KEY: k1 } })
      routeTo(before)
      const dev = await sandbox(before)
      const issued = await dev.token({ credentialFormat: "vc-jwt" })
      const vc = issued.body.verifiableCredential as string
      const sdJwt = (await dev.token({ credentialFormat: "sd-jwt" })).body.sdJwtCredential as string
      const oldKid = (await joseVerify(vc)).protectedHeader.kid!
      await before.stop()

      const after = await startTestApp({ databaseUrl: db.url, env: { ...env, VC_SIGNING_KEY: k2, VC_PREVIOUS_PUBLIC_KEYS: pub1 } })
      routeTo(after)
      try {
        const { didDocument } = await resolveDid(oldKid.split("#")[0]!)
        expect(didDocument!.assertionMethod).toHaveLength(2)
        expect(didDocument!.assertionMethod).toContain(oldKid)
        expect((await joseVerify(vc)).payload.issuer).toBe(didDocument!.id)
        expect((await after.request("POST", "/v1/credentials/verify", { body: { credential: vc } })).body).toMatchObject({ valid: true })
        expect((await sdJwtVc().verify(sdJwt)).payload.grantId).toBeString()
        // the status list is signed again with the new key; the old credential still reads through it
        const entry = payloadOf(vc).credentialStatus[0]
        expect(await bitstringStatus(entry)).toBe(false)
        await after.request("DELETE", `/v1/grants/${issued.body.grantId}`, { apiKey: dev.apiKey })
        expect(await bitstringStatus(entry)).toBe(true)
        expect((await after.request("POST", "/v1/credentials/verify", { body: { credential: vc } })).body).toMatchObject({ valid: false, revoked: true })
        const list = await after.request("GET", new URL(entry.statusListCredential).pathname)
        expect(JSON.parse(Buffer.from(list.text.split(".")[0]!, "base64url").toString()).kid).not.toBe(oldKid)
        await after.query("UPDATE vc_credentials SET expires_at = now() - interval '1 second'")
      } finally {
        await after.stop()
      }
      // no credential signed by the old key lives: it is no longer published
      const later = await startTestApp({ databaseUrl: db.url, env: { ...env, VC_SIGNING_KEY: k2, VC_PREVIOUS_PUBLIC_KEYS: pub1 } })
      try {
        expect((await later.request("GET", "/.well-known/did.json")).body.assertionMethod).toHaveLength(1)
      } finally {
        await later.stop()
      }
    } finally {
      await db.drop()
    }
  })
})
