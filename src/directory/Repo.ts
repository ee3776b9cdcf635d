/**
 * The directory's tables (sql/0015): SCIM users and groups, read and written only here. Lists
 * take a compiled filter (Filter.ts) and page with OFFSET (RFC 7644 startIndex/count, at most 200);
 * count and offset are parameters, so paging does not make a new statement text per page (texts
 * are prepared, platform/PgPool.ts).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { DELIVERY_CHANNEL, insertDeliveriesSql, nudgeDeliveryWorkers } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import type { CompiledFilter } from "./Filter.ts"

export interface UserRow {
  readonly id: string
  readonly developerId: string
  readonly principalId: string
  readonly userName: string
  readonly externalId: string | null
  readonly displayName: string | null
  readonly active: boolean
  readonly resource: Record<string, unknown>
  readonly version: number
  readonly createdAt: Date
  readonly updatedAt: Date
  readonly deletedAt: Date | null
}

export interface GroupRow {
  readonly id: string
  readonly developerId: string
  readonly displayName: string
  readonly externalId: string | null
  readonly version: number
  readonly createdAt: Date
  readonly updatedAt: Date
}

const USER_COLUMNS = `u.id, u.developer_id, u.principal_id, u.user_name, u.external_id, u.display_name, u.active, u.resource,
  u.version, u.created_at, u.updated_at, u.deleted_at`
const GROUP_COLUMNS = `g.id, g.developer_id, g.display_name, g.external_id, g.version, g.created_at, g.updated_at`

/** what a user row stores: indexed attributes as columns, the rest as `resource` */
export interface UserValues {
  readonly userName: string
  readonly externalId: string | null
  readonly displayName: string | null
  readonly active: boolean
  readonly resource: Record<string, unknown>
}

/** a PostgreSQL unique violation (two provisionings of one userName, in any order or instance) */
export const isUniqueViolation = (e: unknown) =>
  (e as { _tag?: string; cause?: { code?: unknown } })?._tag === "SqlError" &&
  String((e as { cause?: { code?: unknown } }).cause?.code) === "23505"

