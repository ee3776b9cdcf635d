/**
 * SCIM Groups (decisions §11): create, replace, PATCH members (add/remove/replace, at most 1,000
 * per request), delete. Members must be live users of the same developer. A change of membership
 * or name commits with `scim.group.updated { groupId, added, removed }` and its audit entry.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { AuditedEvents } from "../platform/AuditedEvents.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { compileFilter } from "./Filter.ts"
import { type GroupChanges, patchGroup, readPatchBody } from "./Patch.ts"
import { isUniqueViolation, makeRepo, type GroupRow } from "./Repo.ts"
import { decodeGroup, GROUP_ATTRIBUTES } from "./Resources.ts"
import { matchesVersion, type ScimError, scimFail } from "./Scim.ts"
import { listWindow, type ListQuery } from "./View.ts"

export interface GroupWithMembers {
  readonly row: GroupRow
  /** undefined when members were excluded */
  readonly members: ReadonlyArray<{ userId: string; display: string }> | undefined
}

export interface GroupsService {
  readonly list: (developerId: string, query: ListQuery, withMembers: boolean) => Effect.Effect<
    { total: number; startIndex: number; groups: ReadonlyArray<GroupWithMembers> }, ScimError>
  readonly get: (developerId: string, id: string, withMembers: boolean) => Effect.Effect<GroupWithMembers, ScimError>
  readonly create: (developerId: string, body: unknown) => Effect.Effect<GroupWithMembers, ScimError>
  readonly replace: (developerId: string, id: string, body: unknown, ifMatch: string | undefined) => Effect.Effect<GroupWithMembers, ScimError>
  readonly patch: (developerId: string, id: string, body: unknown, ifMatch: string | undefined, withMembers: boolean) => Effect.Effect<GroupWithMembers, ScimError>
  readonly remove: (developerId: string, id: string, ifMatch: string | undefined) => Effect.Effect<void, ScimError>
}

export class Groups extends Context.Tag("agent-auth/DirectoryGroups")<Groups, GroupsService>() {}

