/**
 * Input rules of the breach register (interface: Breach register; decisions §8). Bodies are read
 * as plain JSON and checked here, so every bad input — unknown fields included — answers exactly
 * 400 BAD_REQUEST with a message naming the field.
 */
export const LIMITS = {
  description: 5000,
  nature: 1000,
  extent: 5000,
  location: 1000,
  likelyImpact: 5000,
  mitigation: 5000,
  detailedReportField: 5000,
  principalIds: 10_000,
  principalIdLength: 200,
  channel: 100
} as const

/** the largest count the register stores (a PostgreSQL integer) */
export const MAX_AFFECTED_COUNT = 2_147_483_647

/** Times may be at most this far in the future (clock skew). */
export const SKEW_MS = 5 * 60 * 1000

export const REPORT_KEYS = ["updatedDetails", "factsCircumstancesReasons", "mitigation", "causeFindings", "remedialMeasures"] as const
export type ReportKey = typeof REPORT_KEYS[number]
export const CONTENT_ITEMS = ["description", "likely_consequences", "mitigation", "safety_measures", "contact"] as const

export class Invalid extends Error {}

const fail = (message: string): never => {
  throw new Invalid(message)
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/

export const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v)

export const onlyKeys = (body: Record<string, unknown>, allowed: ReadonlyArray<string>, where = "") => {
  for (const key of Object.keys(body)) if (!allowed.includes(key)) fail(`Unknown field ${where}${key}`)
}

export const text = (body: Record<string, unknown>, field: string, max: number, required: boolean): string | null => {
  const value = body[field]
  if (value === undefined || value === null) {
    if (required) fail(`${field} is required`)
    return null
  }
  if (typeof value !== "string") return fail(`${field} must be a string`)
  if (required && value.trim() === "") fail(`${field} must not be empty`)
  // characters, not UTF-16 units: an emoji is one (the count is only taken when the units exceed the limit)
  if (value.length > max && [...value].length > max) fail(`${field} may be at most ${max} characters`)
  return value
}

/**
 * Whether the written calendar date and clock time exist: Date.parse rolls 2025-02-30 over to
 * March 2nd instead of refusing it, and the deadline must come from the date the caller sent.
 */
const existsOnCalendar = (value: string): boolean => {
  const [year, month, day, hour, minute, second] = [0, 5, 8, 11, 14, 17].map((at) => Number(value.slice(at, at + (at === 0 ? 4 : 2))))
  const daysInMonth = new Date(Date.UTC(year!, month!, 0)).getUTCDate()
  return month! >= 1 && month! <= 12 && day! >= 1 && day! <= daysInMonth && hour! <= 23 && minute! <= 59 &&
    (value[16] !== ":" || second! <= 59)
}

/** An ISO 8601 date-time, at most 5 minutes in the future. */
export const time = (body: Record<string, unknown>, field: string, nowMs: number): Date | null => {
  const value = body[field]
  if (value === undefined || value === null) return null
  if (typeof value !== "string" || !ISO.test(value) || !existsOnCalendar(value) || Number.isNaN(Date.parse(value))) {
    return fail(`${field} must be an ISO 8601 date-time`)
  }
  const at = new Date(value)
  if (at.getTime() > nowMs + SKEW_MS) fail(`${field} must not be in the future`)
  return at
}

export interface RecordInput {
  readonly description: string
  readonly nature: string
  readonly extent: string
  readonly occurredAt: Date | null
  readonly awareAt: Date
  readonly location: string | null
  readonly likelyImpact: string | null
  readonly affectedDataPrincipalIds: ReadonlyArray<string> | null
  readonly affectedCount: number
  readonly mitigation: string | null
}

const principalIds = (value: unknown, field: string, min: number): Array<string> => {
  if (!Array.isArray(value)) return fail(`${field} must be an array of strings`)
  if (value.length < min) fail(`${field} must list at least ${min} id`)
  if (value.length > LIMITS.principalIds) fail(`${field} may list at most ${LIMITS.principalIds} ids`)
  for (const id of value) {
    if (typeof id !== "string" || id.length === 0 || id.length > LIMITS.principalIdLength) {
      fail(`${field} must hold non-empty strings of at most ${LIMITS.principalIdLength} characters`)
    }
  }
  return [...new Set(value as Array<string>)]
}

export const parseRecord = (body: unknown, nowMs: number): RecordInput => {
  if (!isObject(body)) return fail("Body must be a JSON object")
  onlyKeys(body, ["description", "nature", "extent", "occurredAt", "awareAt", "location", "likelyImpact", "affectedDataPrincipalIds", "affectedCount", "mitigation"])
  const description = text(body, "description", LIMITS.description, true)!
  const nature = text(body, "nature", LIMITS.nature, true)!
  const extent = text(body, "extent", LIMITS.extent, true)!
  const location = text(body, "location", LIMITS.location, false)
  const likelyImpact = text(body, "likelyImpact", LIMITS.likelyImpact, false)
  const mitigation = text(body, "mitigation", LIMITS.mitigation, false)
  const awareAt = time(body, "awareAt", nowMs) ?? new Date(nowMs)
  const occurredAt = time(body, "occurredAt", nowMs)
  if (occurredAt !== null && occurredAt.getTime() > awareAt.getTime()) fail("occurredAt must not be after awareAt")
  const ids = body.affectedDataPrincipalIds === undefined || body.affectedDataPrincipalIds === null
    ? null
    : principalIds(body.affectedDataPrincipalIds, "affectedDataPrincipalIds", 0)
  let affectedCount: number
  if (body.affectedCount === undefined || body.affectedCount === null) {
    if (ids === null) fail("Give affectedDataPrincipalIds or affectedCount")
    affectedCount = ids!.length
  } else {
    if (typeof body.affectedCount !== "number" || !Number.isSafeInteger(body.affectedCount) || body.affectedCount < 0) {
      fail("affectedCount must be a non-negative integer")
    }
    if ((body.affectedCount as number) > MAX_AFFECTED_COUNT) fail(`affectedCount may be at most ${MAX_AFFECTED_COUNT}`)
    affectedCount = body.affectedCount as number
    if (ids !== null && affectedCount < ids.length) fail("affectedCount may not be smaller than the number of affectedDataPrincipalIds")
  }
  return { description, nature, extent, occurredAt, awareAt, location, likelyImpact, affectedDataPrincipalIds: ids, affectedCount, mitigation }
}

