/**
 * The User and Group resources as stored (decisions §11): one Effect Schema per resource type that
 * coerces what identity providers send (Entra's "True"/"False" strings, a bare manager id) and
 * drops attributes we do not store, and the attribute table filters are compiled against (which
 * column or JSON path, which type, whether strings compare exactly: RFC 7643 makes userName, names
 * and emails case-insensitive, id and externalId exact).
 */
import { Either, ParseResult, Schema } from "effect"
import { ScimError, scimFail, URN } from "./Scim.ts"

/** a boolean, or the strings "true"/"false" in any case (Entra ID sends "False") */
const BooleanLike = Schema.Union(
  Schema.Boolean,
  Schema.transformOrFail(Schema.String, Schema.Boolean, {
    strict: true,
    decode: (s, _, ast) =>
      /^true$/i.test(s.trim())
        ? ParseResult.succeed(true)
        : /^false$/i.test(s.trim())
        ? ParseResult.succeed(false)
        : ParseResult.fail(new ParseResult.Type(ast, s, "expected a boolean")),
    encode: (b) => ParseResult.succeed(String(b))
  })
)

const Str = (max = 1024) => Schema.String.pipe(Schema.maxLength(max))
const Opt = <S extends Schema.Schema.Any>(s: S) => Schema.optional(Schema.NullOr(s))

const MultiValue = Schema.Struct({
  value: Opt(Str()),
  type: Opt(Str(64)),
  primary: Opt(BooleanLike),
  display: Opt(Str())
})

/** a manager given as its id (what Entra ID sends on a path) or as { value } */
const Manager = Schema.Union(
  Schema.transform(Str(), Schema.Struct({ value: Schema.String }), {
    strict: true,
    decode: (value) => ({ value }),
    encode: (m) => m.value
  }),
  Schema.Struct({ value: Opt(Str()), displayName: Opt(Str()), $ref: Opt(Str(2048)) })
)

export const UserInput = Schema.Struct({
  userName: Schema.String.pipe(Schema.trimmed(), Schema.minLength(1), Schema.maxLength(256)),
  externalId: Opt(Str(256)),
  active: Opt(BooleanLike),
  displayName: Opt(Str()),
  name: Opt(Schema.Struct({ givenName: Opt(Str()), familyName: Opt(Str()), formatted: Opt(Str()) })),
  emails: Opt(Schema.Array(MultiValue).pipe(Schema.maxItems(20))),
  phoneNumbers: Opt(Schema.Array(MultiValue).pipe(Schema.maxItems(20))),
  [URN.enterprise]: Opt(Schema.Struct({ employeeNumber: Opt(Str(256)), department: Opt(Str()), manager: Opt(Manager) }))
})
export type UserInput = Schema.Schema.Type<typeof UserInput>

export const GroupInput = Schema.Struct({
  displayName: Schema.String.pipe(Schema.trimmed(), Schema.minLength(1), Schema.maxLength(256)),
  externalId: Opt(Str(256)),
  members: Opt(Schema.Array(Schema.Struct({ value: Str(64), display: Opt(Str()), $ref: Opt(Str(2048)) })).pipe(Schema.maxItems(1000)))
})
export type GroupInput = Schema.Schema.Type<typeof GroupInput>

/** Attributes of the User schema that we accept and do not store (IdPs send them by default). */
export const IGNORED_USER_ATTRIBUTES = new Set([
  "title", "nickname", "profileurl", "usertype", "preferredlanguage", "locale", "timezone", "addresses", "ims",
  "photos", "roles", "entitlements", "x509certificates", "password", "groups"
])

/** keys in any case → the canonical key (attribute names are case-insensitive, RFC 7643 §2.1) */
const canonicalKeys: Record<string, string> = {}
for (const k of ["userName", "externalId", "active", "displayName", "name", "emails", "phoneNumbers", "schemas", "id", "meta",
  "givenName", "familyName", "formatted", "value", "type", "primary", "display", "members", "employeeNumber",
  "department", "manager", "$ref", "displayName", URN.enterprise, URN.agentauth]) canonicalKeys[k.toLowerCase()] = k

export const canonicalKey = (key: string) => canonicalKeys[key.toLowerCase()] ?? key

/** a JSON object with its keys (recursively, in objects and arrays) put in canonical case; bounded depth */
export const canonicalise = (value: unknown, depth = 0): unknown => {
  if (depth > 8) return value
  if (Array.isArray(value)) return value.map((v) => canonicalise(v, depth + 1))
  if (value === null || typeof value !== "object") return value
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) out[canonicalKey(k)] = canonicalise(v, depth + 1)
  return out
}

