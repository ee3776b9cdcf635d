/**
 * The canonical hash input of an offline audit entry (decisions §5), byte-compatible with the
 * existing on-device SDK:
 *   String(seq) | timestamp | action | agentDID | grantId | scopes.join(",") | result | M | prevHash
 * where M = JSON.stringify(metadata) as sent (insertion order kept), or "" when absent.
 * Shared by the server and the on-device kit; no platform APIs.
 */
export const GENESIS_HASH = "0000000000000000"

export interface EntryFields {
  readonly seq: number
  readonly timestamp: string
  readonly action: string
  readonly agentDID: string
  readonly grantId: string
  readonly scopes: ReadonlyArray<string>
  readonly result: string
  readonly metadata?: unknown
  readonly prevHash: string
}

export const canonicalInput = (e: EntryFields): string =>
  canonicalInputWithMetadata(e, e.metadata === undefined ? "" : JSON.stringify(e.metadata))

/** The same, with M given as text (the server's reading of metadata in the order it was written). */
export const canonicalInputWithMetadata = (e: EntryFields, metadataText: string): string =>
  [
    String(e.seq),
    e.timestamp,
    e.action,
    e.agentDID,
    e.grantId,
    e.scopes.join(","),
    e.result,
    metadataText,
    e.prevHash
  ].join("|")

export const RESULTS = ["success", "auth_failure", "scope_violation", "execution_error"] as const

/** Offline entry metadata: at most this many UTF-8 bytes of its JSON text (decisions §19). */
export const MAX_METADATA_BYTES = 16 * 1024

/** UTF-8 length of a string without platform APIs (a lone surrogate counts as U+FFFD, 3 bytes). */
export const utf8Length = (text: string): number => {
  let n = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x80) n += 1
    else if (c < 0x800) n += 2
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4
      i++
    } else n += 3
  }
  return n
}

/**
 * Why the canonical input of these fields would not be unique, or undefined when it is. The input is
 * not escaped (devices must keep producing it byte for byte), so a `|` inside a joined field, or a
 * `,` or `|` inside a scope, would let two different entries share one hash and one signature
 * (decisions §19). An empty scope is refused for the same reason ([] and [""] join alike). The
 * metadata text may hold `|`: every field after it is free of one, so the split stays unique.
 */
export const delimiterFault = (e: Omit<EntryFields, "metadata" | "seq">): string | undefined => {
  for (const field of ["timestamp", "action", "agentDID", "grantId", "result", "prevHash"] as const) {
    if (e[field].includes("|")) return `${field} must not contain "|"`
  }
  for (const scope of e.scopes) {
    if (scope === "" || scope.includes(",") || scope.includes("|")) return `scopes must be non-empty and contain neither "," nor "|"`
  }
  return undefined
}
