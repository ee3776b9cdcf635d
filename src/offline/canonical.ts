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
