/**
 * The on-device kit: what an agent running on a phone or laptop needs to act on a consent bundle
 * while offline, and to hand its audit trail back later.
 *
 * Portable by design: no Node APIs. Hashing and signing use @noble/hashes and @noble/curves; the
 * RS256 check of the grant token uses Web Crypto (`crypto.subtle`, present in browsers, Bun, Deno,
 * Node ≥ 19 and React Native with a Web Crypto polyfill).
 */
import { ed25519 } from "@noble/curves/ed25519.js"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, hexToBytes, utf8ToBytes } from "@noble/hashes/utils.js"
import { canonicalInput, GENESIS_HASH } from "./canonical.ts"

export { canonicalInput, GENESIS_HASH } from "./canonical.ts"

export interface Jwk {
  readonly kty: string
  readonly kid: string
  readonly n: string
  readonly e: string
  readonly alg: string
  readonly use: string
}

/** The create / refresh response of POST /v1/consent-bundles. */
export interface ConsentBundle {
  readonly bundleId: string
  readonly grantToken: string
  readonly jwksSnapshot: { readonly keys: ReadonlyArray<Jwk>; readonly fetchedAt: string; readonly validUntil: string }
  readonly offlineAuditKey: { readonly publicKey: string; readonly privateKey: string; readonly algorithm: string }
  readonly checkpointAt: number
  readonly syncEndpoint: string
  readonly offlineExpiresAt: string
}

export type EntryResult = "success" | "auth_failure" | "scope_violation" | "execution_error"

export interface SignedAuditEntry {
  readonly seq: number
  readonly timestamp: string
  readonly action: string
  readonly agentDID: string
  readonly grantId: string
  readonly scopes: ReadonlyArray<string>
  readonly result: EntryResult
  readonly metadata?: Record<string, unknown>
  readonly prevHash: string
  readonly hash: string
  readonly signature: string
}

export interface SyncResult {
  readonly accepted: number
  readonly rejected: number
  readonly revocationStatus: "active" | "revoked"
  readonly revokedAt: string | null
  readonly errors: ReadonlyArray<{ readonly seq: number; readonly code: string; readonly message: string }>
}

export interface GrantClaims {
  readonly sub: string
  readonly agt: string
  readonly dev: string
  readonly scp: ReadonlyArray<string>
  readonly jti: string
  readonly grnt: string
  readonly exp: number
  readonly iat: number
  readonly iss: string
}

export type GrantCheck =
  | { readonly valid: true; readonly claims: GrantClaims }
  | { readonly valid: false; readonly reason: "malformed" | "unknown_key" | "bad_signature" | "expired" | "snapshot_expired" | "wiped" }

/** Recommended batch sizes of the interface: metered mobile link, small device on Wi-Fi, server. */
export const BATCH_SIZES = { metered: 50, wifi: 100, server: 500 } as const
export const MAX_BATCH = 1000

const b64urlToBytes = (s: string): Uint8Array<ArrayBuffer> => {
  const base64 = s.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(s.length / 4) * 4, "=")
  const binary = atob(base64)
  const out = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i)
  return out
}

