/**
 * Input rules of the DPDP routes (decisions §21). Bodies are read as plain JSON and checked here;
 * every bad value answers 400 BAD_REQUEST with `details` naming the field. Fields the published
 * clients send that we compute ourselves are accepted and ignored (listed per body).
 */
import { createHash } from "node:crypto"
import { BadRequest } from "../platform/Errors.ts"
import { Effect } from "effect"

export class Invalid extends Error {
  constructor(readonly path: string, message: string) {
    super(message)
  }
}

export const fail = (path: string, message: string): never => {
  throw new Invalid(path, message)
}

/** Runs a parser, turning its Invalid into BAD_REQUEST with one detail. */
export const validated = <A>(f: () => A) =>
  Effect.try({
    try: f,
    catch: (e) => {
      if (e instanceof Invalid) return new BadRequest({ message: e.message, details: [{ path: e.path, message: e.message }] })
      throw e
    }
  })

export const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v)

export const objectBody = (body: unknown): Record<string, unknown> => isObject(body) ? body : fail("", "The body must be a JSON object")

/** characters, not UTF-16 units: an emoji is one */
const length = (s: string) => (s.length > 0 && /[\uD800-\uDFFF]/.test(s) ? [...s].length : s.length)

export const text = (body: Record<string, unknown>, field: string, max: number, required: boolean, min = 1): string | undefined => {
  const value = body[field]
  if (value === undefined || value === null) return required ? fail(field, `${field} is required`) : undefined
  if (typeof value !== "string") return fail(field, `${field} must be a string`)
  if (length(value) < min || (min > 0 && value.trim() === "")) return fail(field, `${field} must not be empty`)
  if (length(value) > max) return fail(field, `${field} may be at most ${max} characters`)
  return value
}

export const pattern = (body: Record<string, unknown>, field: string, re: RegExp, required: boolean, what: string): string | undefined => {
  const value = text(body, field, 1000, required)
  if (value !== undefined && !re.test(value)) fail(field, `${field} must be ${what}`)
  return value
}

export const bool = (body: Record<string, unknown>, field: string): boolean | undefined => {
  const value = body[field]
  if (value === undefined || value === null) return undefined
  return typeof value === "boolean" ? value : fail(field, `${field} must be true or false`)
}

export const httpsUrl = (body: Record<string, unknown>, field: string): string | undefined => {
  const value = text(body, field, 2000, false)
  if (value === undefined) return undefined
  try {
    if (new URL(value).protocol === "https:") return value
  } catch {
    // answered below
  }
  return fail(field, `${field} must be an https URL`)
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/

/** ISO 8601 with or without milliseconds, `Z` or an offset (decisions §21) */
export const isoTime = (body: Record<string, unknown>, field: string, required: boolean): Date | undefined => {
  const value = body[field]
  if (value === undefined || value === null) return required ? fail(field, `${field} is required`) : undefined
  if (typeof value !== "string" || !ISO.test(value)) return fail(field, `${field} must be an ISO 8601 date-time`)
  const [y, mo, d, h, mi, s] = [0, 5, 8, 11, 14, 17].map((at) => Number(value.slice(at, at + (at === 0 ? 4 : 2))))
  const days = new Date(Date.UTC(y!, mo!, 0)).getUTCDate()
  if (mo! < 1 || mo! > 12 || d! < 1 || d! > days || h! > 23 || mi! > 59 || s! > 59) return fail(field, `${field} is not a calendar date-time`)
  return new Date(value)
}

export const CODE = /^[A-Za-z0-9._:-]{1,64}$/

export interface Purpose {
  readonly code: string
  readonly description: string
  readonly name?: string
  readonly legalBasis?: string
  readonly dataCategories?: ReadonlyArray<string>
  readonly retentionPeriod?: string
  readonly thirdPartySharing?: boolean
}

const stringList = (value: unknown, path: string, maxItems: number, maxLength: number): Array<string> => {
  if (!Array.isArray(value)) return fail(path, `${path} must be an array of strings`)
  if (value.length > maxItems) fail(path, `${path} may have at most ${maxItems} items`)
  return value.map((v, i) => {
    if (typeof v !== "string" || v.length === 0 || length(v) > maxLength) fail(`${path}[${i}]`, `${path}[${i}] must be a string of 1 to ${maxLength} characters`)
    return v as string
  })
}

/** 1–50 purposes, `{ code, description }` or the `@grantex/dpdp` form keyed by purposeId; codes unique */
export const purposes = (body: Record<string, unknown>, field = "purposes"): Array<Purpose> => {
  const value = body[field]
  if (value === undefined || value === null) return fail(field, `${field} is required`)
  if (!Array.isArray(value) || value.length < 1 || value.length > 50) return fail(field, `${field} must be an array of 1 to 50 purposes`)
  const seen = new Set<string>()
  return value.map((p, i) => {
    const path = `${field}[${i}]`
    if (!isObject(p)) return fail(path, `${path} must be an object`)
    const code = p.code ?? p.purposeId
    if (typeof code !== "string" || !CODE.test(code)) return fail(`${path}.code`, `${path}.code must be 1 to 64 of A-Z a-z 0-9 . _ : -`)
    if (seen.has(code)) fail(`${path}.code`, `${path}.code ${code} appears twice`)
    seen.add(code)
    const description = text(p, "description", 1000, false, 0) ?? text(p, "name", 200, false) ?? ""
    const name = text(p, "name", 200, false)
    const legalBasis = text(p, "legalBasis", 200, false)
    const retentionPeriod = text(p, "retentionPeriod", 200, false)
    const thirdPartySharing = bool(p, "thirdPartySharing")
    const dataCategories = p.dataCategories === undefined || p.dataCategories === null
      ? undefined
      : stringList(p.dataCategories, `${path}.dataCategories`, 50, 200)
    return {
      code,
      description,
      ...(name !== undefined ? { name } : {}),
      ...(legalBasis !== undefined ? { legalBasis } : {}),
      ...(dataCategories !== undefined ? { dataCategories } : {}),
      ...(retentionPeriod !== undefined ? { retentionPeriod } : {}),
      ...(thirdPartySharing !== undefined ? { thirdPartySharing } : {})
    }
  })
}

export const sha256Hex = (s: string) => createHash("sha256").update(s, "utf8").digest("hex")

export { stringList }
