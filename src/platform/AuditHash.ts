/**
 * The audit chain's hash (decisions §3), with no service around it: the chain (AuditChain.ts) and the
 * auditor's export verifier (compliance/ExportVerifier.ts, which runs on plain Node) share it.
 *
 * hash = SHA-256 hex of the canonical JSON (sorted keys) of
 *   { id, agentId, agentDid, grantId, principalId, developerId, action, metadata, timestamp, prevHash, status }
 * with prevHash null for the first entry.
 *
 * Hash version 2 (decisions §21, every entry written since migration 0045): the same canonical JSON
 * with `principalId` and `metadata` replaced by `principalDigest` = SHA-256 hex(salt ‖ UTF-8 principal
 * id) (null when none) and `metadataDigest` = SHA-256 hex(salt ‖ canonical JSON of metadata), plus
 * `hashVersion: 2`; the salt is 16 random bytes per entry. Erasure deletes the salt and keeps the
 * digests, so the entry still verifies while its digests of guessable ids cannot be reversed.
 */
import { createHash, randomBytes } from "node:crypto"

export interface AuditEntry {
  readonly entryId: string
  readonly agentId: string | null
  readonly agentDid: string | null
  readonly grantId: string | null
  readonly principalId: string | null
  readonly developerId: string
  readonly action: string
  readonly metadata: Record<string, unknown>
  readonly hash: string
  readonly prevHash: string | null
  readonly timestamp: string
  readonly status: string
  /** decisions §21: absent or 1 for entries written before hash version 2 */
  readonly hashVersion?: number
  readonly piiSalt?: string | null
  readonly principalDigest?: string | null
  readonly metadataDigest?: string | null
  readonly erased?: boolean
}

/** RFC 8785-style canonical JSON: object keys sorted, no whitespace. */
export const canonicalJson = (value: unknown): string => {
  if (value === null || typeof value !== "object") return JSON.stringify(value ?? null)
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  const keys = Object.keys(value as Record<string, unknown>).filter((k) => (value as any)[k] !== undefined).sort()
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as any)[k])}`).join(",")}}`
}

const json = JSON.stringify

/**
 * SHA-256 of canonicalJson of the entry's fields. The fields are written out in their sorted order
 * (the same bytes canonicalJson makes, without sorting keys per entry); metadata, whose keys are not
 * known, still goes through canonicalJson. A field left undefined (omitted by canonicalJson) takes
 * the general path.
 */
export const entryHash = (e: Omit<AuditEntry, "hash" | "entryId"> & { id: string }): string => {
  const complete = e.id !== undefined && e.agentId !== undefined && e.agentDid !== undefined && e.grantId !== undefined &&
    e.principalId !== undefined && e.developerId !== undefined && e.action !== undefined && e.metadata !== undefined &&
    e.timestamp !== undefined && e.prevHash !== undefined && e.status !== undefined
  const canonical = complete
    ? `{"action":${json(e.action)},"agentDid":${json(e.agentDid)},"agentId":${json(e.agentId)},"developerId":${json(e.developerId)},` +
      `"grantId":${json(e.grantId)},"id":${json(e.id)},"metadata":${canonicalJson(e.metadata)},"prevHash":${json(e.prevHash)},` +
      `"principalId":${json(e.principalId)},"status":${json(e.status)},"timestamp":${json(e.timestamp)}}`
    : canonicalJson({
      id: e.id,
      agentId: e.agentId,
      agentDid: e.agentDid,
      grantId: e.grantId,
      principalId: e.principalId,
      developerId: e.developerId,
      action: e.action,
      metadata: e.metadata,
      timestamp: e.timestamp,
      prevHash: e.prevHash,
      status: e.status
    })
  return createHash("sha256").update(canonical).digest("hex")
}

const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex")

/** SHA-256 hex of salt ‖ UTF-8 text (hash version 2's digests) */
export const saltedDigest = (saltHex: string, text: string) =>
  sha256(Buffer.concat([Buffer.from(saltHex, "hex"), Buffer.from(text, "utf8")]))

