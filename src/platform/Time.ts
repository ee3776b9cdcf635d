/** Time helpers on Effect's Clock, so every deadline, expiry and window follows TestClock in tests. */
import { Clock, Effect } from "effect"

export const nowMillis = Clock.currentTimeMillis
export const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))
export const nowIso = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

export const iso = (d: Date | string | null | undefined): string | null =>
  d === null || d === undefined ? null : (d instanceof Date ? d : new Date(d)).toISOString()

/** `90s`, `15m`, `24h`, `7d` → seconds; undefined when malformed. */
export const parseDuration = (text: string, units = "smhd"): number | undefined => {
  const match = /^([1-9][0-9]{0,8})([smhd])$/.exec(text)
  if (match === null || !units.includes(match[2]!)) return undefined
  const n = Number(match[1])
  switch (match[2]) {
    case "s": return n
    case "m": return n * 60
    case "h": return n * 3600
    default: return n * 86400
  }
}
