/**
 * SCIM PATCH (RFC 7644 §3.5.2). Users: `scim-patch` applies each operation to the resource as a
 * SCIM object, then the User schema (Resources.ts) coerces and validates the result, so Entra's
 * "False" becomes false and a bad value fails before anything is written. All operations apply or
 * none: nothing is stored until every one has and the result is valid.
 *
 * Around the library: `op` and attribute names are case-insensitive (Okta sends "replace", Entra
 * "Replace"); a remove or replace whose filter matches nothing is `noTarget` (the library would
 * create the element); id, meta and principalId are read-only (`mutability`); attributes the
 * schema does not have are `invalidPath`, except the standard ones we do not store, which are dropped.
 *
 * Groups: membership is not loaded as a document (a group may hold many users): the operations are
 * turned into sets of members to add and remove, at most 1,000 values per request.
 */
import { parse as parseFilter, type Filter } from "scim2-parse-filter"
import { scimPatch, type ScimPatchOperation } from "scim-patch"
import { Either } from "effect"
import { filterNestsTooDeep, MAX_FILTER_NESTING } from "./Filter.ts"
import { canonicalise, canonicalKey, decodeUser, IGNORED_USER_ATTRIBUTES, stripUrn, type UserInput } from "./Resources.ts"
import { ScimError, scimFail, type ScimType, URN } from "./Scim.ts"

export const MAX_OPERATIONS = 100
export const MAX_MEMBERS_PER_REQUEST = 1000

export interface Operation {
  readonly op: "add" | "remove" | "replace"
  readonly path?: string
  readonly value?: unknown
}

const bad = (scimType: ScimType, detail: string) => scimFail.badRequest(scimType, detail)

/** Checks the PatchOp envelope: schema, 1-100 operations, each op known, path a string. */
export const readPatchBody = (body: unknown): Either.Either<ReadonlyArray<Operation>, ScimError> => {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return Either.left(bad("invalidSyntax", "The body must be a PatchOp object"))
  const b = canonicalise(body) as Record<string, unknown>
  const schemas = b.schemas
  if (!Array.isArray(schemas) || !schemas.some((s) => typeof s === "string" && s.toLowerCase() === URN.patch.toLowerCase())) {
    return Either.left(bad("invalidSyntax", `schemas must contain ${URN.patch}`))
  }
  const ops = (body as Record<string, unknown>).Operations ?? (body as Record<string, unknown>).operations
  if (!Array.isArray(ops) || ops.length === 0) return Either.left(bad("invalidSyntax", "Operations must be a non-empty array"))
  if (ops.length > MAX_OPERATIONS) return Either.left(bad("invalidSyntax", `At most ${MAX_OPERATIONS} operations per request`))
  const out: Array<Operation> = []
  for (const raw of ops) {
    if (raw === null || typeof raw !== "object") return Either.left(bad("invalidSyntax", "Each operation must be an object"))
    const o = raw as Record<string, unknown>
    const op = typeof o.op === "string" ? o.op.toLowerCase() : undefined
    if (op !== "add" && op !== "remove" && op !== "replace") return Either.left(bad("invalidSyntax", `Unknown op ${String(o.op)}`))
    if (o.path !== undefined && (typeof o.path !== "string" || o.path.length > 1000)) return Either.left(bad("invalidPath", "path must be a string"))
    if (typeof o.path === "string" && filterNestsTooDeep(o.path)) {
      return Either.left(bad("invalidPath", `path nests ( and [ deeper than ${MAX_FILTER_NESTING} levels`))
    }
    const path = typeof o.path === "string" && o.path.trim() !== "" ? o.path.trim() : undefined
    if (op === "remove" && path === undefined) return Either.left(bad("noTarget", "A remove operation needs a path"))
    if (op !== "remove" && o.value === undefined) return Either.left(bad("invalidSyntax", `${op} needs a value`))
    out.push({ op, ...(path !== undefined ? { path } : {}), ...(o.value !== undefined ? { value: o.value } : {}) })
  }
  return Either.right(out)
}

const USER_ROOTS = new Set(["userName", "externalId", "active", "displayName", "name", "emails", "phoneNumbers"])
const ENTERPRISE_ATTRS = new Set(["employeeNumber", "department", "manager"])
const READ_ONLY = new Set(["id", "meta", "schemas"])