export const GroupsLive = Layer.effect(
  Groups,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const audited = yield* AuditedEvents
    const repo = makeRepo(sql)

    const withMembers = (rows: ReadonlyArray<GroupRow>, load: boolean) =>
      Effect.gen(function*() {
        if (!load) return rows.map((row) => ({ row, members: undefined }))
        const members = yield* repo.membersOf(rows.map((r) => r.id))
        return rows.map((row) => ({ row, members: members.filter((m) => m.groupId === row.id) }))
      }).pipe(Effect.orDie)

    /**
     * Inside the membership change's transaction: locks every user it touches (`add` and `remove`)
     * and fails unless each one to add is a live user of the developer.
     */
    const lockMembers = (developerId: string, add: ReadonlyArray<string>, remove: ReadonlyArray<string>) =>
      Effect.flatMap(repo.lockUsers(developerId, [...add, ...remove]), (found) => {
        const missing = add.filter((id) => !found.has(id))
        return missing.length === 0
          ? Effect.void
          : Effect.fail(scimFail.badRequest("invalidValue", `Unknown member: ${missing[0]}`))
      })

    const recordChange = (developerId: string, groupId: string, added: ReadonlyArray<string>, removed: ReadonlyArray<string>, action: string) =>
      audited.recordMany([{
        developerId,
        type: "scim.group.updated",
        data: { groupId, added, removed },
        audit: { action, metadata: { groupId, added: added.length, removed: removed.length } }
      }])

    const sqlErrors = <A, R>(effect: Effect.Effect<A, ScimError | import("@effect/sql").SqlError.SqlError, R>) =>
      effect.pipe(
        Effect.catchIf(isUniqueViolation, () => Effect.fail(scimFail.conflict("The group changed concurrently; try again"))),
        Effect.catchTag("SqlError", Effect.die)
      ) as Effect.Effect<A, ScimError, R>

    const list: GroupsService["list"] = (developerId, query, load) =>
      Effect.gen(function*() {
        const window = yield* listWindow(query)
        let filter = undefined
        if (query.filter !== undefined && query.filter.trim() !== "") {
          const compiled = compileFilter(query.filter, GROUP_ATTRIBUTES, 2)
          if ("_tag" in compiled) return yield* Effect.fail(compiled)
          filter = compiled
        }
        const { total, rows } = yield* repo.listGroups(developerId, filter, window.startIndex - 1, window.count).pipe(Effect.orDie)
        return { total, startIndex: window.startIndex, groups: yield* withMembers(rows, load) }
      })

    const get: GroupsService["get"] = (developerId, id, load) =>
      Effect.gen(function*() {
        const row = yield* repo.findGroup(developerId, id).pipe(Effect.orDie)
        if (row === undefined) return yield* Effect.fail(scimFail.notFound("Group not found"))
        return (yield* withMembers([row], load))[0]!
      })

    const create: GroupsService["create"] = (developerId, body) =>
      Effect.gen(function*() {
        const input = yield* decodeGroup(body)
        const members = [...new Set((input.members ?? []).map((m) => m.value))]
        const ms = yield* nowMillis
        const id = newId("scimgrp", ms)
        const row = yield* sqlErrors(sql.withTransaction(Effect.gen(function*() {
          // checked under lock in the transaction that adds them: a user deleted meanwhile is refused
          yield* lockMembers(developerId, members, [])
          const row = yield* repo.insertGroup(id, developerId, input.displayName, input.externalId ?? null, new Date(ms))
          const { added } = yield* repo.changeMembers(developerId, id, members, [])
          yield* repo.touchUsers(added, new Date(ms))
          yield* recordChange(developerId, id, added, [], "service.scim.group_created")
          return row
        })))
        return (yield* withMembers([row], true))[0]!
      })

    /** locks the group, checks If-Match, applies the changes; answers the group after */
    const write = (developerId: string, id: string, ifMatch: string | undefined, changes: GroupChanges) =>
      sqlErrors(sql.withTransaction(Effect.gen(function*() {
        const row = yield* repo.findGroup(developerId, id, true)
        if (row === undefined) return yield* Effect.fail(scimFail.notFound("Group not found"))
        if (!matchesVersion(ifMatch, row.version)) return yield* Effect.fail(scimFail.preconditionFailed())
        let add = [...changes.add]
        let remove = [...changes.remove]
        if (changes.mustExist.size > 0) {
          const present = yield* repo.isMember(id, [...changes.mustExist])
          const absent = [...changes.mustExist].find((m) => !present.has(m))
          if (absent !== undefined) return yield* Effect.fail(scimFail.badRequest("noTarget", `${absent} is not a member`))
        }
        if (changes.replaceMembers !== undefined) {
          const current = new Set(yield* repo.memberIds(id))
          add = [...changes.replaceMembers].filter((m) => !current.has(m))
          remove = [...current].filter((m) => !changes.replaceMembers!.has(m))
        }
        yield* lockMembers(developerId, add, remove)
        const { added, removed } = yield* repo.changeMembers(developerId, id, add, remove)
        const displayName = changes.displayName ?? row.displayName
        const externalId = changes.externalId === undefined ? row.externalId : changes.externalId
        if (added.length === 0 && removed.length === 0 && displayName === row.displayName && externalId === row.externalId) return row
        const ms = yield* nowMillis
        yield* repo.touchUsers([...added, ...removed], new Date(ms))
        const updated = yield* repo.updateGroup(id, displayName, externalId, new Date(ms))
        yield* recordChange(developerId, id, added, removed, "service.scim.group_updated")
        return updated
      })))

    const replace: GroupsService["replace"] = (developerId, id, body, ifMatch) =>
      Effect.gen(function*() {
        const input = yield* decodeGroup(body)
        const row = yield* write(developerId, id, ifMatch, {
          displayName: input.displayName,
          externalId: input.externalId ?? null,
          replaceMembers: new Set((input.members ?? []).map((m) => m.value)),
          add: new Set(),
          remove: new Set(),
          mustExist: new Set()
        })
        return (yield* withMembers([row], true))[0]!
      })

    const patch: GroupsService["patch"] = (developerId, id, body, ifMatch, load) =>
      Effect.gen(function*() {
        const operations = yield* readPatchBody(body)
        const changes = yield* patchGroup(operations)
        const row = yield* write(developerId, id, ifMatch, changes)
        return (yield* withMembers([row], load))[0]!
      })

    const remove: GroupsService["remove"] = (developerId, id, ifMatch) =>
      sqlErrors(sql.withTransaction(Effect.gen(function*() {
        const row = yield* repo.findGroup(developerId, id, true)
        if (row === undefined) return yield* Effect.fail(scimFail.notFound("Group not found"))
        if (!matchesVersion(ifMatch, row.version)) return yield* Effect.fail(scimFail.preconditionFailed())
        const members = yield* repo.memberIds(id)
        yield* repo.lockUsers(developerId, members)
        const ms = yield* nowMillis
        yield* repo.deleteGroup(id, new Date(ms))
        yield* repo.touchUsers(members, new Date(ms))
        yield* recordChange(developerId, id, [], members, "service.scim.group_deleted")
      })))

    return { list, get, create, replace, patch, remove }
  })
)
