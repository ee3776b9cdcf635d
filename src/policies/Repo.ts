/** The policies' tables (sql/0022): rules, Cedar/Rego bundles, the decision log. */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { CursorPosition } from "../platform/Pagination.ts"
import type { Rule } from "./Rules.ts"

const RULE_COLUMNS = `id, name, description, effect, priority, agent_id, principal_id, scopes, time_of_day_start, time_of_day_end,
  days_of_week, time_zone, actions, principal_groups, created_at, updated_at`

/** what a rule is made of: everything but its id and times */
export type RuleFields = Omit<Rule, "id" | "createdAt" | "updatedAt">

export interface BundleRow {
  readonly id: string
  readonly format: "cedar" | "rego"
  readonly version: string
  readonly sha256: string
  readonly policyCount: number
  readonly active: boolean
  readonly createdAt: Date
}

export interface DecisionRow {
  readonly id: string
  readonly effect: string
  readonly action: string
  readonly agentId: string | null
  readonly principalId: string | null
  readonly scopes: ReadonlyArray<string>
  readonly policyId: string | null
  readonly determiningPolicies: ReadonlyArray<string>
  readonly errors: unknown
  readonly grantId: string | null
  readonly createdAt: Date
}

const arr = (v: ReadonlyArray<unknown> | null) => (v === null ? null : [...v]) as any

/** Numbers come back from integer[] as numbers; the int columns may come back as strings on some drivers. */
const toRule = (row: any): Rule => ({
  ...row,
  priority: Number(row.priority),
  daysOfWeek: row.daysOfWeek === null ? null : row.daysOfWeek.map(Number)
})

