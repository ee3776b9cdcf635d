/**
 * Cursor pagination (decisions §1): newest first, ordered by (created_at, id); the cursor is the
 * base64url of the last row's pair, so no row is skipped or repeated at a page boundary.
 */
import { Effect, Schema } from "effect"
import { BadRequest } from "./Errors.ts"

export interface CursorPosition {
  readonly createdAt: string
  readonly id: string
}

export const encodeCursor = (row: { createdAt: Date | string; id: string }): string =>
  Buffer.from(JSON.stringify([new Date(row.createdAt).toISOString(), row.id])).toString("base64url")

/** undefined when absent; null when present but malformed (the caller answers 400) */
export const decodeCursor = (cursor: string | undefined): CursorPosition | undefined | null => {
  if (cursor === undefined || cursor === "") return undefined
  try {
    const value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"))
    if (!Array.isArray(value) || value.length !== 2) return null
    const [createdAt, id] = value
    if (typeof createdAt !== "string" || typeof id !== "string" || Number.isNaN(Date.parse(createdAt))) return null
    return { createdAt, id }
  } catch {
    return null
  }
}

/** `limit` query parameter: digits only; range is checked by `pageLimit`. */
export const LimitParam = Schema.optional(Schema.String)

/** default 50, maximum 100; anything else malformed → undefined (the caller answers 400) */
export const pageLimit = (raw: string | undefined, max = 100, fallback = 50): number | undefined => {
  if (raw === undefined) return fallback
  if (!/^\d+$/.test(raw)) return undefined
  const n = Number(raw)
  if (n < 1 || n > max) return undefined
  return n
}

/** Given rows fetched with limit+1, returns the page and its next cursor. */
export const toPage = <T extends { createdAt: Date | string; id: string }>(rows: ReadonlyArray<T>, limit: number) => {
  const page = rows.slice(0, limit)
  const nextCursor = rows.length > limit ? encodeCursor(page[page.length - 1]!) : null
  return { page, nextCursor }
}

/**
 * A list's `limit` and `cursor` query parameters, checked: 400 BAD_REQUEST for a limit outside
 * 1–100 or a cursor that does not decode (the lists that answer INVALID_REQUEST check their own).
 */
export const pageParams = (
  urlParams: { readonly limit?: string | undefined; readonly cursor?: string | undefined }
): Effect.Effect<{ readonly limit: number; readonly cursor: CursorPosition | undefined }, BadRequest> => {
  const limit = pageLimit(urlParams.limit)
  if (limit === undefined) return Effect.fail(new BadRequest({ message: "limit must be an integer from 1 to 100" }))
  const cursor = decodeCursor(urlParams.cursor)
  if (cursor === null) return Effect.fail(new BadRequest({ message: "cursor is not valid" }))
  return Effect.succeed({ limit, cursor })
}