export interface UpdateInput {
  readonly status?: "initial_intimated" | "reported" | "closed"
  readonly detailedReport?: Partial<Record<ReportKey, string | null>>
  readonly boardInitialIntimationSentAt?: Date
  readonly boardDetailedReportSentAt?: Date
  readonly extension?: { requestedAt: Date; granted: boolean | null; newDueAt: Date | null }
}

/** Shape checks that need no stored state. Checks against awareAt come after the breach is read. */
export const parseUpdate = (body: unknown, nowMs: number): UpdateInput => {
  if (!isObject(body)) return fail("Body must be a JSON object")
  onlyKeys(body, ["status", "detailedReport", "boardInitialIntimationSentAt", "boardDetailedReportSentAt", "extension"])
  if (Object.keys(body).length === 0) fail("Nothing to update")
  const out: { -readonly [K in keyof UpdateInput]: UpdateInput[K] } = {}
  if (body.status !== undefined) {
    if (!["initial_intimated", "reported", "closed"].includes(body.status as string)) {
      fail("status must be initial_intimated, reported or closed")
    }
    out.status = body.status as UpdateInput["status"]
  }
  if (body.detailedReport !== undefined) {
    if (!isObject(body.detailedReport)) fail("detailedReport must be an object")
    const report = body.detailedReport as Record<string, unknown>
    onlyKeys(report, REPORT_KEYS, "detailedReport.")
    const parsed: Partial<Record<ReportKey, string | null>> = {}
    for (const key of REPORT_KEYS) {
      if (report[key] === undefined) continue
      parsed[key] = text(report, key, LIMITS.detailedReportField, false)
    }
    out.detailedReport = parsed
  }
  const initial = time(body, "boardInitialIntimationSentAt", nowMs)
  if (body.boardInitialIntimationSentAt !== undefined && initial === null) fail("boardInitialIntimationSentAt must be a date-time")
  if (initial !== null) out.boardInitialIntimationSentAt = initial
  const detailed = time(body, "boardDetailedReportSentAt", nowMs)
  if (body.boardDetailedReportSentAt !== undefined && detailed === null) fail("boardDetailedReportSentAt must be a date-time")
  if (detailed !== null) out.boardDetailedReportSentAt = detailed
  if (body.extension !== undefined) {
    if (!isObject(body.extension)) fail("extension must be an object")
    const ext = body.extension as Record<string, unknown>
    onlyKeys(ext, ["requestedAt", "granted", "newDueAt"], "extension.")
    if (ext.granted !== undefined && ext.granted !== null && typeof ext.granted !== "boolean") fail("extension.granted must be true, false or null")
    const requestedAt = time(ext, "requestedAt", nowMs) ?? new Date(nowMs)
    let newDueAt: Date | null = null
    if (ext.newDueAt !== undefined && ext.newDueAt !== null) {
      if (typeof ext.newDueAt !== "string" || !ISO.test(ext.newDueAt) || Number.isNaN(Date.parse(ext.newDueAt))) {
        fail("extension.newDueAt must be an ISO 8601 date-time")
      }
      newDueAt = new Date(ext.newDueAt as string)
    }
    const granted = (ext.granted ?? null) as boolean | null
    if (granted === true && newDueAt === null) fail("extension.newDueAt is required when the extension is granted")
    out.extension = { requestedAt, granted, newDueAt }
  }
  return out
}

export interface IntimationInput {
  readonly dataPrincipalIds: ReadonlyArray<string>
  readonly channel: string
  readonly contentIncluded: ReadonlyArray<string>
  readonly intimatedAt: Date
}

export const parseIntimation = (body: unknown, nowMs: number): IntimationInput => {
  if (!isObject(body)) return fail("Body must be a JSON object")
  onlyKeys(body, ["dataPrincipalIds", "channel", "contentIncluded", "intimatedAt"])
  const dataPrincipalIds = principalIds(body.dataPrincipalIds, "dataPrincipalIds", 1)
  const channel = text(body, "channel", LIMITS.channel, true)!
  if (!Array.isArray(body.contentIncluded)) fail("contentIncluded must be an array")
  const content = body.contentIncluded as Array<unknown>
  for (const item of content) {
    if (!(CONTENT_ITEMS as ReadonlyArray<unknown>).includes(item)) fail(`contentIncluded items must be among ${CONTENT_ITEMS.join(", ")}`)
  }
  const intimatedAt = time(body, "intimatedAt", nowMs) ?? new Date(nowMs)
  return { dataPrincipalIds, channel, contentIncluded: [...new Set(content as Array<string>)], intimatedAt }
}
