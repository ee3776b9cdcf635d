/**
 * One log shape for every line the service writes: a JSON object whose first keys are always
 * `time` (ISO 8601 UTC), `level` (debug | info | warn | error) and `message`, followed by the
 * line's own fields (request id, route, ...). Effect's logger (Effect.logInfo & co.), the access
 * log and the few direct writes of main.ts all go through `formatLine`, so no line differs.
 *
 * Lines go to stdout through `console.log` (a test may replace it to capture them).
 */
import { Cause, Context, HashMap, Inspectable, Layer, List, Logger, LogLevel } from "effect"

export type Level = "debug" | "info" | "warn" | "error"
export type ConfiguredLevel = Level | "none"

const RANK: Record<ConfiguredLevel, number> = { debug: 0, info: 1, warn: 2, error: 3, none: 4 }

const RESERVED = new Set(["time", "level", "message"])

/** The one line shape. Fields named like the fixed keys are dropped rather than allowed to replace them. */
export const formatLine = (level: Level, message: string, fields?: Record<string, unknown>, time = new Date()): string => {
  const line: Record<string, unknown> = { time: time.toISOString(), level, message }
  if (fields !== undefined) {
    for (const key in fields) {
      const value = fields[key]
      if (value !== undefined && !RESERVED.has(key)) line[key] = value
    }
  }
  try {
    return JSON.stringify(line)
  } catch {
    // a circular or BigInt field: Effect's safe stringifier (slower, so only then)
    return Inspectable.stringifyCircular(line)
  }
}

export interface LogService {
  readonly level: ConfiguredLevel
  /** whether a line at this level is written (check before building an expensive line) */
  readonly enabled: (level: Level) => boolean
  readonly write: (level: Level, message: string, fields?: Record<string, unknown>) => void
}

export const makeLog = (level: ConfiguredLevel): LogService => {
  const min = RANK[level]
  const enabled = (l: Level) => RANK[l] >= min
  return {
    level,
    enabled,
    write: (l, message, fields) => {
      if (RANK[l] >= min) console.log(formatLine(l, message, fields))
    }
  }
}

/** The service's log for direct writes (access lines, main.ts); Effect's logger writes the same shape. */
export class Log extends Context.Tag("agent-auth/Log")<Log, LogService>() {}

const levelOf = (level: LogLevel.LogLevel): Level =>
  level._tag === "Debug" || level._tag === "Trace" || level._tag === "All"
    ? "debug"
    : level._tag === "Warning"
    ? "warn"
    : level._tag === "Error" || level._tag === "Fatal"
    ? "error"
    : "info"

const messageText = (message: unknown): string => {
  const parts = Array.isArray(message) ? message : [message]
  return parts.map((p) => (typeof p === "string" ? p : p instanceof Error ? p.message : Inspectable.format(p))).join(" ")
}

/** Effect's logger in the one shape: annotations become fields; a cause is rendered as `cause`. */
export const effectLogger = Logger.make(({ annotations, cause, date, logLevel, message, spans }) => {
  const fields: Record<string, unknown> = {}
  if (HashMap.size(annotations) > 0) for (const [k, v] of annotations) fields[k] = v
  if (List.isCons(spans)) {
    const now = date.getTime()
    for (const span of spans) fields[`${span.label}Ms`] = now - span.startTime
  }
  if (!Cause.isEmpty(cause)) fields.cause = Cause.pretty(cause, { renderErrorCause: true })
  console.log(formatLine(levelOf(logLevel), messageText(message), fields, date))
})

const minimum = (level: ConfiguredLevel) =>
  level === "debug" ? LogLevel.Debug
  : level === "warn" ? LogLevel.Warning
  : level === "error" ? LogLevel.Error
  : level === "none" ? LogLevel.None
  : LogLevel.Info

/** Effect's logger replaced by the one shape, with the configured minimum level. */
export const effectLoggerLayer = (level: ConfiguredLevel) =>
  Layer.mergeAll(Logger.replace(Logger.defaultLogger, effectLogger), Logger.minimumLogLevel(minimum(level)))