export const makeRepo = (sql: SqlClient.SqlClient) => ({
  rules: (developerId: string) =>
    Effect.map(
      sql.unsafe<any>(`SELECT ${RULE_COLUMNS} FROM policies WHERE developer_id = $1`, [developerId]),
      (rows) => rows.map(toRule)
    ),
  rulesPage: (developerId: string, limit: number, cursor: CursorPosition | undefined) =>
    Effect.map(
      sql.unsafe<any>(
        `SELECT ${RULE_COLUMNS}, count(*) OVER () AS total_all FROM policies WHERE developer_id = $1
         ${cursor ? "AND (created_at, id) < ($3::timestamptz, $4)" : ""}
         ORDER BY created_at DESC, id DESC LIMIT $2`,
        cursor ? [developerId, limit + 1, cursor.createdAt, cursor.id] : [developerId, limit + 1]
      ),
      (rows) => rows.map(toRule)
    ),
  count: (developerId: string) =>
    Effect.map(sql<{ n: number }>`SELECT count(*)::int AS n FROM policies WHERE developer_id = ${developerId}`, (rows) => Number(rows[0]?.n ?? 0)),
  find: (developerId: string, id: string) =>
    Effect.map(
      sql.unsafe<any>(`SELECT ${RULE_COLUMNS} FROM policies WHERE id = $1 AND developer_id = $2`, [id, developerId]),
      (rows) => rows[0] === undefined ? undefined : toRule(rows[0])
    ),
  insert: (developerId: string, id: string, f: RuleFields, at: Date) =>
    Effect.map(
      sql.unsafe<any>(
        `INSERT INTO policies (id, developer_id, name, description, effect, priority, agent_id, principal_id, scopes, time_of_day_start,
           time_of_day_end, days_of_week, time_zone, actions, principal_groups, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $16) RETURNING ${RULE_COLUMNS}`,
        [id, developerId, f.name, f.description, f.effect, f.priority, f.agentId, f.principalId, arr(f.scopes), f.timeOfDayStart,
          f.timeOfDayEnd, arr(f.daysOfWeek), f.timeZone, arr(f.actions), arr(f.principalGroups), at]
      ),
      (rows) => toRule(rows[0])
    ),
  update: (developerId: string, id: string, f: RuleFields, at: Date) =>
    Effect.map(
      sql.unsafe<any>(
        `UPDATE policies SET name = $3, description = $4, effect = $5, priority = $6, agent_id = $7, principal_id = $8, scopes = $9,
           time_of_day_start = $10, time_of_day_end = $11, days_of_week = $12, time_zone = $13, actions = $14,
           principal_groups = $15, updated_at = $16
         WHERE id = $1 AND developer_id = $2 RETURNING ${RULE_COLUMNS}`,
        [id, developerId, f.name, f.description, f.effect, f.priority, f.agentId, f.principalId, arr(f.scopes), f.timeOfDayStart,
          f.timeOfDayEnd, arr(f.daysOfWeek), f.timeZone, arr(f.actions), arr(f.principalGroups), at]
      ),
      (rows) => rows[0] === undefined ? undefined : toRule(rows[0])
    ),
  remove: (developerId: string, id: string) =>
    Effect.map(sql`DELETE FROM policies WHERE id = ${id} AND developer_id = ${developerId} RETURNING id`, (rows) => rows.length > 0),

  insertBundle: (
    developerId: string,
    b: { id: string; format: string; version: string; sha256: string; content: Uint8Array; policyCount: number; activate: boolean; at: Date }
  ) =>
    sql.withTransaction(Effect.gen(function*() {
      if (b.activate) {
        yield* sql`UPDATE policy_bundles SET active = false WHERE developer_id = ${developerId} AND format = ${b.format} AND active`
      }
      const rows = yield* sql<BundleRow>`
        INSERT INTO policy_bundles (id, developer_id, format, version, sha256, content, policy_count, active, created_at)
        VALUES (${b.id}, ${developerId}, ${b.format}, ${b.version}, ${b.sha256}, ${b.content}, ${b.policyCount}, ${b.activate}, ${b.at})
        RETURNING id, format, version, sha256, policy_count, active, created_at`
      return rows[0]!
    })),
  bundles: (developerId: string, format: string | undefined, limit: number, cursor: CursorPosition | undefined) =>
    sql.unsafe<BundleRow>(
      `SELECT id, format, version, sha256, policy_count, active, created_at FROM policy_bundles
       WHERE developer_id = $1 AND ($2::text IS NULL OR format = $2)
       ${cursor ? "AND (created_at, id) < ($4::timestamptz, $5)" : ""}
       ORDER BY created_at DESC, id DESC LIMIT $3`,
      cursor ? [developerId, format ?? null, limit + 1, cursor.createdAt, cursor.id] : [developerId, format ?? null, limit + 1]
    ),
  activeBundle: (developerId: string, format: string) =>
    Effect.map(
      sql<BundleRow & { content: Uint8Array }>`
        SELECT id, format, version, sha256, policy_count, active, created_at, content FROM policy_bundles
        WHERE developer_id = ${developerId} AND format = ${format} AND active`,
      (rows) => rows[0]
    ),
  activeBundleId: (developerId: string, format: string) =>
    Effect.map(
      sql<{ id: string }>`SELECT id FROM policy_bundles WHERE developer_id = ${developerId} AND format = ${format} AND active`,
      (rows) => rows[0]?.id
    ),
  contentOf: (id: string) =>
    Effect.map(sql<{ content: Uint8Array }>`SELECT content FROM policy_bundles WHERE id = ${id}`, (rows) => rows[0]?.content),
  activate: (developerId: string, id: string) =>
    sql.withTransaction(Effect.gen(function*() {
      const [row] = yield* sql<{ format: string }>`SELECT format FROM policy_bundles WHERE id = ${id} AND developer_id = ${developerId} FOR UPDATE`
      if (row === undefined) return undefined
      yield* sql`UPDATE policy_bundles SET active = false WHERE developer_id = ${developerId} AND format = ${row.format} AND active AND id <> ${id}`
      const rows = yield* sql<BundleRow>`UPDATE policy_bundles SET active = true WHERE id = ${id}
        RETURNING id, format, version, sha256, policy_count, active, created_at`
      return rows[0]
    })),

  insertDecision: (developerId: string, d: Omit<DecisionRow, "createdAt"> & { at: Date }) =>
    sql`INSERT INTO policy_decisions (id, developer_id, effect, action, agent_id, principal_id, scopes, policy_id, determining_policies,
          errors, grant_id, created_at)
        VALUES (${d.id}, ${developerId}, ${d.effect}, ${d.action}, ${d.agentId}, ${d.principalId}, ${arr(d.scopes)}, ${d.policyId},
          ${arr(d.determiningPolicies)}, ${JSON.stringify(d.errors)}::jsonb, ${d.grantId}, ${d.at})`,
  decisions: (
    developerId: string,
    q: { effect?: string; agentId?: string; since: Date; limit: number; cursor: CursorPosition | undefined }
  ) =>
    sql.unsafe<DecisionRow>(
      `SELECT id, effect, action, agent_id, principal_id, scopes, policy_id, determining_policies, errors, grant_id, created_at
       FROM policy_decisions
       WHERE developer_id = $1 AND created_at >= $2 AND ($3::text IS NULL OR effect = $3) AND ($4::text IS NULL OR agent_id = $4)
       ${q.cursor ? "AND (created_at, id) < ($6::timestamptz, $7)" : ""}
       ORDER BY created_at DESC, id DESC LIMIT $5`,
      [developerId, q.since, q.effect ?? null, q.agentId ?? null, q.limit + 1, ...(q.cursor ? [q.cursor.createdAt, q.cursor.id] : [])] as any
    ),
  pruneDecisions: (before: Date) => sql`DELETE FROM policy_decisions WHERE created_at < ${before}`
})
