/**
 * Free-form `metadata` (audit log, vault, budgets, offline entries) is at most 16 KiB, counted as
 * the UTF-8 bytes of its JSON text (decisions §19). Bodies reach the schemas already checked for
 * nesting (at most 64 levels, see Body.ts), so printing the value here is bounded work.
 */
import { Schema } from "effect"

export const MAX_METADATA_BYTES = 16 * 1024

/** The UTF-8 size of a value's JSON text. */
export const metadataBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? "", "utf8")

export const metadataTooLarge = (value: unknown): boolean => metadataBytes(value) > MAX_METADATA_BYTES

/** A metadata object of at most 16 KiB of JSON (a 400 with the operation's validation code beyond). */
export const BoundedMetadata = Schema.Record({ key: Schema.String, value: Schema.Unknown }).pipe(
  Schema.filter((m) => !metadataTooLarge(m) || `must be at most ${MAX_METADATA_BYTES} bytes of JSON`)
)
