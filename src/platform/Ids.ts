/** Identifiers: a type prefix + ULID (decisions §1). Time-ordered, so newest-first lists index well. */
import { randomBytes } from "node:crypto"

const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

export const ulid = (now: number = Date.now()): string => {
  let time = ""
  let t = now
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time
    t = Math.floor(t / 32)
  }
  const bytes = randomBytes(16)
  let rand = ""
  for (let i = 0; i < 16; i++) rand += ALPHABET[bytes[i]! % 32]
  return time + rand
}

export type IdPrefix =
  | "dev" | "ag" | "areq" | "grnt" | "tok" | "ref" | "bundle" | "oae" | "vcred" | "brch" | "bint"
  | "bdg" | "btx" | "dom" | "wh" | "whd" | "evt" | "alog" | "wac" | "pkc" | "req"

export const newId = (prefix: IdPrefix, now?: number): string => `${prefix}_${ulid(now)}`
