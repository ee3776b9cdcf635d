/**
 * Query and body values of the compliance routes, checked before any work: a malformed date, a
 * window that ends before it starts, an unknown format or status is 400 BAD_REQUEST (the published
 * implementation handed such values to PostgreSQL and answered 500).
 */
import { Effect } from "effect"
import { BadRequest } from "../platform/Errors.ts"

const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/

/** ISO 8601 date or date-time; a date-only `end` is the last millisecond of that day. undefined when malformed. */
export const parseInstant = (text: string, end: boolean): Date | undefined => {
  const m = DATE_ONLY.exec(text) ?? DATE_TIME.exec(text)
  if (m === null) return undefined
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])]
  // the calendar date must exist (2026-02-30 is refused, not rolled over)
  const day = new Date(Date.UTC(y, mo - 1, d))
  if (day.getUTCFullYear() !== y || day.getUTCMonth() !== mo - 1 || day.getUTCDate() !== d) return undefined
  if (m.length === 4 || m[4] === undefined) return new Date(day.getTime() + (end ? 86_399_999 : 0))
  if (Number(m[4]) > 23 || Number(m[5]) > 59 || (m[6] !== undefined && Number(m[6].slice(1, 3)) > 59)) return undefined
  const t = Date.parse(text)
  return Number.isNaN(t) ? undefined : new Date(t)
}

export interface Window {
  readonly since: Date | undefined
  readonly until: Date | undefined
}

export const parseWindow = (
  since: string | undefined,
  until: string | undefined,
  names: readonly [string, string] = ["since", "until"]
): Effect.Effect<Window, BadRequest> => {
  const s = since === undefined || since === "" ? undefined : parseInstant(since, false)
  const u = until === undefined || until === "" ? undefined : parseInstant(until, true)
  if (since !== undefined && since !== "" && s === undefined) {
    return Effect.fail(new BadRequest({ message: `${names[0]} must be an ISO 8601 date or date-time`, details: [{ path: names[0], message: "not a date" }] }))
  }
  if (until !== undefined && until !== "" && u === undefined) {
    return Effect.fail(new BadRequest({ message: `${names[1]} must be an ISO 8601 date or date-time`, details: [{ path: names[1], message: "not a date" }] }))
  }
  if (s !== undefined && u !== undefined && s.getTime() > u.getTime()) {
    return Effect.fail(new BadRequest({ message: `${names[0]} must not be after ${names[1]}` }))
  }
  return Effect.succeed({ since: s, until: u })
}

export const oneOf = <const T extends string>(name: string, value: string | undefined, allowed: ReadonlyArray<T>, fallback?: T) => {
  if (value === undefined) {
    return fallback === undefined ? Effect.succeed(undefined) : Effect.succeed(fallback as T | undefined)
  }
  return (allowed as ReadonlyArray<string>).includes(value)
    ? Effect.succeed(value as T | undefined)
    : Effect.fail(new BadRequest({ message: `${name} must be one of: ${allowed.join(", ")}` }))
}

/** JSON pages: `limit` 1–10,000 (default 1,000) */
export const exportLimit = (raw: string | undefined) => {
  if (raw === undefined) return Effect.succeed(1000)
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 10_000) {
    return Effect.fail(new BadRequest({ message: "limit must be an integer from 1 to 10000" }))
  }
  return Effect.succeed(Number(raw))
}

export const encodePageCursor = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")
export const decodePageCursor = <T>(raw: string | undefined, check: (v: any) => v is T): Effect.Effect<T | undefined, BadRequest> => {
  if (raw === undefined || raw === "") return Effect.succeed(undefined)
  try {
    const value = JSON.parse(Buffer.from(raw, "base64url").toString("utf8"))
    if (check(value)) return Effect.succeed(value)
  } catch { /* falls through */ }
  return Effect.fail(new BadRequest({ message: "cursor is not valid" }))
}

export const iso = (d: Date | undefined) => d === undefined ? null : d.toISOString()