export const newPiiSalt = () => randomBytes(16).toString("hex")

/** the digests of hash version 2 for an entry's principal and metadata */
export const piiDigests = (saltHex: string, principalId: string | null, metadata: Record<string, unknown>) => ({
  principalDigest: principalId === null ? null : saltedDigest(saltHex, principalId),
  metadataDigest: saltedDigest(saltHex, canonicalJson(metadata))
})

export interface EntryV2Fields {
  readonly id: string
  readonly agentId: string | null
  readonly agentDid: string | null
  readonly grantId: string | null
  readonly principalDigest: string | null
  readonly developerId: string
  readonly action: string
  readonly metadataDigest: string
  readonly timestamp: string
  readonly prevHash: string | null
  readonly status: string
}

/** stands in for prevHash's value while the canonical text is split around it */
const PREV_HASH_MARKER = "\u0000prev"
const PREV_HASH_KEY = `"prevHash":`

/**
 * Hash version 2's canonical text split around prevHash's value: the hash is SHA-256 hex of
 * before ‖ JSON(prevHash) ‖ after. The chain's one-statement append (AuditChain.ts) hashes these
 * parts in PostgreSQL around the head it locks; entryHashV2 hashes the same bytes here. The key and
 * marker are found together: a string value cannot hold an unescaped quote, so the pair is unique.
 */
export const entryV2HashParts = (e: Omit<EntryV2Fields, "prevHash">): { readonly before: string; readonly after: string } => {
  const text = canonicalJson({
    id: e.id, agentId: e.agentId, agentDid: e.agentDid, grantId: e.grantId, principalDigest: e.principalDigest,
    developerId: e.developerId, action: e.action, metadataDigest: e.metadataDigest, timestamp: e.timestamp,
    prevHash: PREV_HASH_MARKER, status: e.status, hashVersion: 2
  })
  const needle = PREV_HASH_KEY + json(PREV_HASH_MARKER)
  const at = text.indexOf(needle) + PREV_HASH_KEY.length
  return { before: text.slice(0, at), after: text.slice(at + needle.length - PREV_HASH_KEY.length) }
}

/** hash version 2: SHA-256 of the canonical JSON of the entry with digests in place of principal and metadata */
export const entryHashV2 = (e: EntryV2Fields): string => {
  const { before, after } = entryV2HashParts(e)
  return sha256(before + json(e.prevHash) + after)
}

/**
 * What one entry's own fields prove (the chain's links are the caller's): `ok` when its hash holds;
 * `linkOnly` for an erased version-1 entry (tombstoned: its hash is kept and only its links are
 * checked). A version-2 entry is checked whole: its digests against its salt while the salt exists,
 * then its hash over the digests.
 */
export const checkEntry = (e: Omit<AuditEntry, "entryId"> & { readonly id: string }): { ok: boolean; linkOnly: boolean } => {
  if (e.hashVersion === 2) {
    const principalDigest = e.principalDigest ?? null
    const metadataDigest = e.metadataDigest ?? ""
    if (e.piiSalt !== null && e.piiSalt !== undefined) {
      const d = piiDigests(e.piiSalt, e.principalId, e.metadata)
      if (d.principalDigest !== principalDigest || d.metadataDigest !== metadataDigest) return { ok: false, linkOnly: false }
    }
    return {
      ok: entryHashV2({
        id: e.id, agentId: e.agentId, agentDid: e.agentDid, grantId: e.grantId, principalDigest, developerId: e.developerId,
        action: e.action, metadataDigest, timestamp: e.timestamp, prevHash: e.prevHash, status: e.status
      }) === e.hash,
      linkOnly: false
    }
  }
  if (e.erased === true) return { ok: true, linkOnly: true }
  const { hashVersion: _v, piiSalt: _s, principalDigest: _p, metadataDigest: _m, erased: _e, hash, ...v1 } = e
  return { ok: entryHash(v1) === hash, linkOnly: false }
}
