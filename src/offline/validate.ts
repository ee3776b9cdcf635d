/**
 * What `OfflineAgent.record` checks before it signs (decisions §24): an entry the service would
 * refuse must never be queued, since a batch the service refuses as a whole holds up every entry
 * after it. The rules are the service's own (src/offline-sync/Service.ts parseBody, decisions §5
 * and §19): `result` one of four words, metadata a plain JSON object of at most 16 KiB, and no
 * delimiter inside a field of the hash input. No platform APIs.
 */
import { delimiterFault, type EntryFields, MAX_METADATA_BYTES, RESULTS, utf8Length } from "./canonical.ts"

export type EntryResult = (typeof RESULTS)[number]

/** Thrown by `record()` for an entry the service would refuse; nothing is recorded. */
export class OfflineEntryError extends Error {
  override readonly name = "OfflineEntryError"
  constructor(
    /** the field at fault */
    readonly field: "action" | "result" | "metadata" | "scopes" | "timestamp" | "agentDID" | "grantId" | "prevHash",
    /** why, in words */
    readonly reason: string
  ) {
    super(`entry not recorded: ${field} ${reason}`)
  }
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v) && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null)

/** The caller's part of an entry (what `record` is given), checked at run time: types can be bypassed. */
export const checkRecordInput = (action: unknown, result: unknown, metadata: unknown): OfflineEntryError | undefined => {
  if (typeof action !== "string") return new OfflineEntryError("action", "must be a string")
  if (typeof result !== "string" || !(RESULTS as ReadonlyArray<string>).includes(result)) {
    return new OfflineEntryError("result", `must be one of ${RESULTS.join(", ")} (got ${JSON.stringify(result) ?? String(result)})`)
  }
  if (metadata === undefined) return undefined
  if (!isPlainObject(metadata)) return new OfflineEntryError("metadata", "must be a plain object when given")
  let text: string
  try {
    text = JSON.stringify(metadata)
  } catch {
    return new OfflineEntryError("metadata", "must be JSON (no cycles, no BigInt)")
  }
  if (utf8Length(text) > MAX_METADATA_BYTES) return new OfflineEntryError("metadata", `must be at most ${MAX_METADATA_BYTES} bytes of JSON`)
  return undefined
}

/** The whole entry: a delimiter inside a field would make its hash input ambiguous (decisions §19). */
export const checkEntryFields = (fields: Omit<EntryFields, "metadata" | "seq">): OfflineEntryError | undefined => {
  const fault = delimiterFault(fields)
  if (fault === undefined) return undefined
  const field = (fault.split(" ")[0] ?? "scopes") as OfflineEntryError["field"]
  return new OfflineEntryError(field, fault.slice(field.length + 1))
}

/**
 * The entries of a batch the service refused as a whole (400 INVALID_REQUEST): the one its message
 * names (`entries[i]…`), or every entry of the batch when it names none.
 */
export const refusedByMessage = <E>(batch: ReadonlyArray<E>, message: string): ReadonlyArray<E> => {
  const named = /entries\[(\d+)\]/.exec(message)
  const entry = named === null ? undefined : batch[Number(named[1])]
  return entry === undefined ? batch : [entry]
}