const pemBody = (pem: string): Uint8Array =>
  b64urlToBytes(pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "").replace(/\+/g, "-").replace(/\//g, "_"))

/** The 32-byte Ed25519 seed at the end of a PKCS#8 PEM (RFC 8410). */
export const ed25519SeedFromPkcs8 = (pem: string): Uint8Array => {
  const der = pemBody(pem)
  if (der.length !== 48) throw new Error("not an Ed25519 PKCS#8 private key")
  return der.slice(16)
}

/** The raw 32-byte Ed25519 public key at the end of an SPKI PEM. */
export const ed25519PublicFromSpki = (pem: string): Uint8Array => {
  const der = pemBody(pem)
  if (der.length !== 44) throw new Error("not an Ed25519 SPKI public key")
  return der.slice(12)
}

export const hashEntry = (fields: Omit<SignedAuditEntry, "hash" | "signature">): string =>
  bytesToHex(sha256(utf8ToBytes(canonicalInput(fields))))

/** Verifies the bundle's grant token offline: RS256 signature against the snapshot, `exp`, `validUntil`. */
export const verifyGrantToken = async (bundle: ConsentBundle, nowMs: number = Date.now()): Promise<GrantCheck> => {
  const parts = bundle.grantToken.split(".")
  if (parts.length !== 3) return { valid: false, reason: "malformed" }
  let header: { alg?: string; kid?: string }
  let claims: GrantClaims
  try {
    header = JSON.parse(new TextDecoder().decode(b64urlToBytes(parts[0]!)))
    claims = JSON.parse(new TextDecoder().decode(b64urlToBytes(parts[1]!)))
  } catch {
    return { valid: false, reason: "malformed" }
  }
  if (header.alg !== "RS256") return { valid: false, reason: "malformed" }
  const jwk = bundle.jwksSnapshot.keys.find((k) => k.kid === header.kid)
  if (jwk === undefined) return { valid: false, reason: "unknown_key" }
  let ok: boolean
  try {
    const key = await crypto.subtle.importKey(
      "jwk",
      { kty: jwk.kty, n: jwk.n, e: jwk.e, alg: "RS256", ext: true },
      { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
      false,
      ["verify"]
    )
    ok = await crypto.subtle.verify(
      "RSASSA-PKCS1-v1_5",
      key,
      b64urlToBytes(parts[2]!) as Uint8Array<ArrayBuffer>,
      new TextEncoder().encode(`${parts[0]}.${parts[1]}`)
    )
  } catch {
    // a snapshot key or a signature that cannot even be read: the token is not to be trusted
    ok = false
  }
  if (!ok) return { valid: false, reason: "bad_signature" }
  if (typeof claims.exp !== "number" || claims.exp * 1000 <= nowMs) return { valid: false, reason: "expired" }
  if (Date.parse(bundle.jwksSnapshot.validUntil) <= nowMs) return { valid: false, reason: "snapshot_expired" }
  return { valid: true, claims }
}

export interface OfflineAgentState {
  readonly bundle: ConsentBundle | null
  readonly seq: number
  readonly lastHash: string
  readonly pending: ReadonlyArray<SignedAuditEntry>
}

/**
 * An agent acting on one consent bundle. Keep `state` in the device's storage between runs and
 * pass it back to `OfflineAgent.restore`.
 */
export class OfflineAgent {
  private constructor(
    private bundle: ConsentBundle | null,
    private claims: GrantClaims | null,
    private seq: number,
    private lastHash: string,
    private queue: Array<SignedAuditEntry>,
    private readonly now: () => number
  ) {}

  /** Loads a freshly created bundle; fails when its grant token does not verify offline. */
  static async load(bundle: ConsentBundle, options: { now?: () => number } = {}): Promise<OfflineAgent> {
    const now = options.now ?? Date.now
    const check = await verifyGrantToken(bundle, now())
    if (!check.valid) throw new Error(`consent bundle rejected: ${check.reason}`)
    return new OfflineAgent(bundle, check.claims, 0, GENESIS_HASH, [], now)
  }

  static async restore(state: OfflineAgentState, options: { now?: () => number } = {}): Promise<OfflineAgent> {
    const now = options.now ?? Date.now
    if (state.bundle === null) return new OfflineAgent(null, null, state.seq, state.lastHash, [...state.pending], now)
    const check = await verifyGrantToken(state.bundle, now())
    return new OfflineAgent(state.bundle, check.valid ? check.claims : null, state.seq, state.lastHash, [...state.pending], now)
  }

  get state(): OfflineAgentState {
    return { bundle: this.bundle, seq: this.seq, lastHash: this.lastHash, pending: [...this.queue] }
  }

  get wiped(): boolean {
    return this.bundle === null
  }

  /** Whether the agent may act now: token valid offline and the bundle not wiped. */
  async check(): Promise<GrantCheck> {
    if (this.bundle === null) return { valid: false, reason: "wiped" }
    return verifyGrantToken(this.bundle, this.now())
  }

  /** Appends a signed entry chained to the previous one. */
  record(action: string, result: EntryResult, metadata?: Record<string, unknown>): SignedAuditEntry {
    if (this.bundle === null || this.claims === null) throw new Error("no usable consent bundle")
    const fields = {
      seq: this.seq + 1,
      timestamp: new Date(this.now()).toISOString(),
      action,
      agentDID: this.claims.agt,
      grantId: this.claims.grnt,
      scopes: [...this.claims.scp],
      result,
      ...(metadata !== undefined ? { metadata } : {}),
      prevHash: this.lastHash
    }
    const hash = hashEntry(fields)
    const signature = bytesToHex(ed25519.sign(utf8ToBytes(hash), ed25519SeedFromPkcs8(this.bundle.offlineAuditKey.privateKey)))
    const entry: SignedAuditEntry = { ...fields, hash, signature }
    this.seq = entry.seq
    this.lastHash = hash
    this.queue.push(entry)
    return entry
  }

  /** Entries not yet synced, in batches of `size` (50, 100 or 500 recommended; at most 1000). */
  batches(size: number = BATCH_SIZES.wifi): Array<Array<SignedAuditEntry>> {
    if (!Number.isInteger(size) || size < 1 || size > MAX_BATCH) throw new Error(`batch size must be 1..${MAX_BATCH}`)
    const out: Array<Array<SignedAuditEntry>> = []
    for (let i = 0; i < this.queue.length; i += size) out.push(this.queue.slice(i, i + size))
    return out
  }

  /** The body of POST /v1/audit/offline-sync for one batch. */
  syncRequest(batch: ReadonlyArray<SignedAuditEntry>): { bundleId: string; entries: ReadonlyArray<SignedAuditEntry> } {
    if (this.bundle === null) throw new Error("bundle wiped")
    return { bundleId: this.bundle.bundleId, entries: batch }
  }

  /**
   * Applies the server's answer to a batch (interface rule 5): the sent entries are synced and leave
   * the queue (an entry the server rejected would only be rejected again; `result.errors` says which
   * and why); on `revoked` the agent stops and wipes the bundle (token and private key), keeping
   * nothing it could act with.
   */
  applySyncResult(batch: ReadonlyArray<SignedAuditEntry>, result: SyncResult): "synced" | "wiped" {
    const sent = new Set(batch.map((e) => e.seq))
    this.queue = this.queue.filter((e) => !sent.has(e.seq))
    if (result.revocationStatus === "revoked") {
      this.bundle = null
      this.claims = null
      return "wiped"
    }
    return "synced"
  }

  /** After POST /v1/consent-bundles/:id/refresh: new token and key; the chain carries on. */
  async replaceBundle(refreshed: ConsentBundle): Promise<void> {
    const check = await verifyGrantToken(refreshed, this.now())
    if (!check.valid) throw new Error(`refreshed bundle rejected: ${check.reason}`)
    this.bundle = refreshed
    this.claims = check.claims
  }
}

export const publicKeyMatches = (bundle: ConsentBundle): boolean =>
  bytesToHex(ed25519.getPublicKey(ed25519SeedFromPkcs8(bundle.offlineAuditKey.privateKey))) ===
    bytesToHex(ed25519PublicFromSpki(bundle.offlineAuditKey.publicKey))

export { hexToBytes }
