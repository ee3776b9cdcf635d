/**
 * Offline audit sync (interface: Offline audit sync; decisions §5).
 *
 * 1. The body is validated (400 INVALID_REQUEST) and counted (413 above 1000 entries) before any work.
 * 2. Hashes are recomputed here and signatures checked on the verifier pool, outside any lock.
 * 3. Under the bundle's row lock (concurrent syncs of one bundle take turns) each entry is judged in
 *    order against the stored head: DUPLICATE_SEQ, INVALID_HASH, INVALID_SIGNATURE, SEQ_GAP,
 *    BROKEN_CHAIN, else accepted. A rejected entry still serves as `prev` for the next one.
 * 4. Accepted entries are inserted in one statement that also moves the head and the counters. The
 *    insert is made while signatures are still being checked, as if all hold; when one does not,
 *    the batch is judged again and the rows put right in the same transaction.
 * Entries are stored for expired and revoked bundles too: what happened offline is never lost.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import { Metrics } from "../platform/Metrics.ts"
import { canonicalInput, canonicalInputWithMetadata, delimiterFault, MAX_METADATA_BYTES, RESULTS, utf8Length } from "../offline/canonical.ts"
import { BundleNotFound, InvalidRequest, PayloadTooLarge } from "../platform/Errors.ts"
import { sha256Hex } from "../platform/Hash.ts"
import { nowMillis } from "../platform/Time.ts"
import { metadataAsSent } from "./MetadataAsSent.ts"
import { Verifier, VerifierLive } from "./Verifier.ts"

export const MAX_ENTRIES = 1000

export interface SignedEntry {
  readonly seq: number
  readonly timestamp: string
  readonly action: string
  readonly agentDID: string
  readonly grantId: string
  readonly scopes: ReadonlyArray<string>
  readonly result: string
  readonly metadata?: unknown
  readonly prevHash: string
  readonly hash: string
  readonly signature: string
}

export interface SyncResult {
  readonly accepted: number
  readonly rejected: number
  readonly revocationStatus: "active" | "revoked"
  readonly revokedAt: string | null
  readonly errors: Array<{ seq: number; code: string; message: string }>
}

const invalid = (message: string) => new InvalidRequest({ message: message })

const STRING_FIELDS = ["timestamp", "action", "agentDID", "grantId", "result", "prevHash", "hash", "signature"] as const

/** Shape checks of decisions §5 step 1; the first problem is reported with its path. */
export const parseBody = (body: unknown): Effect.Effect<{ bundleId: string; entries: ReadonlyArray<SignedEntry> }, InvalidRequest | PayloadTooLarge> => {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return Effect.fail(invalid("Body must be a JSON object"))
  const { bundleId, entries } = body as { bundleId?: unknown; entries?: unknown }
  if (typeof bundleId !== "string" || bundleId.length === 0) return Effect.fail(invalid("bundleId is required"))
  if (!Array.isArray(entries)) return Effect.fail(invalid("entries must be an array"))
  if (entries.length > MAX_ENTRIES) {
    return Effect.fail(new PayloadTooLarge({ message: `At most ${MAX_ENTRIES} entries per sync request` }))
  }
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i] as Record<string, unknown>
    if (e === null || typeof e !== "object" || Array.isArray(e)) return Effect.fail(invalid(`entries[${i}] must be an object`))
    if (typeof e.seq !== "number" || !Number.isSafeInteger(e.seq) || e.seq < 1) {
      return Effect.fail(invalid(`entries[${i}].seq must be a positive integer`))
    }
    for (const field of STRING_FIELDS) {
      if (typeof e[field] !== "string") return Effect.fail(invalid(`entries[${i}].${field} must be a string`))
    }
    if (!Array.isArray(e.scopes) || e.scopes.some((s) => typeof s !== "string")) {
      return Effect.fail(invalid(`entries[${i}].scopes must be an array of strings`))
    }
    if (e.metadata !== undefined && (e.metadata === null || typeof e.metadata !== "object" || Array.isArray(e.metadata))) {
      return Effect.fail(invalid(`entries[${i}].metadata must be an object when present`))
    }
    if (e.metadata !== undefined && utf8Length(JSON.stringify(e.metadata)) > MAX_METADATA_BYTES) {
      return Effect.fail(invalid(`entries[${i}].metadata must be at most ${MAX_METADATA_BYTES} bytes of JSON`))
    }
    if (!(RESULTS as ReadonlyArray<string>).includes(e.result as string)) {
      return Effect.fail(invalid(`entries[${i}].result must be one of ${RESULTS.join(", ")}`))
    }
  }
  return Effect.succeed({ bundleId, entries: entries as ReadonlyArray<SignedEntry> })
}