/** A user path in canonical case, or "ignore" for attributes we do not store. */
const userPath = (path: string): string | "ignore" => {
  const lower = path.toLowerCase()
  if (lower.startsWith(URN.agentauth.toLowerCase())) throw bad("mutability", "principalId is read-only")
  let prefix = ""
  let rest = path
  if (lower.startsWith(URN.enterprise.toLowerCase())) {
    prefix = URN.enterprise + ":"
    rest = path.slice(URN.enterprise.length + 1)
    if (path.length === URN.enterprise.length) return URN.enterprise
  } else rest = stripUrn(path)
  const match = /^([A-Za-z$][\w$-]*)(\[[^\]]*\])?(?:\.([A-Za-z$][\w$-]*))?$/.exec(rest)
  if (match === null) throw bad("invalidPath", `Invalid path ${path}`)
  const root = canonicalKey(match[1]!)
  if (prefix !== "") {
    if (!ENTERPRISE_ATTRS.has(root)) throw bad("invalidPath", `Unknown attribute ${path}`)
  } else {
    if (READ_ONLY.has(root)) throw bad("mutability", `${root} is read-only`)
    if (IGNORED_USER_ATTRIBUTES.has(root.toLowerCase())) return "ignore"
    if (!USER_ROOTS.has(root)) throw bad("invalidPath", `Unknown attribute ${path}`)
  }
  return `${prefix}${root}${match[2] ?? ""}${match[3] !== undefined ? "." + canonicalKey(match[3]) : ""}`
}

/** in-memory test of a value-path filter on one element (strings compare case-insensitively) */
const test = (f: Filter, el: Record<string, unknown>): boolean => {
  switch (f.op) {
    case "and": return f.filters.every((x) => test(x, el))
    case "or": return f.filters.some((x) => test(x, el))
    case "not": return !test(f.filter, el)
    case "[]": return false
    case "pr": return el[canonicalKey(f.attrPath)] !== undefined && el[canonicalKey(f.attrPath)] !== null
    default: {
      const raw = el[canonicalKey(f.attrPath)]
      const a = typeof raw === "string" ? raw.toLowerCase() : raw
      const b = typeof f.compValue === "string" ? f.compValue.toLowerCase() : f.compValue
      switch (f.op) {
        case "eq": return a === b
        case "ne": return a !== b
        case "co": return typeof a === "string" && typeof b === "string" && a.includes(b)
        case "sw": return typeof a === "string" && typeof b === "string" && a.startsWith(b)
        case "ew": return typeof a === "string" && typeof b === "string" && a.endsWith(b)
        default: return typeof a === typeof b && (a as any) !== null &&
          (f.op === "gt" ? (a as any) > (b as any) : f.op === "ge" ? (a as any) >= (b as any) : f.op === "lt" ? (a as any) < (b as any) : (a as any) <= (b as any))
      }
    }
  }
}

/** elements of `doc[root]` matching the bracket filter of `path`, or undefined when the path has none */
const filteredTargets = (doc: Record<string, unknown>, path: string): number | undefined => {
  const open = path.indexOf("[")
  if (open === -1) return undefined
  const root = path.slice(0, open).replace(`${URN.enterprise}:`, "")
  const text = path.slice(open + 1, path.lastIndexOf("]"))
  let filter: Filter
  try {
    filter = parseFilter(text)
  } catch {
    throw bad("invalidPath", `Invalid filter in path ${path}`)
  }
  const list = doc[root]
  if (!Array.isArray(list)) return 0
  return list.filter((el) => el !== null && typeof el === "object" && test(filter, el as Record<string, unknown>)).length
}

/** a no-path value object: keys canonicalised, "name.givenName" and extension-qualified keys nested */
const noPathValue = (value: unknown): Record<string, unknown> => {
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw bad("invalidValue", "A no-path operation needs an object value")
  const out: Record<string, unknown> = {}
  for (const [key, v] of Object.entries(value)) {
    // Okta and Entra echo read-only members (id, schemas, meta) in no-path values: nothing to change
    if (READ_ONLY.has(canonicalKey(key))) continue
    const path = userPath(key)
    if (path === "ignore") continue
    if (path.startsWith(URN.enterprise)) {
      const ext = (out[URN.enterprise] ??= {}) as Record<string, unknown>
      if (path === URN.enterprise) Object.assign(ext, canonicalise(v) as object)
      else ext[path.slice(URN.enterprise.length + 1)] = canonicalise(v)
    } else if (path.includes(".")) {
      const [root, sub] = path.split(".") as [string, string]
      ;((out[root] ??= {}) as Record<string, unknown>)[sub] = v
    } else out[path] = canonicalise(v)
  }
  return out
}

