/**
 * Meters (decisions §16), counted by SQL from the durable rows each capability already writes, so a
 * lost cache never loses a count: authorization requests, grant tokens (code, refresh, delegation,
 * bundle), vault-exchange events, accepted offline entries, and the peak number of live agents and
 * active grants during the period. One statement per meter, grouped by developer.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { Meter } from "./Plans.ts"

export type Usage = Record<Meter, number>

export const emptyUsage = (): Usage => ({
  authorizations: 0,
  token_exchanges: 0,
  vault_exchanges: 0,
  offline_entries: 0,
  active_agents: 0,
  active_grants: 0
})

/** `$1` period start, `$2` period end, `$3` developer id (when filtered); each answers (developer_id, n) */
const countSql = (table: string, at: string, extra = "") => (filter: string) =>
  `SELECT developer_id, count(*)::bigint AS n FROM ${table}
   WHERE ${at} >= $1 AND ${at} < $2 ${extra} ${filter} GROUP BY developer_id`

/** the largest number of intervals [a, b) open at once within the period; ends sort before starts */
const peakSql = (intervals: string) => (filter: string) =>
  `WITH iv AS (${intervals.replace("{filter}", filter)}),
   ev AS (SELECT developer_id, greatest(a, $1) AS t, 1 AS d FROM iv
          UNION ALL SELECT developer_id, b, -1 FROM iv WHERE b IS NOT NULL AND b < $2),
   run AS (SELECT developer_id, sum(d) OVER (PARTITION BY developer_id ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS n FROM ev)
   SELECT developer_id, max(n)::bigint AS n FROM run GROUP BY developer_id`

const METER_SQL: Record<Meter, (filter: string) => string> = {
  authorizations: countSql("auth_requests", "created_at"),
  token_exchanges: countSql("grant_tokens", "issued_at"),
  vault_exchanges: countSql("events", "created_at", "AND type = 'vault.credential.exchanged'"),
  offline_entries: countSql("offline_audit_entries", "received_at"),
  active_agents: peakSql(
    `SELECT developer_id, created_at AS a, deleted_at AS b FROM agents
     WHERE created_at < $2 AND (deleted_at IS NULL OR deleted_at > $1) {filter}`
  ),
  active_grants: peakSql(
    `SELECT developer_id, issued_at AS a, least(coalesce(revoked_at, expires_at), expires_at) AS b FROM grants
     WHERE issued_at < $2 AND least(coalesce(revoked_at, expires_at), expires_at) > $1 {filter}`
  )
}

/** Every meter of every developer (or of one) over [start, end). */
export const measure = (start: Date, end: Date, developerId?: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const filter = developerId === undefined ? "" : "AND developer_id = $3"
    const params: Array<unknown> = developerId === undefined ? [start, end] : [start, end, developerId]
    const out = new Map<string, Usage>()
    for (const meter of Object.keys(METER_SQL) as Array<Meter>) {
      const rows = yield* sql.unsafe<{ developerId: string; n: string | number }>(METER_SQL[meter](filter), params as any)
      for (const row of rows) {
        const usage = out.get(row.developerId) ?? emptyUsage()
        usage[meter] = Number(row.n)
        out.set(row.developerId, usage)
      }
    }
    return out
  })

/** One developer's durable count of a quota meter in the period (seeds the live counter). */
export const countOne = (meter: "authorizations" | "token_exchanges", developerId: string, start: Date, end: Date) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql.unsafe<{ n: string | number }>(
      METER_SQL[meter]("AND developer_id = $3"),
      [start, end, developerId] as any
    )
    return Number(rows[0]?.n ?? 0)
  })

export interface DailyCounts {
  tokenExchanges: number
  authorizations: number
  vaultExchanges: number
  offlineEntries: number
  totalRequests: number
}

const DAILY: ReadonlyArray<[keyof DailyCounts, string, string, string]> = [
  ["authorizations", "auth_requests", "created_at", ""],
  ["tokenExchanges", "grant_tokens", "issued_at", ""],
  ["vaultExchanges", "events", "created_at", "AND type = 'vault.credential.exchanged'"],
  ["offlineEntries", "offline_audit_entries", "received_at", ""]
]

/** One developer's counts per UTC day over [start, end), from the durable rows; totalRequests sums them. */
export const daily = (developerId: string, start: Date, end: Date) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const out = new Map<string, DailyCounts>()
    for (const [field, table, at, extra] of DAILY) {
      const rows = yield* sql.unsafe<{ day: string; n: string | number }>(
        `SELECT to_char(${at} AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, count(*)::bigint AS n FROM ${table}
         WHERE developer_id = $3 AND ${at} >= $1 AND ${at} < $2 ${extra} GROUP BY 1`,
        [start, end, developerId] as any
      )
      for (const row of rows) {
        const entry = out.get(row.day) ?? { tokenExchanges: 0, authorizations: 0, vaultExchanges: 0, offlineEntries: 0, totalRequests: 0 }
        entry[field] = Number(row.n)
        entry.totalRequests += Number(row.n)
        out.set(row.day, entry)
      }
    }
    return out
  })