export const makeRepo = (sql: SqlClient.SqlClient) => {
  const parseResource = (r: UserRow): UserRow =>
    typeof r.resource === "string" ? { ...r, resource: JSON.parse(r.resource) } : r

  const findUser = (developerId: string, id: string, lock = false) =>
    sql.unsafe<UserRow>(
      `SELECT ${USER_COLUMNS} FROM scim_users u WHERE u.id = $1 AND u.developer_id = $2 AND u.deleted_at IS NULL${lock ? " FOR UPDATE" : ""}`,
      [id, developerId]
    ).pipe(Effect.map((rows) => rows[0] && parseResource(rows[0])))

  const listUsers = (developerId: string, filter: CompiledFilter | undefined, offset: number, count: number) =>
    Effect.gen(function*() {
      const where = `u.developer_id = $1 AND u.deleted_at IS NULL${filter ? ` AND (${filter.sql})` : ""}`
      const params = [developerId, ...(filter?.params ?? [])]
      // the page and the total in one round trip; a page past the end (or count 0) counts alone
      const rows = count === 0 ? [] : yield* sql.unsafe<UserRow & { total: number }>(
        `SELECT ${USER_COLUMNS}, count(*) OVER ()::int AS total FROM scim_users u WHERE ${where} ORDER BY u.created_at, u.id
         LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
        [...params, count, offset] as any
      )
      if (rows.length > 0) return { total: Number(rows[0]!.total), rows: rows.map(({ total: _, ...r }) => parseResource(r as UserRow)) }
      const [total] = yield* sql.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM scim_users u WHERE ${where}`, params as any)
      return { total: Number(total?.n ?? 0), rows: [] }
    })

  const insertUser = (id: string, developerId: string, principalId: string, v: UserValues, at: Date) =>
    sql.unsafe<UserRow>(
      `INSERT INTO scim_users AS u (id, developer_id, principal_id, user_name, external_id, display_name, active, resource, version,
         created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, 1, $9, $9) RETURNING ${USER_COLUMNS}`,
      [id, developerId, principalId, v.userName, v.externalId, v.displayName, v.active, JSON.stringify(v.resource), at]
    ).pipe(Effect.map((rows) => parseResource(rows[0]!)))

  const updateUser = (id: string, v: UserValues, at: Date) =>
    sql.unsafe<UserRow>(
      `UPDATE scim_users u SET user_name = $2, external_id = $3, display_name = $4, active = $5, resource = $6::jsonb,
         version = version + 1, updated_at = $7
       WHERE id = $1 RETURNING ${USER_COLUMNS}`,
      [id, v.userName, v.externalId, v.displayName, v.active, JSON.stringify(v.resource), at]
    ).pipe(Effect.map((rows) => parseResource(rows[0]!)))

  /**
   * One statement: the update, if the row is still at `version`, and its scim.user.updated event with
   * its deliveries (the outbox, atomically). Undefined when the row moved on (the caller takes the
   * locking path). A re-sync of many users thus costs a read and this write each.
   */
  const updateUserAtVersion = (
    developerId: string, id: string, version: number, v: UserValues, at: Date, data: Record<string, unknown>, maxAttempts: number
  ) =>
    sql.unsafe<UserRow & { notified: string | null }>(
      `WITH updated AS (
         UPDATE scim_users u SET user_name = $4, external_id = $5, display_name = $6, active = $7, resource = $8::jsonb,
           version = version + 1, updated_at = $9
         WHERE id = $1 AND developer_id = $2 AND version = $3 AND deleted_at IS NULL RETURNING ${USER_COLUMNS}
       ), event AS (
         INSERT INTO events (id, developer_id, type, data, created_at)
         SELECT $10, developer_id, 'scim.user.updated', $11::jsonb, $9 FROM updated
         RETURNING id, developer_id, type, data
       ), deliveries AS (${insertDeliveriesSql("$12", "$9")})
       SELECT updated.*, (SELECT pg_notify($13, $2) WHERE EXISTS (SELECT 1 FROM deliveries))::text AS notified FROM updated`,
      [id, developerId, version, v.userName, v.externalId, v.displayName, v.active, JSON.stringify(v.resource), at,
        newId("evt", at.getTime()), JSON.stringify(data), maxAttempts, DELIVERY_CHANNEL] as any
    ).pipe(Effect.map((rows) => {
      const row = rows[0]
      if (row === undefined) return undefined
      if (row.notified !== null) nudgeDeliveryWorkers()
      const { notified: _, ...user } = row
      return parseResource(user as UserRow)
    }))

  /** soft delete: the row stays (90 days, for audit), its userName and externalId are free again */
  const deleteUser = (id: string, at: Date) =>
    Effect.zipRight(
      sql`DELETE FROM scim_group_members WHERE user_id = ${id}`,
      sql`UPDATE scim_users SET deleted_at = ${at}, active = false, updated_at = ${at}, version = version + 1 WHERE id = ${id}`
    )

  const groupsOfUser = (userId: string) =>
    sql<{ groupId: string }>`SELECT group_id FROM scim_group_members WHERE user_id = ${userId}`.pipe(
      Effect.map((rows) => rows.map((r) => r.groupId))
    )

  const findGroup = (developerId: string, id: string, lock = false) =>
    sql.unsafe<GroupRow>(
      `SELECT ${GROUP_COLUMNS} FROM scim_groups g WHERE g.id = $1 AND g.developer_id = $2 AND g.deleted_at IS NULL${lock ? " FOR UPDATE" : ""}`,
      [id, developerId]
    ).pipe(Effect.map((rows) => rows[0]))

  const listGroups = (developerId: string, filter: CompiledFilter | undefined, offset: number, count: number) =>
    Effect.gen(function*() {
      const where = `g.developer_id = $1 AND g.deleted_at IS NULL${filter ? ` AND (${filter.sql})` : ""}`
      const params = [developerId, ...(filter?.params ?? [])]
      const [total] = yield* sql.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM scim_groups g WHERE ${where}`, params as any)
      const rows = count === 0 ? [] : yield* sql.unsafe<GroupRow>(
        `SELECT ${GROUP_COLUMNS} FROM scim_groups g WHERE ${where} ORDER BY g.created_at, g.id
         LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
        [...params, count, offset] as any
      )
      return { total: Number(total?.n ?? 0), rows }
    })

  /** members of the given groups, with each user's display (displayName, else userName) */
  const membersOf = (groupIds: ReadonlyArray<string>) =>
    groupIds.length === 0
      ? Effect.succeed([] as Array<{ groupId: string; userId: string; display: string }>)
      : sql<{ groupId: string; userId: string; display: string }>`
          SELECT m.group_id, m.user_id, COALESCE(u.display_name, u.user_name) AS display
          FROM scim_group_members m JOIN scim_users u ON u.id = m.user_id
          WHERE m.group_id IN ${sql.in(groupIds)} ORDER BY m.group_id, m.user_id`

  /**
   * Locks the live users among `ids` (in id order, so two membership changes never wait on each
   * other in a circle) and answers which exist: a user deleted meanwhile is not live once the lock
   * is had, and cannot be deleted until the membership change commits.
   */
  const lockUsers = (developerId: string, ids: ReadonlyArray<string>) =>
    ids.length === 0
      ? Effect.succeed(new Set<string>())
      : Effect.map(
        sql.unsafe<{ id: string }>(
          `SELECT id FROM scim_users WHERE developer_id = $1 AND deleted_at IS NULL AND id = ANY($2::text[]) ORDER BY id FOR NO KEY UPDATE`,
          [developerId, [...new Set(ids)].sort()] as any
        ),
        (rows) => new Set(rows.map((r) => r.id))
      )

  /** a new version (ETag) for users whose group memberships changed (decisions §11, revised) */
  const touchUsers = (ids: ReadonlyArray<string>, at: Date) =>
    ids.length === 0
      ? Effect.void
      : Effect.asVoid(sql.unsafe(
        `UPDATE scim_users SET version = version + 1, updated_at = $2 WHERE id = ANY($1::text[]) AND deleted_at IS NULL`,
        [[...new Set(ids)], at] as any
      ))

  const insertGroup = (id: string, developerId: string, displayName: string, externalId: string | null, at: Date) =>
    sql.unsafe<GroupRow>(
      `INSERT INTO scim_groups AS g (id, developer_id, display_name, external_id, version, created_at, updated_at)
       VALUES ($1, $2, $3, $4, 1, $5, $5) RETURNING ${GROUP_COLUMNS}`,
      [id, developerId, displayName, externalId, at]
    ).pipe(Effect.map((rows) => rows[0]!))

  const updateGroup = (id: string, displayName: string, externalId: string | null, at: Date) =>
    sql.unsafe<GroupRow>(
      `UPDATE scim_groups g SET display_name = $2, external_id = $3, version = version + 1, updated_at = $4
       WHERE id = $1 RETURNING ${GROUP_COLUMNS}`,
      [id, displayName, externalId, at]
    ).pipe(Effect.map((rows) => rows[0]!))

  /** applies membership changes; answers the ids actually added and removed */
  const changeMembers = (developerId: string, groupId: string, add: ReadonlyArray<string>, remove: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const removed = remove.length === 0 ? [] : yield* sql<{ userId: string }>`
        DELETE FROM scim_group_members WHERE group_id = ${groupId} AND user_id IN ${sql.in(remove)} RETURNING user_id`
      const added = add.length === 0 ? [] : yield* sql.unsafe<{ userId: string }>(
        `INSERT INTO scim_group_members (group_id, user_id, developer_id)
         SELECT $1, unnest($2::text[]), $3 ON CONFLICT DO NOTHING RETURNING user_id`,
        [groupId, [...add], developerId] as any
      )
      return { added: added.map((r) => r.userId), removed: removed.map((r) => r.userId) }
    })

  const memberIds = (groupId: string) =>
    Effect.map(sql<{ userId: string }>`SELECT user_id FROM scim_group_members WHERE group_id = ${groupId}`, (rows) => rows.map((r) => r.userId))

  const isMember = (groupId: string, ids: ReadonlyArray<string>) =>
    ids.length === 0
      ? Effect.succeed(new Set<string>())
      : Effect.map(
        sql<{ userId: string }>`SELECT user_id FROM scim_group_members WHERE group_id = ${groupId} AND user_id IN ${sql.in(ids)}`,
        (rows) => new Set(rows.map((r) => r.userId))
      )

  const deleteGroup = (id: string, at: Date) =>
    Effect.zipRight(
      sql`DELETE FROM scim_group_members WHERE group_id = ${id}`,
      sql`UPDATE scim_groups SET deleted_at = ${at}, updated_at = ${at}, version = version + 1 WHERE id = ${id}`
    )

  return {
    findUser, listUsers, insertUser, updateUser, updateUserAtVersion, deleteUser, groupsOfUser,
    findGroup, listGroups, membersOf, lockUsers, touchUsers, insertGroup, updateGroup, changeMembers, memberIds, isMember, deleteGroup
  }
}

export type Repo = ReturnType<typeof makeRepo>