const decodeOrFail = <A, I>(schema: Schema.Schema<A, I>, what: string) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "first" })
  return (input: unknown): Either.Either<A, ScimError> =>
    Either.mapLeft(decode(input), (e) => {
      const issue = ParseResult.ArrayFormatter.formatErrorSync(e)[0]
      const path = issue?.path.join(".") ?? ""
      return scimFail.badRequest("invalidValue", `Invalid ${what}${path ? ` attribute ${path}` : ""}: ${issue?.message ?? "invalid"}`)
    })
}

const decodeUserStrict = decodeOrFail(UserInput, "User")
const decodeGroupStrict = decodeOrFail(GroupInput, "Group")
/** a body or patched document; attribute names in any case (RFC 7643 §2.1) */
export const decodeUser = (input: unknown) => decodeUserStrict(canonicalise(input))
export const decodeGroup = (input: unknown) => decodeGroupStrict(canonicalise(input))

/** How a filter attribute is read in SQL (alias `u`/`g` for the resource row, `e` for a multi-valued element). */
export type AttrType = "string" | "boolean" | "dateTime" | "reference"
export interface SimpleAttr {
  readonly kind: "simple"
  readonly sql: string
  readonly type: AttrType
  readonly caseExact: boolean
}
export interface MultiAttr {
  readonly kind: "multi"
  /** FROM clause (and correlation) of the elements, aliased `e` */
  readonly from: string
  readonly sub: Record<string, SimpleAttr>
  /** the sub-attribute a filter without one compares ("emails eq x" → emails.value) */
  readonly defaultSub: string
}
export type AttrDef = SimpleAttr | MultiAttr

const s = (sql: string, caseExact = false, type: AttrType = "string"): SimpleAttr => ({ kind: "simple", sql, type, caseExact })
const jsonArray = (key: string): MultiAttr => ({
  kind: "multi",
  from: `jsonb_array_elements(COALESCE(u.resource->'${key}', '[]'::jsonb)) AS e`,
  sub: {
    value: s(`e->>'value'`),
    type: s(`e->>'type'`),
    display: s(`e->>'display'`),
    primary: s(`(e->>'primary')::boolean`, true, "boolean")
  },
  defaultSub: "value"
})
const ent = `u.resource->'${URN.enterprise}'`

export const USER_ATTRIBUTES: Record<string, AttrDef> = {
  "id": s("u.id", true),
  "externalid": s("u.external_id", true),
  "username": s("u.user_name"),
  "displayname": s("u.display_name"),
  "active": s("u.active", true, "boolean"),
  "name.givenname": s(`u.resource->'name'->>'givenName'`),
  "name.familyname": s(`u.resource->'name'->>'familyName'`),
  "name.formatted": s(`u.resource->'name'->>'formatted'`),
  "emails": jsonArray("emails"),
  "phonenumbers": jsonArray("phoneNumbers"),
  "employeenumber": s(`${ent}->>'employeeNumber'`, true),
  "department": s(`${ent}->>'department'`),
  "manager.value": s(`${ent}->'manager'->>'value'`, true),
  "manager": s(`${ent}->'manager'->>'value'`, true),
  "principalid": s("u.principal_id", true),
  "meta.created": s("u.created_at", true, "dateTime"),
  "meta.lastmodified": s("u.updated_at", true, "dateTime")
}

export const GROUP_ATTRIBUTES: Record<string, AttrDef> = {
  "id": s("g.id", true),
  "externalid": s("g.external_id", true),
  "displayname": s("g.display_name"),
  "members": {
    kind: "multi",
    from: `scim_group_members AS e WHERE e.group_id = g.id`,
    sub: { value: s("e.user_id", true) },
    defaultSub: "value"
  },
  "meta.created": s("g.created_at", true, "dateTime"),
  "meta.lastmodified": s("g.updated_at", true, "dateTime")
}

/** Strips a schema URN from an attribute path: core URNs entirely, extension URNs to their attribute. */
export const stripUrn = (path: string): string => {
  const lower = path.toLowerCase()
  for (const urn of [URN.user, URN.group, URN.enterprise, URN.agentauth]) {
    if (lower.startsWith(urn.toLowerCase() + ":")) return path.slice(urn.length + 1)
  }
  return path
}
