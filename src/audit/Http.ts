import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { AuditChain, ENTRY_COLUMNS, rowToEntry } from "../platform/AuditChain.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { BadRequest, NotFound } from "../platform/Errors.ts"
import { pageParams, toPage } from "../platform/Pagination.ts"

const COLUMNS = `${ENTRY_COLUMNS}, created_at`

export const AuditHttp = HttpApiBuilder.group(Api, "audit", (handlers) =>
  Effect.gen(function*() {
    const chain = yield* AuditChain
    const sql = yield* SqlClient.SqlClient
    return handlers
      .handle("log", ({ payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          if (payload.action.startsWith("service.")) {
            return yield* Effect.fail(new BadRequest({ message: "Actions starting with service. are reserved for the service" }))
          }
          return yield* chain.append({ developerId: developer.id, ...payload })
        }))
      .handle("entries", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const { limit, cursor } = yield* pageParams(urlParams)
          const conditions = ["developer_id = $1"]
          const params: Array<unknown> = [developer.id]
          for (const [column, value] of [["agent_id", urlParams.agentId], ["grant_id", urlParams.grantId], ["principal_id", urlParams.principalId], ["action", urlParams.action]] as const) {
            if (value === undefined) continue
            params.push(value)
            conditions.push(`${column} = $${params.length}`)
          }
          if (cursor) {
            params.push(new Date(cursor.createdAt), cursor.id)
            conditions.push(`(created_at, id) < ($${params.length - 1}, $${params.length})`)
          }
          params.push(limit + 1)
          const rows = yield* sql.unsafe<any>(
            `SELECT ${COLUMNS} FROM audit_log WHERE ${conditions.join(" AND ")} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
            params as any
          ).pipe(Effect.orDie)
          const { page, nextCursor } = toPage(rows, limit)
          return { entries: page.map(rowToEntry), nextCursor }
        }))
      .handle("verify", () => Effect.flatMap(CurrentDeveloper, (d) => chain.verify(d.id)))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const rows = yield* sql.unsafe<any>(`SELECT ${COLUMNS} FROM audit_log WHERE id = $1 AND developer_id = $2`, [path.id, developer.id]).pipe(Effect.orDie)
          if (rows.length === 0) return yield* Effect.fail(new NotFound({ message: "Audit entry not found" }))
          return rowToEntry(rows[0])
        }))
  }))
