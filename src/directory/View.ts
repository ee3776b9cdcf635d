/**
 * What the directory answers: User and Group resources with meta (version as a weak ETag,
 * location), ListResponse paging (RFC 7644 §3.4.2.4: startIndex < 1 is 1, count 0 gives only
 * totalResults, at most 200), and `attributes` / `excludedAttributes` projection.
 */
import { Effect } from "effect"
import type { GroupRow, UserRow } from "./Repo.ts"
import { etagOf, scimFail, URN } from "./Scim.ts"
import { stripUrn } from "./Resources.ts"

export interface ListQuery {
  readonly filter?: string | undefined
  readonly startIndex?: string | undefined
  readonly count?: string | undefined
}

export const DEFAULT_COUNT = 100
export const MAX_COUNT = 200

const integer = (text: string | undefined, name: string) => {
  if (text === undefined || text === "") return Effect.succeed(undefined)
  if (!/^-?\d{1,9}$/.test(text.trim())) return Effect.fail(scimFail.badRequest("invalidValue", `${name} must be an integer`))
  return Effect.succeed(Number(text.trim()))
}

export const listWindow = (query: ListQuery) =>
  Effect.gen(function*() {
    const start = yield* integer(query.startIndex, "startIndex")
    const count = yield* integer(query.count, "count")
    return {
      startIndex: start === undefined || start < 1 ? 1 : start,
      count: count === undefined ? DEFAULT_COUNT : Math.min(Math.max(count, 0), MAX_COUNT)
    }
  })

export const userView = (row: UserRow, base: string) => {
  const resource: Record<string, unknown> = { ...row.resource }
  const ext = resource[URN.enterprise]
  delete resource[URN.enterprise]
  return {
    schemas: [URN.user, ...(ext ? [URN.enterprise] : []), URN.agentauth],
    id: row.id,
    ...(row.externalId !== null ? { externalId: row.externalId } : {}),
    userName: row.userName,
    ...(row.displayName !== null ? { displayName: row.displayName } : {}),
    active: row.active,
    ...resource,
    ...(ext ? { [URN.enterprise]: ext } : {}),
    [URN.agentauth]: { principalId: row.principalId },
    meta: {
      resourceType: "User",
      created: row.createdAt.toISOString(),
      lastModified: row.updatedAt.toISOString(),
      version: etagOf(row.version),
      location: `${base}/scim/v2/Users/${row.id}`
    }
  }
}

export const groupView = (row: GroupRow, base: string, members: ReadonlyArray<{ userId: string; display: string }> | undefined) => ({
  schemas: [URN.group],
  id: row.id,
  ...(row.externalId !== null ? { externalId: row.externalId } : {}),
  displayName: row.displayName,
  ...(members !== undefined
    ? { members: members.map((m) => ({ value: m.userId, display: m.display, $ref: `${base}/scim/v2/Users/${m.userId}` })) }
    : {}),
  meta: {
    resourceType: "Group",
    created: row.createdAt.toISOString(),
    lastModified: row.updatedAt.toISOString(),
    version: etagOf(row.version),
    location: `${base}/scim/v2/Groups/${row.id}`
  }
})

const names = (text: string | undefined) =>
  text === undefined || text.trim() === ""
    ? undefined
    : text.split(",").map((n) => n.trim()).filter(Boolean).slice(0, 50).map((n) => ({ full: n.toLowerCase(), short: stripUrn(n).toLowerCase() }))

/** whether `excludedAttributes` names an attribute (used to skip loading group members) */
export const excludes = (excludedAttributes: string | undefined, attribute: string) =>
  names(excludedAttributes)?.some((n) => n.short === attribute.toLowerCase()) ?? false

/**
 * RFC 7644 §3.4.2.5 on top-level attributes and one level of sub-attributes; schemas and id are
 * always returned. An extension named by its URN, or by one of its attributes, stays whole.
 */
export const project = (resource: Record<string, unknown>, attributes: string | undefined, excludedAttributes: string | undefined) => {
  const include = names(attributes)
  const exclude = names(excludedAttributes)
  if (include === undefined && exclude === undefined) return resource
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(resource)) {
    const k = key.toLowerCase()
    if (k === "schemas" || k === "id") {
      out[key] = value
      continue
    }
    const isExtension = k.startsWith("urn:")
    if (include !== undefined) {
      const whole = include.some((n) => n.short === k || n.full === k || (isExtension && n.full.startsWith(k)))
      const subs = include.filter((n) => n.short.startsWith(k + ".")).map((n) => n.short.slice(k.length + 1))
      if (whole) out[key] = value
      else if (subs.length > 0 && value !== null && typeof value === "object" && !Array.isArray(value)) {
        out[key] = Object.fromEntries(Object.entries(value).filter(([s]) => subs.includes(s.toLowerCase())))
      } else continue
    } else out[key] = value
    if (exclude !== undefined) {
      if (exclude.some((n) => n.short === k || n.full === k)) {
        delete out[key]
        continue
      }
      const subs = exclude.filter((n) => n.short.startsWith(k + ".")).map((n) => n.short.slice(k.length + 1))
      const v = out[key]
      if (subs.length > 0 && v !== null && typeof v === "object" && !Array.isArray(v)) {
        out[key] = Object.fromEntries(Object.entries(v).filter(([s]) => !subs.includes(s.toLowerCase())))
      }
    }
  }
  return out
}

export const listResponse = (total: number, startIndex: number, resources: ReadonlyArray<unknown>) => ({
  schemas: [URN.list],
  totalResults: total,
  startIndex,
  itemsPerPage: resources.length,
  Resources: resources
})