export interface OfflineSyncService {
  /** `rawBody`, the request text, lets metadata be hashed in its written key order (decisions §5) */
  readonly sync: (developerId: string, body: unknown, rawBody?: string) => Effect.Effect<SyncResult, InvalidRequest | PayloadTooLarge | BundleNotFound>
}

export class OfflineSync extends Context.Tag("agent-auth/OfflineSync")<OfflineSync, OfflineSyncService>() {}

interface Judgement {
  readonly accepted: number
  readonly errors: Array<{ seq: number; code: string; message: string }>
  /** the entries to store, with their position in the batch */
  readonly toStore: Array<{ readonly entry: SignedEntry; readonly index: number }>
  readonly head: { readonly seq: number; readonly hash: string }
}

/**
 * Judges each entry in order against what is stored (decisions §5 step 3). `signatureOk` undefined
 * judges as if every signature verified. A rejected entry still serves as `prev` for the next one.
 */
export const judge = (
  entries: ReadonlyArray<SignedEntry>,
  hashOk: ReadonlyArray<boolean>,
  faults: ReadonlyArray<string | undefined>,
  signatureOk: Uint8Array | undefined,
  existing: ReadonlyArray<{ seq: string; hash: string }>,
  storedHead: { readonly seq: number; readonly hash: string }
): Judgement => {
  const known = new Map(existing.map((r) => [Number(r.seq), r.hash]))
  let prev = storedHead
  let head = storedHead
  const errors: Array<{ seq: number; code: string; message: string }> = []
  const toStore: Array<{ entry: SignedEntry; index: number }> = []
  let accepted = 0
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!
    const stored = known.get(e.seq)
    if (stored !== undefined) {
      if (stored === e.hash) accepted++
      else errors.push({ seq: e.seq, code: "DUPLICATE_SEQ", message: `Sequence number ${e.seq} already exists with a different hash` })
    } else if (!hashOk[i]) {
      errors.push({ seq: e.seq, code: "INVALID_HASH", message: faults[i] ?? "Recomputed hash differs from hash" })
    } else if (signatureOk !== undefined && signatureOk[i] !== 1) {
      errors.push({ seq: e.seq, code: "INVALID_SIGNATURE", message: "Signature does not verify against the bundle's audit key" })
    } else if (e.seq !== prev.seq + 1) {
      errors.push({ seq: e.seq, code: "SEQ_GAP", message: `Expected sequence number ${prev.seq + 1}` })
    } else if (e.prevHash !== prev.hash) {
      errors.push({ seq: e.seq, code: "BROKEN_CHAIN", message: "prevHash differs from the previous entry's hash" })
    } else {
      toStore.push({ entry: e, index: i })
      known.set(e.seq, e.hash)
      accepted++
      if (e.seq > head.seq) head = { seq: e.seq, hash: e.hash }
    }
    prev = { seq: e.seq, hash: e.hash }
  }
  return { accepted, errors, toStore, head }
}

