import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { NotFound } from "../platform/Errors.ts"
import { pageParams, toPage } from "../platform/Pagination.ts"
import { nowMillis } from "../platform/Time.ts"
import { Delegation } from "./Delegation.ts"
import { GRANT_COLUMNS, Grants, type GrantRecord, grantView } from "./Service.ts"
import { makeVerifyToken } from "./Verify.ts"


export const GrantsHttp = HttpApiBuilder.group(Api, "grants", (handlers) =>
  Effect.gen(function*() {
    const grants = yield* Grants
    const delegation = yield* Delegation
    const sql = yield* SqlClient.SqlClient
    const verifyToken = yield* makeVerifyToken

    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const { limit, cursor } = yield* pageParams(urlParams)
          const now = new Date(yield* nowMillis)
          const conditions = ["developer_id = $1"]
          const params: Array<unknown> = [developer.id]
          const add = (clause: string, value: unknown) => {
            params.push(value)
            conditions.push(clause.replace("?", `$${params.length}`))
          }
          if (urlParams.agentId) add("agent_id = ?", urlParams.agentId)
          if (urlParams.principalId) add("principal_id = ?", urlParams.principalId)
          if (urlParams.resourceServerId) add("resource_server_id = ?", urlParams.resourceServerId)
          if (urlParams.status === "revoked") conditions.push("status = 'revoked'")
          if (urlParams.status === "active") add("status = 'active' AND expires_at > ?", now)
          if (urlParams.status === "expired") add("status = 'active' AND expires_at <= ?", now)
          if (cursor) {
            params.push(new Date(cursor.createdAt), cursor.id)
            conditions.push(`(created_at, id) < ($${params.length - 1}, $${params.length})`)
          }
          params.push(limit + 1)
          const rows = yield* sql.unsafe<GrantRecord>(
            `SELECT ${GRANT_COLUMNS} FROM grants WHERE ${conditions.join(" AND ")}
             ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
            params as any
          ).pipe(Effect.orDie)
          const { page, nextCursor } = toPage(rows, limit)
          return { grants: page.map((g) => grantView(g, now.getTime())), nextCursor }
        }))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const grant = yield* grants.find(developer.id, path.id)
          if (grant === undefined) return yield* Effect.fail(new NotFound({ message: "Grant not found" }))
          return grantView(grant, yield* nowMillis)
        }))
      .handle("revoke", ({ path }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const revoked = yield* grants.revoke(developer.id, path.id)
          if (revoked === undefined) return yield* Effect.fail(new NotFound({ message: "Grant not found" }))
          return HttpServerResponse.empty({ status: 204 })
        }))
      .handle("delegate", ({ payload }) => Effect.flatMap(CurrentDeveloper, (developer) => delegation.delegate(developer, payload)))
      .handle("verify", ({ payload }) => Effect.flatMap(CurrentDeveloper, (developer) => verifyToken(developer, payload)))
      .handle("revokeToken", ({ payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          // 204 whether or not the jti named one of the developer's tokens (decisions §3; RFC 7009 §2.2
          // answers the same way): the answer tells no one which token ids exist
          yield* grants.revokeToken(developer.id, payload.jti)
          return HttpServerResponse.empty({ status: 204 })
        }))
  }))
