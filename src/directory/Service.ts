/**
 * The directory (decisions §11): SCIM tokens and settings, and the users identity providers
 * provision. Every change commits with its event and its `service.scim.*` audit entry; a user
 * deactivated (`active: false`) or deleted is deprovisioned in the same transaction: with
 * `deprovision: "revoke"`, the principal's pending consent requests are denied and every active
 * grant is revoked through the grants' one revocation path (cascade, bundles, grant.revoked); either
 * way the person's SSO and principal sessions end (DirectorySessions, provided by SSO).
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Either, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { Config } from "../Config.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { AuditedEvents } from "../platform/AuditedEvents.ts"
import { Events } from "../platform/Events.ts"
import { BadRequest, Conflict, NotFound } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis, parseDuration } from "../platform/Time.ts"
import { GroupsLive } from "./Groups.ts"
import { DirectoryRevocations, DirectorySessions } from "./Ports.ts"
import { patchUser, readPatchBody } from "./Patch.ts"
import { isUniqueViolation, makeRepo, type UserRow, type UserValues } from "./Repo.ts"
import { decodeUser, USER_ATTRIBUTES, type UserInput } from "./Resources.ts"
import { matchesVersion as matches, type ScimError, scimFail, URN } from "./Scim.ts"
import { ScimTokensLive } from "./Tokens.ts"
import { compileFilter } from "./Filter.ts"
import { listWindow, type ListQuery } from "./View.ts"
import { sha256Hex } from "../platform/Hash.ts"

export interface Settings {
  readonly principalIdAttribute: "userName" | "externalId" | "id"
  readonly deprovision: "revoke" | "none"
}
const DEFAULT_SETTINGS: Settings = { principalIdAttribute: "userName", deprovision: "revoke" }
const MAX_LIVE_TOKENS = 10

export interface TokenView {
  readonly id: string
  readonly label: string
  readonly createdAt: string
  readonly lastUsedAt: string | null
  readonly expiresAt: string | null
}

export interface DirectoryService {
  readonly createToken: (developerId: string, input: { label: string; expiresIn?: string | undefined }) => Effect.Effect<
    TokenView & { tokenId: string; token: string }, BadRequest | Conflict>
  readonly listTokens: (developerId: string) => Effect.Effect<{ tokens: Array<TokenView> }>
  readonly deleteToken: (developerId: string, id: string) => Effect.Effect<void, NotFound>
  readonly getSettings: (developerId: string) => Effect.Effect<Settings>
  readonly updateSettings: (developerId: string, input: Partial<Settings>) => Effect.Effect<Settings, Conflict>
  readonly listUsers: (developerId: string, query: ListQuery) => Effect.Effect<{ total: number; startIndex: number; rows: ReadonlyArray<UserRow> }, ScimError>
  readonly getUser: (developerId: string, id: string) => Effect.Effect<UserRow, ScimError>
  readonly createUser: (developerId: string, body: unknown) => Effect.Effect<UserRow, ScimError>
  readonly replaceUser: (developerId: string, id: string, body: unknown, ifMatch: string | undefined) => Effect.Effect<UserRow, ScimError>
  readonly patchUser: (developerId: string, id: string, body: unknown, ifMatch: string | undefined) => Effect.Effect<UserRow, ScimError>
  readonly deleteUser: (developerId: string, id: string, ifMatch: string | undefined) => Effect.Effect<void, ScimError>
}

export class Directory extends Context.Tag("agent-auth/Directory")<Directory, DirectoryService>() {}


const tokenView = (r: { id: string; label: string; createdAt: Date; lastUsedAt: Date | null; expiresAt: Date | null }): TokenView => ({
  id: r.id,
  label: r.label,
  createdAt: r.createdAt.toISOString(),
  lastUsedAt: r.lastUsedAt?.toISOString() ?? null,
  expiresAt: r.expiresAt?.toISOString() ?? null
})

/** drops null and undefined members (what the IdP left out is not stored) */
const compact = <T extends Record<string, unknown>>(o: T | null | undefined): Record<string, unknown> | undefined => {
  if (o === null || o === undefined) return undefined
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(o)) if (v !== null && v !== undefined) out[k] = v
  return Object.keys(out).length === 0 ? undefined : out
}

