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
  if (poolOffset + 21 > pool.length) {
    pool = randomBytes(4096)
    poolOffset = 0
  }
  let rand = ""
  if (now === lastTime) {
    // Ids made in the same millisecond still sort in the order they were made (lists and event
    // order rely on it): the random part moves up by a random step of up to 2^40, so the next id
    // stays unguessable from the last one (request ids are the consent page's key).
    rand = addRandomStep(lastRand)
  }
  if (rand === "") for (let i = 0; i < 16; i++) rand += ALPHABET[pool[poolOffset++]! % 32]
  lastTime = now
  lastRand = rand
  return time + rand
}

let lastTime = -1
let lastRand = ""

/** the 16-digit base-32 number plus a random 1..2^40; "" when it would overflow (then a fresh one is drawn) */
const addRandomStep = (digits: string): string => {
  let step = 1
  for (let i = 0; i < 5; i++) step = step * 256 + pool[poolOffset++]!
  // (5 random bytes: 2^40 at most, exact in a double)
  const out = digits.split("")
  let carry = step
  for (let i = 15; i >= 0 && carry > 0; i--) {
    const sum = ALPHABET.indexOf(out[i]!) + carry
    out[i] = ALPHABET[sum % 32]!
    carry = Math.floor(sum / 32)
  }
  return carry > 0 ? "" : out.join("")
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
  | "exp" // DPDP exports (decisions §21; ids made before were cexp_, and both are read alike)
  | "psess" // principal sessions (decisions §12)
  | "sso" | "ssosess" | "ssoid" // SSO connections, sessions, linked identities (decisions §12)
  | "pol" | "pbnd" | "pdec"
  | "inv" | "sub"
  | "anm" // anomaly alerts (decisions §14)
  | "achan" // anomaly alert channels (decisions §14; ids made before were anch_)
  | "arule" // custom anomaly rules given no ruleId (decisions §14; ids made before were custom-…)
  | "key" // developers' API keys (decisions §2)
  | "notice" | "crec" | "grv" | "nom" // DPDP notice versions, consent records, grievances, nominations (decisions §21)
  | "rs" // OAuth resource servers (decisions §22)

export const newId = (prefix: IdPrefix, now?: number): string => `${prefix}_${ulid(now)}`
