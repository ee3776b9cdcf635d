/**
 * Vault encryption (decisions §9): AES-256-GCM, a random 96-bit IV per encryption, additional
 * authenticated data binding the ciphertext to its row (credential id, developer, principal,
 * service), and the key id stored beside the ciphertext so keys rotate without downtime.
 *
 * Keys: VAULT_ENCRYPTION_KEYS = `kid:base64key,...` (first is active; the others still decrypt).
 * Outside production with no key: one is generated and kept in `<dataDir>/vault.key` (mode 0600)
 * when the service has a data directory (`npm run dev`), else one in-memory key per process (tests).
 */
import { Context, Data, Effect, Layer } from "effect"
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { type AppConfig, Config } from "../Config.ts"

export interface VaultKey {
  readonly kid: string
  readonly key: Buffer
}

export interface Keyring {
  readonly active: VaultKey
  readonly byKid: ReadonlyMap<string, VaultKey>
}

/** What is stored beside each row's secrets. */
export interface Sealed {
  readonly keyId: string
  /** base64 of the 12-byte IV */
  readonly iv: string
  /** base64 of ciphertext || 16-byte GCM tag */
  readonly ciphertext: string
}

/** The row a ciphertext belongs to; a ciphertext moved to another row fails to decrypt. */
export interface SealContext {
  readonly id: string
  readonly developerId: string
  readonly principalId: string
  readonly service: string
}

/** Decryption failed: unknown key id, tampered data or a ciphertext that belongs to another row. */
export class VaultDecryptError extends Data.TaggedError("VaultDecryptError")<{ readonly credentialId: string; readonly reason: string }> {}

export const aadFor = (c: SealContext): Buffer =>
  Buffer.from(JSON.stringify(["agent-auth.vault.v1", c.id, c.developerId, c.principalId, c.service]), "utf8")

/** Parses `kid:base64key,...` (Config has already validated it; this throws with the same care). */
export const parseKeyring = (raw: string): Keyring => {
  const keys: Array<VaultKey> = []
  for (const [i, entry] of raw.split(",").entries()) {
    const [kid, b64, extra] = entry.trim().split(":")
    const key = b64 === undefined ? Buffer.alloc(0) : Buffer.from(b64, "base64")
    if (!kid || extra !== undefined || key.length !== 32) {
      throw new Error(`VAULT_ENCRYPTION_KEYS: entry ${i + 1} must be kid:base64key with a 32-byte key`)
    }
    keys.push({ kid, key })
  }
  if (keys.length === 0) throw new Error("VAULT_ENCRYPTION_KEYS: no key")
  return { active: keys[0]!, byKid: new Map(keys.map((k) => [k.kid, k])) }
}

export const formatKey = (k: VaultKey) => `${k.kid}:${k.key.toString("base64")}`

let processKey: VaultKey | undefined

/** The key file of the embedded mode: created once (0600), then reused across restarts. */
const fileKey = (dataDir: string): VaultKey => {
  const path = join(dataDir, "vault.key")
  if (existsSync(path)) {
    const ring = parseKeyring(readFileSync(path, "utf8").trim())
    return ring.active
  }
  mkdirSync(dataDir, { recursive: true })
  const key: VaultKey = { kid: `local-${Date.now().toString(36)}`, key: randomBytes(32) }
  writeFileSync(path, formatKey(key) + "\n", { mode: 0o600, flag: "wx" })
  chmodSync(path, 0o600)
  return key
}

/**
 * The keyring for a configuration. `generate: false` (rekey) never invents a key: with nothing
 * configured and no key file there is nothing to rekey with.
 */
export const keyringFor = (config: AppConfig, options: { generate?: boolean } = {}): Keyring => {
  if (config.vaultEncryptionKeys !== undefined) return parseKeyring(config.vaultEncryptionKeys)
  if (config.production) throw new Error("VAULT_ENCRYPTION_KEYS: is required in production")
  const generate = options.generate ?? true
  if (config.dataDir !== undefined) {
    if (!generate && !existsSync(join(config.dataDir, "vault.key"))) {
      throw new Error("VAULT_ENCRYPTION_KEYS: is not set and no generated key exists")
    }
    const key = fileKey(config.dataDir)
    return { active: key, byKid: new Map([[key.kid, key]]) }
  }
  if (!generate) throw new Error("VAULT_ENCRYPTION_KEYS: is not set")
  processKey ??= { kid: `ephemeral-${Date.now().toString(36)}`, key: randomBytes(32) }
  return { active: processKey, byKid: new Map([[processKey.kid, processKey]]) }
}