const libraryError = (e: unknown): ScimError => {
  if (e instanceof ScimError) return e
  const code = (e as { scimCode?: string }).scimCode
  const known: ReadonlyArray<ScimType> = ["invalidSyntax", "invalidPath", "noTarget", "invalidValue", "mutability"]
  const scimType = known.includes(code as ScimType) ? (code as ScimType) : "invalidPath"
  return bad(scimType, (e as Error)?.message?.replace(/^Invalid SCIM Patch: /, "") ?? "Invalid patch")
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v)

/** complex values whose sub-attributes a replace or add merges into (RFC 7644 §3.5.2.1, §3.5.2.3) */
const COMPLEX_TARGETS = new Set(["name", URN.enterprise, `${URN.enterprise}:manager`])
const MULTI_VALUED = new Set(["emails", "phoneNumbers"])

/**
 * A no-path add or replace (or one whose path names a complex value): each attribute it names is
 * set; a complex one (name, the enterprise extension and its manager) keeps the sub-attributes the
 * value does not name; an add to a multi-valued attribute appends. `doc` is the caller's copy.
 */
const applyValueObject = (doc: Record<string, unknown>, op: "add" | "replace", value: Record<string, unknown>) => {
  for (const [key, v] of Object.entries(value)) {
    const current = doc[key]
    if (key === URN.enterprise && isObject(v)) {
      const ext: Record<string, unknown> = isObject(current) ? { ...current } : {}
      for (const [sub, sv] of Object.entries(v)) {
        ext[sub] = sub === "manager" && isObject(sv) && isObject(ext.manager) ? { ...ext.manager, ...sv } : sv
      }
      doc[key] = ext
    } else if (key === "name" && isObject(v) && isObject(current)) doc[key] = { ...current, ...v }
    else if (op === "add" && MULTI_VALUED.has(key) && v !== null && v !== undefined) {
      doc[key] = [...(Array.isArray(current) ? current : []), ...(Array.isArray(v) ? v : [v])]
    }
    else doc[key] = v
  }
}

/**
 * Applies the operations to a copy of a user document (the caller's stays as it was, so it can be
 * compared with the result); the result, validated, or the first failure.
 */
export const patchUser = (doc: Record<string, unknown>, operations: ReadonlyArray<Operation>): Either.Either<UserInput, ScimError> => {
  try {
    let current: Record<string, unknown> = structuredClone({ schemas: [URN.user], ...doc })
    for (const operation of operations) {
      if (operation.path === undefined) {
        applyValueObject(current, operation.op as "add" | "replace", noPathValue(operation.value))
        continue
      }
      const path = userPath(operation.path)
      if (path === "ignore") continue
      if (operation.op !== "remove" && COMPLEX_TARGETS.has(path) && isObject(operation.value)) {
        applyValueObject(current, operation.op, noPathValue({ [path]: operation.value }))
        continue
      }
      if (operation.op !== "add" && filteredTargets(current, path) === 0) {
        throw bad("noTarget", `No element matches ${operation.path}`)
      }
      const op = (operation.op === "remove"
        ? { op: "remove", path, ...(operation.value !== undefined ? { value: operation.value } : {}) }
        : { op: operation.op, path, value: canonicalise(operation.value) }) as ScimPatchOperation
      current = scimPatch(current as any, [op]) as Record<string, unknown>
    }
    return decodeUser(current)
  } catch (e) {
    return Either.left(libraryError(e))
  }
}

export interface GroupChanges {
  displayName?: string
  externalId?: string | null
  replaceMembers?: Set<string>
  readonly add: Set<string>
  readonly remove: Set<string>
  /** members a `members[value eq "..."]` remove named: each must be a member (else noTarget) */
  readonly mustExist: Set<string>
}

