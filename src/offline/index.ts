/**
 * The on-device kit: what an agent running on a phone or laptop needs to act on a consent bundle
 * while offline, and to hand its audit trail back later.
 *
 * Portable by design: no Node APIs. Hashing and signing use @noble/hashes and @noble/curves; the
 * RS256 check of the grant token uses Web Crypto (`crypto.subtle`, present in browsers, Bun, Deno and
 * Node ≥ 19; Node 18 and React Native pass one as `{ subtle }`).
 */
import { ed25519 } from "@noble/curves/ed25519.js"
import { bytesToHex, hexToBytes as nobleHexToBytes } from "@noble/hashes/utils.js"
import { GENESIS_HASH } from "./canonical.ts"
import { chainWithout, type SignedAuditEntry, signEntry } from "./chain.ts"
import { b64urlToBytes, ed25519PublicFromSpki, ed25519SeedFromPkcs8 } from "./encoding.ts"
import { checkEntryFields, checkRecordInput, type EntryResult, refusedByMessage } from "./validate.ts"

export { canonicalInput, delimiterFault, GENESIS_HASH, MAX_METADATA_BYTES, RESULTS } from "./canonical.ts"
export { hashEntry, type SignedAuditEntry } from "./chain.ts"
export { ed25519PublicFromSpki, ed25519SeedFromPkcs8 } from "./encoding.ts"
export { type EntryResult, OfflineEntryError } from "./validate.ts"

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

export interface SyncResult {
  readonly accepted: number
  readonly rejected: number
  readonly revocationStatus: "active" | "revoked"
  readonly revokedAt: string | null
  readonly errors: ReadonlyArray<{ readonly seq: number; readonly code: string; readonly message: string }>
}

/** An entry the service refused as part of a whole batch, kept aside (not sent again) with the reason. */
export interface RefusedEntry {
  readonly entry: SignedAuditEntry
  readonly reason: string
}

/** What `OfflineAgent.sync` did with one batch. */
export type SyncOutcome =
  | { readonly outcome: "synced" | "wiped"; readonly result: SyncResult }
  | { readonly outcome: "kept"; readonly reason: string; readonly httpStatus?: number; readonly retryAfterSeconds?: number }
  /** the service refused the batch as a whole (400): the entries it named are set aside, the rest stay queued */
  | { readonly outcome: "refused"; readonly reason: string; readonly refused: ReadonlyArray<SignedAuditEntry> }

/** the service's 400 INVALID_REQUEST: the batch refused as a whole, for an entry it will never take */
const refusedAsAWhole = (answer: unknown): boolean => (answer as { code?: unknown } | null)?.code === "INVALID_REQUEST"

const isCount = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0

