/**
 * The device's signed hash chain (decisions §5): an entry's hash is SHA-256 of its canonical input,
 * signed with the bundle's Ed25519 key. No platform APIs.
 */
import { ed25519 } from "@noble/curves/ed25519.js"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js"
import { canonicalInput, type EntryFields as CanonicalFields } from "./canonical.ts"
import { ed25519SeedFromPkcs8 } from "./encoding.ts"
import type { EntryResult } from "./validate.ts"

/** an entry as the device signs it: the canonical fields, with the kit's narrower result and metadata */
export interface SignedAuditEntry extends Omit<CanonicalFields, "result" | "metadata"> {
  readonly result: EntryResult
  readonly metadata?: Record<string, unknown>
  readonly hash: string
  readonly signature: string
}

export type UnsignedEntry = Omit<SignedAuditEntry, "hash" | "signature">

export const hashEntry = (fields: UnsignedEntry): string => bytesToHex(sha256(utf8ToBytes(canonicalInput(fields))))

export const signEntry = (fields: UnsignedEntry, privateKeyPem: string): SignedAuditEntry => {
  const hash = hashEntry(fields)
  return { ...fields, hash, signature: bytesToHex(ed25519.sign(utf8ToBytes(hash), ed25519SeedFromPkcs8(privateKeyPem))) }
}

/**
 * The queue without the refused entries, the unsent entries after them chained again (numbered on
 * from the last entry before the first refused one, re-signed with the bundle's key), so the
 * service sees an unbroken chain: the service stores no refused entry, and an entry chained to one
 * would be refused (SEQ_GAP) with every entry after it. Answers the new head too.
 */
export const chainWithout = (
  queue: ReadonlyArray<SignedAuditEntry>,
  refused: ReadonlyArray<SignedAuditEntry>,
  privateKeyPem: string
): { readonly queue: Array<SignedAuditEntry>; readonly seq: number; readonly lastHash: string } => {
  const gone = new Set(refused.map((e) => e.seq))
  const first = refused.reduce((a, b) => (b.seq < a.seq ? b : a))
  let seq = first.seq - 1
  let lastHash = first.prevHash
  const out: Array<SignedAuditEntry> = []
  for (const entry of queue) {
    if (gone.has(entry.seq)) continue
    if (entry.seq < first.seq) {
      out.push(entry)
      continue
    }
    const { hash: _hash, signature: _signature, ...fields } = entry
    const moved = signEntry({ ...fields, seq: ++seq, prevHash: lastHash }, privateKeyPem)
    lastHash = moved.hash
    out.push(moved)
  }
  return { queue: out, seq, lastHash }
}
