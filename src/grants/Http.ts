import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { optionalCore } from "../anomalies/Core.ts"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Agents } from "../agents/Service.ts"
import { Api } from "../Api.ts"
import { Config } from "../Config.ts"
import { Credentials } from "../credentials/Service.ts"
import { Entitlements } from "../billing/Entitlements.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { AgentNotFound, AgentSuspended, BadRequest, DelegationDepthExceeded, InvalidScopes, InvalidToken, NotFound, ScopeEscalation } from "../platform/Errors.ts"
import { Keys } from "../platform/Keys.ts"
import { pageParams, toPage } from "../platform/Pagination.ts"
import { nowMillis, parseDuration } from "../platform/Time.ts"
import { PolicyEngine } from "../policies/Service.ts"
import { Grants, type GrantRecord, grantView, MAX_GRANT_TTL_SECONDS } from "./Service.ts"
import { makeVerifyToken } from "./Verify.ts"

const GRANT_COLUMNS = `id, developer_id, agent_id, principal_id, scopes, status, audience, issued_at, expires_at,
  revoked_at, parent_grant_id, delegation_depth, created_at`

export const GrantsHttp = HttpApiBuilder.group(Api, "grants", (handlers) =>
  Effect.gen(function*() {
    const grants = yield* Grants
    const agents = yield* Agents
    const keys = yield* Keys
    const anomalies = yield* optionalCore // decisions §14: inline rules
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const credentials = yield* Credentials
    const policyEngine = yield* PolicyEngine
    const entitlements = yield* Entitlements
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
      .handle("delegate", ({ payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const wanted = yield* credentials.parseRequest(payload) // decisions §18
          const ms = yield* nowMillis
          const claims = yield* keys.verify(payload.parentGrantToken, Math.floor(ms / 1000)).pipe(
            Effect.mapError(() => new InvalidToken({ message: "parentGrantToken is not a valid grant token" }))
          )
          if (claims.dev !== developer.id) return yield* Effect.fail(new NotFound({ message: "Parent grant not found" }))
          yield* entitlements.belowCap(developer, "activeGrants") // decisions §16: a delegation makes a grant
          const status = yield* grants.tokenStatus(claims)
          if (status !== "active") return yield* Effect.fail(new InvalidToken({ message: `parentGrantToken is ${status}` }))
          const parent = (yield* grants.find(developer.id, claims.grnt))!
          const subAgent = yield* agents.find(developer.id, payload.subAgentId)
          if (subAgent === undefined) return yield* Effect.fail(new AgentNotFound({ message: "Sub-agent not found" }))
          if (subAgent.status !== "active") return yield* Effect.fail(new AgentSuspended({ message: "Sub-agent is suspended" }))
          if (payload.scopes.length === 0) return yield* Effect.fail(new BadRequest({ message: "scopes must not be empty" }))
          const escalated = payload.scopes.filter((s) => !parent.scopes.includes(s))
          if (escalated.length > 0) {
            if (anomalies !== undefined) yield* anomalies.scopeRefused(developer.id, parent.agentId, "SCOPE_ESCALATION")
            return yield* Effect.fail(new ScopeEscalation({ message: `Scopes not held by the parent grant: ${escalated.join(", ")}` }))
          }
          // an agent's scopes are its registered scopes (decisions §3), for a sub-agent as for authorize
          const unregistered = payload.scopes.filter((s) => !subAgent.scopes.includes(s))
          if (unregistered.length > 0) {
            if (anomalies !== undefined) yield* anomalies.scopeRefused(developer.id, subAgent.id, "INVALID_SCOPES")
            return yield* Effect.fail(new InvalidScopes({ message: `Scopes not registered for the sub-agent: ${unregistered.join(", ")}` }))
          }
          const depth = parent.delegationDepth + 1
          if (depth > config.maxDelegationDepth) {
            return yield* Effect.fail(new DelegationDepthExceeded({ message: `Delegation deeper than ${config.maxDelegationDepth} levels` }))
          }
          // decisions §13: policies may deny a delegation (403 POLICY_DENIED); `grant` is the parent's
          yield* policyEngine.guard("delegate", {
            developerId: developer.id,
            agentId: subAgent.id,
            principalId: parent.principalId,
            scopes: payload.scopes,
            grant: { id: parent.id, delegationDepth: parent.delegationDepth, parentGrantId: parent.parentGrantId }
          })
          // never beyond the parent's expiry: its grant's, nor the token presented (a one-hour token
          // must not mint a child that outlives it by a day)
          let expiresAt = new Date(Math.min(parent.expiresAt.getTime(), claims.exp * 1000))
          if (payload.expiresIn !== undefined) {
            const seconds = parseDuration(payload.expiresIn)
            if (seconds === undefined) return yield* Effect.fail(new BadRequest({ message: "expiresIn must look like 90s, 15m, 24h or 7d" }))
            if (seconds > MAX_GRANT_TTL_SECONDS) return yield* Effect.fail(new BadRequest({ message: "expiresIn may be at most 366 days" }))
            expiresAt = new Date(Math.min(expiresAt.getTime(), ms + seconds * 1000))
          }
          const { grant, token, issued } = yield* sql.withTransaction(Effect.gen(function*() {
            // The parent is locked and checked again: a revocation that locked it first wins (this
            // answers revoked), and one that comes after finds the child under it and revokes it too.
            const [current] = yield* sql<{ status: string }>`SELECT status FROM grants WHERE id = ${parent.id} FOR UPDATE`
            if (current?.status !== "active") return yield* Effect.fail(new InvalidToken({ message: "parentGrantToken is revoked" }))
            const grant = yield* grants.create({
              developerId: developer.id,
              agentId: subAgent.id,
              principalId: parent.principalId,
              scopes: [...new Set(payload.scopes)],
              expiresAt,
              audience: parent.audience,
              parentGrantId: parent.id,
              delegationDepth: depth
            })
            const token = yield* grants.issueToken(grant, { parentAgt: claims.agt, parentGrnt: parent.id })
            const issued = yield* credentials.issueFor(grant, wanted) // decisions §18: in the delegation's transaction
            return { grant, token, issued }
          })).pipe(
            Effect.catchTag("SqlError", Effect.die),
            Effect.catchTag("GrantNoLongerActive", () => Effect.fail(new InvalidToken({ message: "parentGrantToken is revoked" })))
          )
          return { grantToken: token.grantToken, expiresAt: token.expiresAt.toISOString(), scopes: [...grant.scopes], grantId: grant.id, ...issued }
        }))
      .handle("verify", ({ payload }) => Effect.flatMap(CurrentDeveloper, (developer) => verifyToken(developer, payload.token)))
      .handle("revokeToken", ({ payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          // 204 whether or not the jti named one of the developer's tokens (decisions §3; RFC 7009 §2.2
          // answers the same way): the answer tells no one which token ids exist
          yield* grants.revokeToken(developer.id, payload.jti)
          return HttpServerResponse.empty({ status: 204 })
        }))
  }))
