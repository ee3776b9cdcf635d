/**
 * Status list encodings (decisions §18), pure functions.
 *
 * - W3C Bitstring Status List: index 0 is the most significant bit of the first byte; `encodedList`
 *   is multibase base64url (`u`) of the GZIP of the bitstring.
 * - IETF Token Status List (for SD-JWT VCs): two bits per index, index 0 in the least significant
 *   bits of the first byte, ZLIB-compressed, base64url. A pair of lists shares its indices, so the
 *   value is 1 (INVALID) when the revocation bit is set, 2 (SUSPENDED) when only the suspension bit is.
 */
import { deflateSync, gzipSync } from "node:zlib"

/** entries per list: the Bitstring Status List minimum, for herd privacy */
export const LIST_SIZE = 131_072
/** a new pair of lists is opened when this share of indices is used */
export const FULL_AT = 0.9
/** how long a list may be cached by its readers, seconds */
export const LIST_TTL_SECONDS = 300

export const emptyBitstring = (size = LIST_SIZE) => new Uint8Array(size / 8)

export const bitAt = (bits: Uint8Array, index: number): boolean =>
  index >= 0 && index < bits.length * 8 && ((bits[index >> 3]! >> (7 - (index & 7))) & 1) === 1

export const encodeBitstring = (bits: Uint8Array): string => "u" + gzipSync(bits).toString("base64url")

/** the two-bit IETF list of a revocation list and its suspension partner */
export const encodeTokenStatusList = (revocation: Uint8Array, suspension: Uint8Array): string => {
  const out = new Uint8Array(revocation.length * 2)
  for (let byte = 0; byte < revocation.length; byte++) {
    const r = revocation[byte]!, s = suspension[byte] ?? 0
    if ((r | s) === 0) continue
    for (let bit = 0; bit < 8; bit++) {
      const mask = 0x80 >> bit
      const value = r & mask ? 1 : s & mask ? 2 : 0
      if (value === 0) continue
      const index = byte * 8 + bit
      out[index >> 2]! |= value << ((index & 3) * 2)
    }
  }
  return deflateSync(out).toString("base64url")
}