/** the stored form of a validated user; `active` omitted keeps `previous` (PUT), else true */
export const userValues = (input: UserInput, previousActive?: boolean): UserValues => {
  const resource: Record<string, unknown> = {}
  const name = compact(input.name ?? undefined)
  if (name) resource.name = name
  for (const key of ["emails", "phoneNumbers"] as const) {
    const list = (input[key] ?? []).map((m) => compact(m)).filter((m) => m !== undefined)
    if (list.length > 0) resource[key] = list
  }
  const ext = input[URN.enterprise]
  if (ext) {
    const e = compact({ employeeNumber: ext.employeeNumber, department: ext.department, manager: compact(ext.manager ?? undefined) })
    if (e) resource[URN.enterprise] = e
  }
  return {
    userName: input.userName,
    externalId: input.externalId ?? null,
    displayName: input.displayName ?? null,
    active: input.active ?? previousActive ?? true,
    resource
  }
}

/** JSON with object keys sorted (jsonb does not keep the order they were sent in) */
const stable = (value: unknown): string =>
  JSON.stringify(value ?? null, (_k, v) =>
    v !== null && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v)

/** the attributes that differ between two stored forms (for scim.user.updated: names only) */
const changedAttributes = (a: UserValues, b: UserValues): Array<string> => {
  const changed: Array<string> = []
  for (const k of ["userName", "externalId", "displayName", "active"] as const) if (a[k] !== b[k]) changed.push(k)
  for (const k of ["name", "emails", "phoneNumbers", URN.enterprise]) {
    if (stable(a.resource[k]) !== stable(b.resource[k])) changed.push(k === URN.enterprise ? "enterprise" : k)
  }
  return changed
}

const valuesOf = (row: UserRow): UserValues => ({
  userName: row.userName,
  externalId: row.externalId,
  displayName: row.displayName,
  active: row.active,
  resource: row.resource
})

/** the SCIM document of a stored user, as PATCH operates on it */
export const userDocument = (row: UserRow): Record<string, unknown> => ({
  userName: row.userName,
  ...(row.externalId !== null ? { externalId: row.externalId } : {}),
  ...(row.displayName !== null ? { displayName: row.displayName } : {}),
  active: row.active,
  ...row.resource
})