const memberValues = (value: unknown): Array<string> => {
  const list = Array.isArray(value) ? value : [value]
  return list.map((m) => {
    const v = m !== null && typeof m === "object" ? (canonicalise(m) as Record<string, unknown>).value : undefined
    if (typeof v !== "string" || v.length === 0 || v.length > 64) throw bad("invalidValue", "Each member needs a value (a user id)")
    return v
  })
}

/** Turns group PATCH operations into the changes to make; membership is checked by the caller. */
export const patchGroup = (operations: ReadonlyArray<Operation>): Either.Either<GroupChanges, ScimError> => {
  try {
    const changes: GroupChanges = { add: new Set(), remove: new Set(), mustExist: new Set() }
    let count = 0
    const addMembers = (values: Array<string>) => {
      count += values.length
      for (const v of values) {
        if (changes.replaceMembers !== undefined) changes.replaceMembers.add(v)
        else {
          changes.remove.delete(v)
          changes.add.add(v)
        }
      }
    }
    const removeMembers = (values: Array<string>) => {
      count += values.length
      for (const v of values) {
        if (changes.replaceMembers !== undefined) changes.replaceMembers.delete(v)
        else {
          changes.add.delete(v)
          changes.remove.add(v)
        }
      }
    }
    const setScalar = (key: string, value: unknown, op: string) => {
      if (key === "displayName") {
        if (op === "remove" || typeof value !== "string" || value.trim() === "" || value.length > 256) {
          throw bad("invalidValue", "displayName must be a non-empty string")
        }
        changes.displayName = value.trim()
      } else if (key === "externalId") {
        if (op === "remove" || value === null) changes.externalId = null
        else if (typeof value !== "string" || value.length > 256) throw bad("invalidValue", "externalId must be a string")
        else changes.externalId = value
      } else if (READ_ONLY.has(key)) throw bad("mutability", `${key} is read-only`)
      else throw bad("invalidPath", `Unknown attribute ${key}`)
    }
    for (const operation of operations) {
      if (operation.path === undefined) {
        const value = operation.value
        if (value === null || typeof value !== "object" || Array.isArray(value)) throw bad("invalidValue", "A no-path operation needs an object value")
        for (const [k, v] of Object.entries(value)) {
          const key = canonicalKey(stripUrn(k))
          // Okta's displayName replace sends { id, displayName }: echoed read-only members change nothing
          if (READ_ONLY.has(key)) continue
          if (key === "members") {
            if (operation.op === "replace") {
              changes.replaceMembers = new Set(memberValues(v))
              changes.add.clear()
              changes.remove.clear()
              count += changes.replaceMembers.size
            } else addMembers(memberValues(v))
          } else setScalar(key, v, operation.op)
        }
        continue
      }
      const path = stripUrn(operation.path)
      const filtered = /^members\s*\[\s*value\s+eq\s+"([^"]{1,64})"\s*\]$/i.exec(path)
      if (filtered !== null) {
        if (operation.op !== "remove") throw bad("invalidPath", "Only remove takes a members filter")
        changes.mustExist.add(filtered[1]!)
        removeMembers([filtered[1]!])
        continue
      }
      const key = canonicalKey(path)
      if (key === "members") {
        if (operation.op === "add") addMembers(memberValues(operation.value))
        else if (operation.op === "remove") {
          if (operation.value === undefined) {
            changes.replaceMembers = new Set()
            changes.add.clear()
            changes.remove.clear()
          } else removeMembers(memberValues(operation.value))
        } else {
          changes.replaceMembers = new Set(memberValues(operation.value))
          changes.add.clear()
          changes.remove.clear()
          count += changes.replaceMembers.size
        }
      } else if (path.includes("[") || path.includes(".")) throw bad("invalidPath", `Unsupported path ${operation.path}`)
      else setScalar(key, operation.value, operation.op)
      if (count > MAX_MEMBERS_PER_REQUEST) throw bad("invalidValue", `At most ${MAX_MEMBERS_PER_REQUEST} members per request`)
    }
    if (count > MAX_MEMBERS_PER_REQUEST) throw bad("invalidValue", `At most ${MAX_MEMBERS_PER_REQUEST} members per request`)
    return Either.right(changes)
  } catch (e) {
    return Either.left(libraryError(e))
  }
}
