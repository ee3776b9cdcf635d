/** Ids (decisions §1): prefix + ULID, ordered as made even within one millisecond, never guessable by +1. */
import { expect, test } from "bun:test"
import { newId, ulid } from "../../src/platform/Ids.ts"

test("ids made in the same millisecond sort in the order they were made, and are all distinct", () => {
  const at = Date.parse("2026-11-24T03:00:00.000Z")
  const ids = Array.from({ length: 10_000 }, () => newId("evt", at))
  expect([...ids].sort()).toEqual(ids)
  expect(new Set(ids).size).toBe(ids.length)
  expect(ids.every((id) => /^evt_[0-9A-HJKMNP-TV-Z]{26}$/.test(id))).toBe(true)
})

test("the next id of a millisecond is not the last one plus one (request ids are the consent page's key)", () => {
  const at = Date.parse("2026-11-24T03:00:01.000Z")
  const a = ulid(at)
  const b = ulid(at)
  const value = (s: string) => [...s.slice(10)].reduce((n, c) => n * 32n + BigInt("0123456789ABCDEFGHJKMNPQRSTVWXYZ".indexOf(c)), 0n)
  const step = value(b) - value(a)
  expect(step > 0n).toBe(true)
  // a random step of up to 2^40: a step of 1 is a one-in-a-trillion draw
  expect(step).not.toBe(1n)
})