export const DirectoryServiceLive = Layer.effect(
  Directory,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const audit = yield* AuditChain
    const audited = yield* AuditedEvents
    const events = yield* Events
    const revocations = yield* DirectoryRevocations
    const sessions = yield* DirectorySessions
    const repo = makeRepo(sql)

    const getSettings = (developerId: string) =>
      sql<Settings>`SELECT principal_id_attribute, deprovision FROM scim_settings WHERE developer_id = ${developerId}`.pipe(
        Effect.map((rows) => rows[0] ?? DEFAULT_SETTINGS),
        Effect.orDie
      )

    const updateSettings: DirectoryService["updateSettings"] = (developerId, input) =>
      sql.withTransaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        yield* sql`INSERT INTO scim_settings (developer_id, updated_at) VALUES (${developerId}, ${new Date(ms)})
                   ON CONFLICT (developer_id) DO NOTHING`
        const [current] = yield* sql<Settings>`SELECT principal_id_attribute, deprovision FROM scim_settings
                                               WHERE developer_id = ${developerId} FOR UPDATE`
        const next: Settings = { ...current!, ...input }
        if (next.principalIdAttribute !== current!.principalIdAttribute) {
          const [any] = yield* sql`SELECT 1 FROM scim_users WHERE developer_id = ${developerId} LIMIT 1`
          if (any !== undefined) {
            return yield* Effect.fail(new Conflict({ message: "principalIdAttribute cannot change once users are provisioned" }))
          }
        }
        yield* sql`UPDATE scim_settings SET principal_id_attribute = ${next.principalIdAttribute}, deprovision = ${next.deprovision},
                   updated_at = ${new Date(ms)} WHERE developer_id = ${developerId}`
        const changed = (Object.keys(input) as Array<keyof Settings>).filter((k) => current![k] !== next[k])
        if (changed.length > 0) yield* audit.append({ developerId, action: "service.scim.settings_changed", metadata: { changed } })
        return next
      })).pipe(Effect.catchTag("SqlError", Effect.die))

    const createToken: DirectoryService["createToken"] = (developerId, input) =>
      Effect.gen(function*() {
        const label = input.label.trim()
        if (label.length < 1 || label.length > 100) return yield* Effect.fail(new BadRequest({ message: "label must be 1-100 characters" }))
        let ttl: number | undefined
        if (input.expiresIn !== undefined) {
          ttl = parseDuration(input.expiresIn, "smhd")
          if (ttl === undefined || ttl < 86_400 || ttl > 730 * 86_400) {
            return yield* Effect.fail(new BadRequest({ message: "expiresIn must be between 1d and 730d (e.g. 90d)" }))
          }
        }
        const ms = yield* nowMillis
        const id = newId("scimtok", ms)
        const token = `scim_${randomBytes(32).toString("base64url")}`
        const expiresAt = ttl === undefined ? null : new Date(ms + ttl * 1000)
        return yield* sql.withTransaction(Effect.gen(function*() {
          // the developer row serialises token creation, so two requests cannot both take the 10th slot
          yield* sql`SELECT id FROM developers WHERE id = ${developerId} FOR UPDATE`
          const [live] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM scim_tokens WHERE developer_id = ${developerId}
            AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${new Date(ms)})`
          if (Number(live!.n) >= MAX_LIVE_TOKENS) {
            return yield* Effect.fail(new Conflict({ message: `At most ${MAX_LIVE_TOKENS} live SCIM tokens; delete one first` }))
          }
          yield* sql`INSERT INTO scim_tokens (id, developer_id, token_hash, label, created_at, expires_at)
                     VALUES (${id}, ${developerId}, ${sha256Hex(token)}, ${label}, ${new Date(ms)}, ${expiresAt})`
          yield* audit.append({ developerId, action: "service.scim.token_created", metadata: { tokenId: id } })
          const view = tokenView({ id, label, createdAt: new Date(ms), lastUsedAt: null, expiresAt })
          return { ...view, tokenId: id, token }
        })).pipe(Effect.catchTag("SqlError", Effect.die))
      })

    const listTokens = (developerId: string) =>
      sql<{ id: string; label: string; createdAt: Date; lastUsedAt: Date | null; expiresAt: Date | null }>`
        SELECT id, label, created_at, last_used_at, expires_at FROM scim_tokens
        WHERE developer_id = ${developerId} AND revoked_at IS NULL ORDER BY created_at DESC, id DESC`.pipe(
        Effect.map((rows) => ({ tokens: rows.map(tokenView) })),
        Effect.orDie
      )

    const deleteToken: DirectoryService["deleteToken"] = (developerId, id) =>
      sql.withTransaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        const rows = yield* sql`UPDATE scim_tokens SET revoked_at = ${new Date(ms)}
                                WHERE id = ${id} AND developer_id = ${developerId} AND revoked_at IS NULL RETURNING id`
        if (rows.length === 0) return yield* Effect.fail(new NotFound({ message: "SCIM token not found" }))
        yield* audit.append({ developerId, action: "service.scim.token_revoked", metadata: { tokenId: id } })
      })).pipe(Effect.catchTag("SqlError", Effect.die))

    /**
     * The person's sessions end whatever the setting (an inactive principal is not signed in). With
     * `deprovision: "revoke"`: pending requests denied first (an approval racing this waits on their
     * lock), then the grants revoked and the passkeys removed (reactivation restores nothing).
     */
    const deprovision = (developerId: string, row: UserRow, settings: Settings) =>
      Effect.gen(function*() {
        yield* sessions.endForPrincipal(developerId, row.principalId)
        if (settings.deprovision !== "revoke") return [] as ReadonlyArray<string>
        return yield* revocations.revokeForPrincipal(developerId, row.principalId)
      })

    const deprovisionedEvent = (developerId: string, row: UserRow, revoked: ReadonlyArray<string>, deleted: boolean) => ({
      developerId,
      type: "scim.user.deprovisioned" as const,
      data: { scimUserId: row.id, principalId: row.principalId, revokedGrants: revoked.length },
      audit: {
        action: deleted ? "service.scim.user_deleted" : "service.scim.user_deprovisioned",
        principalId: row.principalId,
        metadata: { scimUserId: row.id, revokedGrants: revoked.length }
      }
    })

    const uniqueness = <A, R>(effect: Effect.Effect<A, ScimError | import("@effect/sql").SqlError.SqlError, R>) =>
      effect.pipe(
        Effect.catchIf(isUniqueViolation, () => Effect.fail(scimFail.conflict("A user with this userName or externalId already exists"))),
        Effect.catchTag("SqlError", Effect.die)
      ) as Effect.Effect<A, ScimError, R>

    const createUser: DirectoryService["createUser"] = (developerId, body) =>
      Effect.gen(function*() {
        const input = yield* decodeUser(body)
        const settings = yield* getSettings(developerId)
        const ms = yield* nowMillis
        const id = newId("scimuser", ms)
        const principalId = settings.principalIdAttribute === "userName"
          ? input.userName
          : settings.principalIdAttribute === "externalId" ? input.externalId : id
        if (principalId === null || principalId === undefined || principalId === "") {
          return yield* Effect.fail(scimFail.badRequest("invalidValue", "externalId is required: it names the principal (principalIdAttribute)"))
        }
        const values = userValues(input)
        return yield* uniqueness(sql.withTransaction(Effect.gen(function*() {
          const row = yield* repo.insertUser(id, developerId, principalId, values, new Date(ms))
          yield* audited.recordMany([{
            developerId,
            type: "scim.user.provisioned",
            data: { scimUserId: id, principalId },
            audit: { action: "service.scim.user_provisioned", principalId, metadata: { scimUserId: id } }
          }])
          if (!row.active) yield* audited.recordMany([deprovisionedEvent(developerId, row, yield* deprovision(developerId, row, settings), false)])
          return row
        })))
      })

    const getUser: DirectoryService["getUser"] = (developerId, id) =>
      Effect.flatMap(repo.findUser(developerId, id).pipe(Effect.orDie), (row) =>
        row === undefined ? Effect.fail(scimFail.notFound("User not found")) : Effect.succeed(row))

    /** writes `next` over the locked `row` (If-Match checked), with its events and any deprovisioning */
    const writeUser = (developerId: string, id: string, ifMatch: string | undefined, make: (row: UserRow) => Either.Either<UserValues, ScimError>) =>
      uniqueness(sql.withTransaction(Effect.gen(function*() {
        const row = yield* repo.findUser(developerId, id, true)
        if (row === undefined) return yield* Effect.fail(scimFail.notFound("User not found"))
        if (!matches(ifMatch, row.version)) return yield* Effect.fail(scimFail.preconditionFailed())
        // compared against a copy taken before `make` runs: nothing `make` does to what it was given
        // can hide a change (a PATCH once edited the loaded row in place and stored nothing)
        const before = structuredClone(valuesOf(row))
        const next = yield* make(row)
        const changed = changedAttributes(before, next)
        if (changed.length === 0) return row
        const ms = yield* nowMillis
        const updated = yield* repo.updateUser(id, next, new Date(ms))
        // A profile edit is an event only; the audit chain records who exists and who may act
        // (provisioning, deprovisioning, deletion, groups, tokens, settings). A chain entry per edit
        // would serialise an IdP's whole re-sync on the developer's chain head.
        yield* events.emit(developerId, "scim.user.updated", { scimUserId: id, changedAttributes: changed })
        if (row.active && !next.active) {
          yield* audited.recordMany([deprovisionedEvent(developerId, row, yield* deprovision(developerId, row, yield* getSettings(developerId)), false)])
        }
        return updated
      })))

    const replaceUser: DirectoryService["replaceUser"] = (developerId, id, body, ifMatch) =>
      Effect.gen(function*() {
        const input = yield* decodeUser(body)
        // a re-sync that changes nothing costs one read, no lock and no write
        const current = yield* repo.findUser(developerId, id).pipe(Effect.orDie)
        if (current === undefined) return yield* Effect.fail(scimFail.notFound("User not found"))
        if (!matches(ifMatch, current.version)) return yield* Effect.fail(scimFail.preconditionFailed())
        const next = userValues(input, current.active)
        const changed = changedAttributes(valuesOf(current), next)
        if (changed.length === 0) return current
        if (!(current.active && !next.active)) {
          // no deprovisioning: one statement writes the change and its event, if nothing moved meanwhile
          const ms = yield* nowMillis
          const written = yield* uniqueness(repo.updateUserAtVersion(
            developerId, id, current.version, next, new Date(ms), { scimUserId: id, changedAttributes: changed }, config.webhooks.maxAttempts
          ))
          if (written !== undefined) return written
        }
        return yield* writeUser(developerId, id, ifMatch, (row) => Either.right(userValues(input, row.active)))
      })

    const patchUserOp: DirectoryService["patchUser"] = (developerId, id, body, ifMatch) =>
      Effect.gen(function*() {
        const operations = yield* readPatchBody(body)
        return yield* writeUser(developerId, id, ifMatch, (row) =>
          Either.map(patchUser(userDocument(row), operations), (input) => userValues(input, row.active)))
      })

    const deleteUser: DirectoryService["deleteUser"] = (developerId, id, ifMatch) =>
      uniqueness(sql.withTransaction(Effect.gen(function*() {
        const row = yield* repo.findUser(developerId, id, true)
        if (row === undefined) return yield* Effect.fail(scimFail.notFound("User not found"))
        if (!matches(ifMatch, row.version)) return yield* Effect.fail(scimFail.preconditionFailed())
        const ms = yield* nowMillis
        // its groups lose it: said as each group's update, as a membership PATCH would
        const groups = yield* repo.groupsOfUser(id)
        yield* repo.deleteUser(id, new Date(ms))
        if (groups.length > 0) {
          yield* events.emitMany(groups.map((groupId) => ({ developerId, type: "scim.group.updated" as const, data: { groupId, added: [], removed: [id] } })))
        }
        const revoked = row.active ? yield* deprovision(developerId, row, yield* getSettings(developerId)) : []
        yield* audited.recordMany([deprovisionedEvent(developerId, row, revoked, true)])
      })))

    const listUsers: DirectoryService["listUsers"] = (developerId, query) =>
      Effect.gen(function*() {
        const window = yield* listWindow(query)
        let filter = undefined
        if (query.filter !== undefined && query.filter.trim() !== "") {
          const compiled = compileFilter(query.filter, USER_ATTRIBUTES, 2)
          if ("_tag" in compiled) return yield* Effect.fail(compiled)
          filter = compiled
        }
        const { total, rows } = yield* repo.listUsers(developerId, filter, window.startIndex - 1, window.count).pipe(Effect.orDie)
        return { total, startIndex: window.startIndex, rows }
      })

    return {
      createToken, listTokens, deleteToken, getSettings, updateSettings,
      listUsers, getUser, createUser, replaceUser, patchUser: patchUserOp, deleteUser
    }
  })
)

/** needs its ports (DirectorySessions, DirectoryRevocations) from the capabilities above it, composed in src/Server.ts */
export const DirectoryLive = Layer.mergeAll(DirectoryServiceLive, GroupsLive, ScimTokensLive)