/** the statement of `storeEntries` (exported so the benchmark's floor sends the same text) */
export const STORE_ENTRIES_SQL = `WITH inserted AS (
           INSERT INTO offline_audit_entries (bundle_id, developer_id, seq, timestamp, action, agent_did, grant_id, scopes,
                                              result, metadata, prev_hash, hash, signature, received_at)
           SELECT $1, $2, u.seq, u.timestamp, u.action, u.agent_did, u.grant_id, u.scopes,
                  u.result, u.metadata, u.prev_hash, u.hash, u.signature, $3
           FROM jsonb_to_recordset($4::jsonb)
                AS u(seq bigint, timestamp text, action text, agent_did text, grant_id text, scopes jsonb, result text,
                     metadata text, prev_hash text, hash text, signature text)
           RETURNING 1
         )
         UPDATE consent_bundles SET
           audit_entry_count = audit_entry_count + (SELECT count(*) FROM inserted),
           head_seq = $5, head_hash = $6, last_sync_at = $3
         WHERE id = $1`

export const OfflineSyncServiceLive = Layer.effect(
  OfflineSync,
  Effect.gen(function*() {
    const metrics = yield* Metrics
    const sql = yield* SqlClient.SqlClient
    const verifier = yield* Verifier

    /** One statement: the entries to store, the head, lastSyncAt and auditEntryCount. */
    const storeEntries = (bundleId: string, developerId: string, at: Date, judgement: Judgement, metadataText: ReadonlyArray<string | undefined>) =>
      sql.unsafe(
        STORE_ENTRIES_SQL,
        [
          bundleId, developerId, at,
          // one JSON document: serialised natively here and parsed natively by PostgreSQL
          JSON.stringify(judgement.toStore.map(({ entry: e, index }) => ({
            seq: e.seq, timestamp: e.timestamp, action: e.action, agent_did: e.agentDID, grant_id: e.grantId,
            // the metadata text the hash was made over, so the stored chain re-hashes as it was signed
            scopes: e.scopes, result: e.result, metadata: e.metadata === undefined ? null : metadataText[index] ?? JSON.stringify(e.metadata),
            prev_hash: e.prevHash, hash: e.hash, signature: e.signature
          }))),
          judgement.head.seq, judgement.head.hash
        ] as any
      )

    const sync: OfflineSyncService["sync"] = (developerId, body, rawBody) =>
      Effect.gen(function*() {
        const { bundleId, entries } = yield* parseBody(body)
        // the current audit key and the one before it (decisions §5): older ones no longer sign for the bundle
        const keyRows = yield* sql<{ publicKeyPem: string }>`
          SELECT k.public_key_pem FROM consent_bundle_audit_keys k JOIN consent_bundles b ON b.id = k.bundle_id
          WHERE b.id = ${bundleId} AND b.developer_id = ${developerId}
          ORDER BY k.generation DESC LIMIT 2`.pipe(Effect.orDie)
        if (keyRows.length === 0) return yield* Effect.fail(new BundleNotFound({ message: "Consent bundle not found" }))

        // Signatures are checked on the verifier pool (over the claimed hashes) while the hashes are
        // recomputed here and the transaction below takes the lock, reads what is stored and
        // writes, so all of it overlaps.
        const verification = yield* verifier.start(
          entries.map((e) => e.hash),
          entries.map((e) => e.signature),
          keyRows.map((k) => k.publicKeyPem)
        )
        // an entry whose fields hold a delimiter has no unique hash input: INVALID_HASH whatever its hash
        const faults = entries.map(delimiterFault)
        const hashOk = entries.map((e, i) => faults[i] === undefined && sha256Hex(canonicalInput(e)) === e.hash)
        // An entry whose metadata has keys JSON.parse moves (integer-like ones) is hashed again over
        // its metadata in written order; only such entries pay for the second reading of the body.
        const metadataText: Array<string | undefined> = []
        let asSent: Array<string | undefined> | undefined | null = null
        for (let i = 0; i < entries.length; i++) {
          const e = entries[i]!
          if (hashOk[i] || faults[i] !== undefined || e.metadata === undefined || rawBody === undefined) continue
          asSent ??= metadataAsSent(rawBody)
          const text = asSent?.[i]
          if (text === undefined || text === JSON.stringify(e.metadata)) continue
          if (sha256Hex(canonicalInputWithMetadata(e, text)) === e.hash) {
            hashOk[i] = true
            metadataText[i] = text
          }
        }

        return yield* sql.withTransaction(Effect.gen(function*() {
          const ms = yield* nowMillis
          const [bundle] = yield* sql<{
            headSeq: string
            headHash: string
            status: string
            revokedAt: Date | null
            grantStatus: string
            grantRevokedAt: Date | null
          }>`SELECT b.head_seq, b.head_hash, b.status, b.revoked_at, g.status AS grant_status, g.revoked_at AS grant_revoked_at
             FROM consent_bundles b JOIN grants g ON g.id = b.grant_id
             WHERE b.id = ${bundleId} AND b.developer_id = ${developerId} FOR UPDATE OF b`
          // what is stored in the batch's seq range (one primary-key range scan)
          let low = Infinity
          let high = -Infinity
          for (const e of entries) {
            if (e.seq < low) low = e.seq
            if (e.seq > high) high = e.seq
          }
          const existing = entries.length === 0
            ? []
            : yield* sql<{ seq: string; hash: string }>`
              SELECT seq, hash FROM offline_audit_entries WHERE bundle_id = ${bundleId} AND seq BETWEEN ${low} AND ${high}`
          const storedHead = { seq: Number(bundle!.headSeq), hash: bundle!.headHash }
          // The entries are stored while their signatures are still being checked, judged as if every
          // signature holds (the usual case); the database writes overlap the verification.
          const hoped = judge(entries, hashOk, faults, undefined, existing, storedHead)
          const at = new Date(ms)
          yield* storeEntries(bundleId, developerId, at, hoped, metadataText)
          const signatureOk = yield* verification
          let outcome = hoped
          if (signatureOk.some((ok) => ok !== 1)) {
            // A signature failed: the batch is judged again with the real results (the order of the
            // checks decides each entry's code, and a rejected entry changes what later entries of
            // the batch are compared with). Rows stored in hope, all new under the bundle's lock,
            // are replaced by the right ones when the two judgements differ.
            outcome = judge(entries, hashOk, faults, signatureOk, existing, storedHead)
            const sameRows = outcome.toStore.length === hoped.toStore.length &&
              outcome.toStore.every((e, n) => e.index === hoped.toStore[n]!.index)
            if (!sameRows) {
              if (hoped.toStore.length > 0) {
                yield* sql`DELETE FROM offline_audit_entries
                           WHERE bundle_id = ${bundleId} AND seq IN ${sql.in(hoped.toStore.map((e) => e.entry.seq))}`
              }
              yield* sql`UPDATE consent_bundles SET audit_entry_count = audit_entry_count - ${hoped.toStore.length},
                           head_seq = ${storedHead.seq}, head_hash = ${storedHead.hash} WHERE id = ${bundleId}`
              yield* storeEntries(bundleId, developerId, at, outcome, metadataText)
            }
          }
          const { accepted, errors } = outcome
          const revokedAt = bundle!.revokedAt ?? (bundle!.grantStatus === "revoked" ? bundle!.grantRevokedAt : null)
          return {
            accepted,
            rejected: errors.length,
            revocationStatus: revokedAt === null ? "active" as const : "revoked" as const,
            revokedAt: revokedAt?.toISOString() ?? null,
            errors
          }
        })).pipe(Effect.orDie, Effect.tap(countEntries))
      })

    /** after commit: accepted entries, and rejected ones by their code (a fixed set) */
    const countEntries = (result: { accepted: number; errors: ReadonlyArray<{ code: string }> }) =>
      Effect.sync(() => {
        if (result.accepted > 0) metrics.inc("offline_entries_total", { result: "accepted" }, result.accepted)
        const byCode = new Map<string, number>()
        for (const e of result.errors) byCode.set(e.code, (byCode.get(e.code) ?? 0) + 1)
        for (const [code, n] of byCode) metrics.inc("offline_entries_total", { result: "rejected", code }, n)
      })

    return { sync }
  })
)

/** (the verifier pool is in the runtime too, so the benchmark's floor checks on the same workers) */
export const OfflineSyncLive = OfflineSyncServiceLive.pipe(Layer.provideMerge(VerifierLive))
