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
  if (poolOffset + 16 > pool.length) {
    pool = randomBytes(4096)
    poolOffset = 0
  }
  let rand = ""
  for (let i = 0; i < 16; i++) rand += ALPHABET[pool[poolOffset++]! % 32]
  return time + rand
}

// Random bytes drawn 4 KiB at a time (one call to the CSPRNG per 256 ids instead of one per id);
// each byte is used once.
let pool = randomBytes(0)
let poolOffset = 0

export type IdPrefix =
  | "dev" | "ag" | "areq" | "grnt" | "tok" | "ref" | "bundle" | "oae" | "vcred" | "brch" | "bint"
  | "bdg" | "btx" | "dom" | "wh" | "whd" | "evt" | "alog" | "wac" | "pkc" | "req"
  | "scimtok" | "scimuser" | "scimgrp"
  | "cexp"
  | "psess" // principal sessions (decisions §12)
  | "inv" | "sub"

export const newId = (prefix: IdPrefix, now?: number): string => `${prefix}_${ulid(now)}`
