/**
 * The credential keys (decisions §18): the Ed25519 key that signs credentials and status lists, and
 * the previous public keys that still verify credentials signed before a rotation.
 *
 * VC_SIGNING_KEY (PEM) is required in production. Outside it, with no key, one is generated once and
 * kept in `<dataDir>/vc-signing.key` (mode 0600) when the service has a data directory (`npm run dev`),
 * else one per process (tests), so the DID document does not change at every restart.
 * `kid` is the RFC 7638 thumbprint of the public JWK; the JWS header carries `<issuer DID>#<kid>`.
 */
import { Context, Effect, Layer } from "effect"
import * as jose from "jose"
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { type AppConfig, Config } from "../Config.ts"

export interface Ed25519Jwk {
  readonly kty: "OKP"
  readonly crv: "Ed25519"
  readonly x: string
}

export interface VcPublicKey {
  readonly kid: string
  readonly jwk: Ed25519Jwk
  readonly key: KeyObject
  /** Multikey `publicKeyMultibase`: base58btc of the ed25519-pub multicodec prefix and the raw key */
  readonly multibase: string
}

export interface VcKeyService {
  /** did:web of PUBLIC_BASE_URL's host (DID_WEB_DOMAIN overrides) */
  readonly did: string
  readonly current: VcPublicKey
  /** current first, then previous keys */
  readonly all: ReadonlyArray<VcPublicKey>
  readonly byKid: ReadonlyMap<string, VcPublicKey>
  /** compact JWS over the payload, header `{ alg: EdDSA, kid: <did>#<kid>, ...header }` */
  readonly sign: (payload: Record<string, unknown>, header: Record<string, unknown>) => Effect.Effect<string>
}

export class VcKeys extends Context.Tag("agent-auth/VcKeys")<VcKeys, VcKeyService>() {}

const BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

export const base58btc = (bytes: Uint8Array): string => {
  let n = 0n
  for (const b of bytes) n = n * 256n + BigInt(b)
  let out = ""
  while (n > 0n) {
    out = BASE58[Number(n % 58n)] + out
    n /= 58n
  }
  for (const b of bytes) {
    if (b !== 0) break
    out = "1" + out
  }
  return out
}

/** did:web method-specific id: the host, its port percent-encoded */
export const didWebFor = (config: AppConfig): string => {
  if (config.vc.didWebDomain !== undefined) return `did:web:${config.vc.didWebDomain}`
  const url = new URL(config.publicBaseUrl)
  return `did:web:${url.hostname}${url.port ? `%3A${url.port}` : ""}`
}

export const publicKeyOf = async (key: KeyObject): Promise<VcPublicKey> => {
  const { x } = key.export({ format: "jwk" }) as { x: string }
  const jwk: Ed25519Jwk = { kty: "OKP", crv: "Ed25519", x }
  const kid = await jose.calculateJwkThumbprint(jwk, "sha256")
  const raw = Buffer.from(x, "base64url")
  return { kid, jwk, key, multibase: "z" + base58btc(Buffer.concat([Buffer.from([0xed, 0x01]), raw])) }
}

export const generateEd25519Pem = (): string =>
  generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()

let processKey: string | undefined

/** The key file of the embedded mode: created once (0600), then reused across restarts. */
const fileKey = (dataDir: string): string => {
  const path = join(dataDir, "vc-signing.key")
  if (existsSync(path)) return readFileSync(path, "utf8")
  mkdirSync(dataDir, { recursive: true })
  const pem = generateEd25519Pem()
  writeFileSync(path, pem, { mode: 0o600, flag: "wx" })
  chmodSync(path, 0o600)
  return pem
}

export const signingKeyPem = (config: AppConfig): string => {
  if (config.vc.signingKey !== undefined) return config.vc.signingKey
  if (config.production) throw new Error("VC_SIGNING_KEY: is required in production")
  if (config.dataDir !== undefined) return fileKey(config.dataDir)
  return (processKey ??= generateEd25519Pem())
}

export const makeVcKeys = async (config: AppConfig): Promise<VcKeyService> => {
  const privateKey = createPrivateKey(signingKeyPem(config))
  if (privateKey.asymmetricKeyType !== "ed25519") throw new Error("VC_SIGNING_KEY: must be an Ed25519 key")
  const current = await publicKeyOf(createPublicKey(privateKey))
  const previous = await Promise.all(config.vc.previousPublicKeys.map((pem) => publicKeyOf(createPublicKey(pem))))
  const all = [current, ...previous.filter((k) => k.kid !== current.kid)]
  const did = didWebFor(config)
  const sign = (payload: Record<string, unknown>, header: Record<string, unknown>) =>
    Effect.promise(() =>
      new jose.CompactSign(new TextEncoder().encode(JSON.stringify(payload)))
        .setProtectedHeader({ ...header, alg: "EdDSA", kid: `${did}#${current.kid}` })
        .sign(privateKey)
    )
  return { did, current, all, byKid: new Map(all.map((k) => [k.kid, k])), sign }
}

/** Fails the start with one line when the key cannot be loaded. */
export const VcKeysLive = Layer.effect(
  VcKeys,
  Effect.flatMap(Config, (config) =>
    Effect.tryPromise({
      try: () => makeVcKeys(config),
      catch: (e) => new Error(e instanceof Error ? e.message : String(e))
    }))
)