export const seal = (ring: Keyring, context: SealContext, plaintext: string): Sealed => {
  const iv = randomBytes(12)
  const cipher = createCipheriv("aes-256-gcm", ring.active.key, iv)
  cipher.setAAD(aadFor(context))
  const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()])
  return { keyId: ring.active.kid, iv: iv.toString("base64"), ciphertext: body.toString("base64") }
}

/** Synchronous core; failures carry no key material and no plaintext. */
export const openSync = (ring: Keyring, context: SealContext, sealed: Sealed): string | VaultDecryptError => {
  const key = ring.byKid.get(sealed.keyId)
  if (key === undefined) return new VaultDecryptError({ credentialId: context.id, reason: `unknown key id ${sealed.keyId}` })
  try {
    const iv = Buffer.from(sealed.iv, "base64")
    const body = Buffer.from(sealed.ciphertext, "base64")
    if (iv.length !== 12 || body.length < 16) throw new Error("malformed")
    const decipher = createDecipheriv("aes-256-gcm", key.key, iv)
    decipher.setAAD(aadFor(context))
    decipher.setAuthTag(body.subarray(body.length - 16))
    return Buffer.concat([decipher.update(body.subarray(0, body.length - 16)), decipher.final()]).toString("utf8")
  } catch {
    return new VaultDecryptError({ credentialId: context.id, reason: "authentication failed" })
  }
}

export const open = (ring: Keyring, context: SealContext, sealed: Sealed): Effect.Effect<string, VaultDecryptError> =>
  Effect.suspend(() => {
    const result = openSync(ring, context, sealed)
    return typeof result === "string" ? Effect.succeed(result) : Effect.fail(result)
  })

/** The secrets of one credential, encrypted together as one JSON document. */
export interface Secrets {
  readonly accessToken: string
  readonly refreshToken?: string | null
  readonly clientId?: string | null
  readonly clientSecret?: string | null
}

export const sealSecrets = (ring: Keyring, context: SealContext, secrets: Secrets): Sealed =>
  seal(ring, context, JSON.stringify({
    accessToken: secrets.accessToken,
    refreshToken: secrets.refreshToken ?? null,
    clientId: secrets.clientId ?? null,
    clientSecret: secrets.clientSecret ?? null
  }))

export const openSecrets = (ring: Keyring, context: SealContext, sealed: Sealed): Effect.Effect<Secrets, VaultDecryptError> =>
  Effect.flatMap(open(ring, context, sealed), (text) =>
    Effect.try({
      try: () => JSON.parse(text) as Secrets,
      catch: () => new VaultDecryptError({ credentialId: context.id, reason: "malformed plaintext" })
    }))

export class VaultKeys extends Context.Tag("agent-auth/VaultKeys")<VaultKeys, Keyring>() {}

/** Fails the layer (startup) with one clear line when the keys cannot be loaded. */
export const VaultKeysLive = Layer.effect(
  VaultKeys,
  Effect.flatMap(Config, (config) =>
    Effect.try({
      try: () => keyringFor(config),
      catch: (e) => new Error(e instanceof Error ? e.message : String(e))
    }).pipe(
      // A database that outlives the process with a key that does not: say so once, at the start,
      // rather than let every exchange after a restart answer CREDENTIAL_UNREADABLE unexplained.
      Effect.tap(() =>
        config.vaultEncryptionKeys === undefined && config.dataDir === undefined && !config.databaseUrl.startsWith("pglite://")
          ? Effect.logWarning(
            "VAULT_ENCRYPTION_KEYS is not set: vault credentials are sealed with a key that lives only as long as this process " +
              "and cannot be read after a restart or by another instance; set VAULT_ENCRYPTION_KEYS"
          )
          : Effect.void
      )
    ))
)