/** Why `answer` is not a SyncResult for `batch`, or undefined when it is one that accounts for it. */
export const syncResultProblem = (batch: ReadonlyArray<SignedAuditEntry>, answer: unknown): string | undefined => {
  if (answer === null || typeof answer !== "object" || Array.isArray(answer)) return "the answer is not a SyncResult"
  const r = answer as Record<string, unknown>
  if (typeof r.code === "string") return `the server answered ${r.code}`
  if (!isCount(r.accepted) || !isCount(r.rejected) || !Array.isArray(r.errors) ||
    (r.revocationStatus !== "active" && r.revocationStatus !== "revoked") || (r.revokedAt !== null && typeof r.revokedAt !== "string")) {
    return "the answer is not a SyncResult"
  }
  const sent = new Set(batch.map((e) => e.seq))
  const errorsOk = r.errors.length === r.rejected && r.errors.every((x) =>
    x !== null && typeof x === "object" && sent.has((x as { seq?: unknown }).seq as number) && typeof (x as { code?: unknown }).code === "string"
  )
  if (!errorsOk || r.accepted + r.rejected !== batch.length) return "the SyncResult does not account for the sent batch"
  return undefined
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


/**
 * Web Crypto's `subtle`: the global one (browsers, Bun, Deno, Node 19+), or the one given (Node 18:
 * `(await import("node:crypto")).webcrypto.subtle`; React Native: a Web Crypto polyfill's).
 */
const subtleOf = (given: SubtleCrypto | undefined): SubtleCrypto => {
  const subtle = given ?? (globalThis as { crypto?: { subtle?: SubtleCrypto } }).crypto?.subtle
  if (subtle === undefined) throw new Error("no Web Crypto here: pass { subtle } (see the kit's README)")
  return subtle
}

/** Verifies the bundle's grant token offline: RS256 signature against the snapshot, `exp`, `validUntil`. */
export const verifyGrantToken = async (bundle: ConsentBundle, nowMs: number = Date.now(), subtle?: SubtleCrypto): Promise<GrantCheck> => {
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
    const key = await subtleOf(subtle).importKey(
      "jwk",
      { kty: jwk.kty, n: jwk.n, e: jwk.e, alg: "RS256", ext: true },
      { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
      false,
      ["verify"]
    )
    ok = await subtleOf(subtle).verify(
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
  /** entries the service refused in a whole-batch 400, with why (absent in states saved by older kits) */
  readonly refused?: ReadonlyArray<RefusedEntry>
}

export interface OfflineAgentOptions {
  readonly now?: () => number
  /** Web Crypto's `subtle` where there is no global one (Node 18, React Native) */
  readonly subtle?: SubtleCrypto
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
    private refused: Array<RefusedEntry>,
    private readonly now: () => number,
    private readonly subtle: SubtleCrypto | undefined
  ) {}

  private problem: string | null = null

  /** Loads a freshly created bundle; fails when its grant token does not verify offline. */
  static async load(bundle: ConsentBundle, options: OfflineAgentOptions = {}): Promise<OfflineAgent> {
    const now = options.now ?? Date.now
    const check = await verifyGrantToken(bundle, now(), options.subtle)
    if (!check.valid) throw new Error(`consent bundle rejected: ${check.reason}`)
    return new OfflineAgent(bundle, check.claims, 0, GENESIS_HASH, [], [], now, options.subtle)
  }

  static async restore(state: OfflineAgentState, options: OfflineAgentOptions = {}): Promise<OfflineAgent> {
    const now = options.now ?? Date.now
    const refused = [...(state.refused ?? [])]
    if (state.bundle === null) return new OfflineAgent(null, null, state.seq, state.lastHash, [...state.pending], refused, now, options.subtle)
    const check = await verifyGrantToken(state.bundle, now(), options.subtle)
    return new OfflineAgent(state.bundle, check.valid ? check.claims : null, state.seq, state.lastHash, [...state.pending], refused, now, options.subtle)
  }

  get state(): OfflineAgentState {
    return { bundle: this.bundle, seq: this.seq, lastHash: this.lastHash, pending: [...this.queue], refused: [...this.refused] }
  }

  /** Entries the service refused in a whole-batch 400, set aside with the reason (never sent again). */
  get refusedEntries(): ReadonlyArray<RefusedEntry> {
    return [...this.refused]
  }

  get wiped(): boolean {
    return this.bundle === null
  }

  /** Whether the agent may act now: token valid offline and the bundle not wiped. */
  async check(): Promise<GrantCheck> {
    if (this.bundle === null) return { valid: false, reason: "wiped" }
    return verifyGrantToken(this.bundle, this.now(), this.subtle)
  }

  /**
   * Appends a signed entry chained to the previous one. Throws an OfflineEntryError, recording
   * nothing, for an entry the service would refuse (checked at run time, whatever the types said):
   * a `result` other than success, auth_failure, scope_violation or execution_error, metadata that
   * is not a plain JSON object of at most 16 KiB, a delimiter inside a field.
   */
  record(action: string, result: EntryResult, metadata?: Record<string, unknown>): SignedAuditEntry {
    if (this.bundle === null || this.claims === null) throw new Error("no usable consent bundle")
    const inputProblem = checkRecordInput(action, result, metadata)
    if (inputProblem !== undefined) throw inputProblem
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
    const fault = checkEntryFields(fields)
    if (fault !== undefined) throw fault
    const entry = signEntry(fields, this.bundle.offlineAuditKey.privateKey)
    this.seq = entry.seq
    this.lastHash = entry.hash
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
   * Applies the server's answer to a batch (interface rule 5). Only a SyncResult that accounts for
   * every sent entry (accepted + rejected = the batch, each error naming one of its seqs) removes
   * them from the queue: rejected ones too, as the server would only reject them again
   * (`result.errors` says which and why). Anything else (an error body, a body of another shape, a
   * result for another batch) keeps the queue: "kept", and `lastSyncProblem` says why. On
   * `revoked` the agent stops and wipes the bundle (token and private key). The service's 400
   * INVALID_REQUEST (the batch refused as a whole) sets the entries it names aside: "refused".
   */
  applySyncResult(batch: ReadonlyArray<SignedAuditEntry>, answer: unknown): "synced" | "wiped" | "kept" | "refused" {
    // the service's 400 for the batch as a whole (an entry it will never take): set aside, never kept for good
    if (refusedAsAWhole(answer) && this.bundle !== null) {
      this.setAside(batch, answer)
      return "refused"
    }
    const problem = syncResultProblem(batch, answer)
    if (problem !== undefined) {
      this.problem = problem
      return "kept"
    }
    const result = answer as SyncResult
    this.problem = null
    const sent = new Set(batch.map((e) => e.seq))
    this.queue = this.queue.filter((e) => !sent.has(e.seq))
    if (result.revocationStatus === "revoked") {
      this.bundle = null
      this.claims = null
      return "wiped"
    }
    return "synced"
  }

  /** Why the last answer given to `applySyncResult` (or `sync`) kept the queue; null after a sync. */
  get lastSyncProblem(): string | null {
    return this.problem
  }

  /**
   * Sends one batch to the bundle's sync endpoint and applies the answer. Never throws for the
   * network or the server: a refused, dropped or timed-out connection, a non-200 answer (its code,
   * and Retry-After on 429) or a body that is not a SyncResult keep the queue and say why.
   */
  async sync(
    batch: ReadonlyArray<SignedAuditEntry>,
    options: { readonly apiKey: string; readonly fetch?: typeof fetch; readonly timeoutMs?: number }
  ): Promise<SyncOutcome> {
    const kept = (reason: string, extra: { httpStatus?: number; retryAfterSeconds?: number } = {}): SyncOutcome => {
      this.problem = reason
      return { outcome: "kept", reason, ...extra }
    }
    if (this.bundle === null) return kept("bundle wiped")
    const doFetch = options.fetch ?? fetch
    const abort = new AbortController()
    const timer = setTimeout(() => abort.abort(), options.timeoutMs ?? 30_000)
    let status: number
    let text: string
    let retryAfter: string | null
    try {
      const response = await doFetch(this.bundle.syncEndpoint, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${options.apiKey}` },
        body: JSON.stringify(this.syncRequest(batch)),
        signal: abort.signal
      })
      status = response.status
      retryAfter = response.headers.get("retry-after")
      text = await response.text()
    } catch (e) {
      return kept(abort.signal.aborted ? "no answer in time" : `network error: ${e instanceof Error ? e.message : String(e)}`)
    } finally {
      clearTimeout(timer)
    }
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      body = undefined
    }
    if (status === 400 && refusedAsAWhole(body)) return this.setAside(batch, body)
    if (status !== 200) {
      const code = typeof (body as { code?: unknown })?.code === "string" ? ` ${(body as { code: string }).code}` : ""
      const seconds = retryAfter !== null && /^\d+$/.test(retryAfter) ? Number(retryAfter) : undefined
      return kept(`HTTP ${status}${code}`, { httpStatus: status, ...(seconds !== undefined ? { retryAfterSeconds: seconds } : {}) })
    }
    const outcome = this.applySyncResult(batch, body)
    if (outcome === "kept" || outcome === "refused") return kept(this.problem!, { httpStatus: status })
    return { outcome, result: body as SyncResult }
  }

  /**
   * A batch refused as a whole would be refused again, and hold up every entry queued after it: the
   * entries the answer names (or the whole batch, when it names none) go aside with the reason, the
   * entries after them are chained again without them (chain.ts), and the next sync carries on.
   */
  private setAside(batch: ReadonlyArray<SignedAuditEntry>, body: unknown): SyncOutcome {
    const message = typeof (body as { message?: unknown }).message === "string" ? (body as { message: string }).message : "refused"
    const reason = `HTTP 400 INVALID_REQUEST: ${message}`
    const refused = refusedByMessage(batch, message)
    if (this.bundle === null) throw new Error("bundle wiped")
    const chained = chainWithout(this.queue, refused, this.bundle.offlineAuditKey.privateKey)
    this.queue = chained.queue
    this.seq = chained.seq
    this.lastHash = chained.lastHash
    this.refused.push(...refused.map((entry) => ({ entry, reason })))
    this.problem = reason
    return { outcome: "refused", reason, refused }
  }

  /** After POST /v1/consent-bundles/:id/refresh: new token and key; the chain carries on. */
  async replaceBundle(refreshed: ConsentBundle): Promise<void> {
    const check = await verifyGrantToken(refreshed, this.now(), this.subtle)
    if (!check.valid) throw new Error(`refreshed bundle rejected: ${check.reason}`)
    this.bundle = refreshed
    this.claims = check.claims
  }
}

export const publicKeyMatches = (bundle: ConsentBundle): boolean =>
  bytesToHex(ed25519.getPublicKey(ed25519SeedFromPkcs8(bundle.offlineAuditKey.privateKey))) ===
    bytesToHex(ed25519PublicFromSpki(bundle.offlineAuditKey.publicKey))

/** hex to bytes (the kit's own export, so its type declarations need no other package) */
export const hexToBytes = (hex: string): Uint8Array => nobleHexToBytes(hex)
