/**
 * Delegation (decisions §3, §19, §20): an agent holding a grant token hands part of it to a
 * sub-agent. The parent token, the sub-agent and the scopes are checked first; then, in one
 * transaction, the parent grant is locked and seen active, the gate decides (the sub-agent and every
 * agent the parent descends from active, the principal active, policies, the active-grant cap), and
 * the child grant, its token and any credential asked for are made. The HTTP handler only maps.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Agents } from "../agents/Service.ts"
import { AnomalyCore } from "../anomalies/Core.ts"
import { Config } from "../Config.ts"
import { Credentials } from "../credentials/Service.ts"
import { Gate } from "../gate/Gate.ts"
import type { Developer } from "../platform/Auth.ts"
import {
  AgentNotFound, AgentSuspended, BadRequest, DelegationDepthExceeded, InvalidScopes, InvalidToken, NotFound, type PlanLimitExceeded,
  type PolicyDenied, type PrincipalInactive, ScopeEscalation
} from "../platform/Errors.ts"
import { Keys } from "../platform/Keys.ts"
import { nowMillis, parseDuration } from "../platform/Time.ts"
import { Grants, MAX_GRANT_TTL_SECONDS } from "./Service.ts"

export interface DelegateInput {
  readonly parentGrantToken: string
  readonly subAgentId: string
  readonly scopes: ReadonlyArray<string>
  readonly expiresIn?: string | undefined
  readonly credentialFormat?: string | undefined
  readonly holderKey?: unknown
}

export interface Delegated {
  readonly grantToken: string
  readonly expiresAt: string
  readonly scopes: ReadonlyArray<string>
  readonly grantId: string
  readonly verifiableCredential?: string
  readonly sdJwtCredential?: string
}

export type DelegationError =
  | BadRequest | InvalidToken | NotFound | AgentNotFound | AgentSuspended | ScopeEscalation | DelegationDepthExceeded | InvalidScopes
  | PolicyDenied | PlanLimitExceeded | PrincipalInactive

export interface DelegationService {
  readonly delegate: (developer: Developer, input: DelegateInput) => Effect.Effect<Delegated, DelegationError>
}

export class Delegation extends Context.Tag("agent-auth/Delegation")<Delegation, DelegationService>() {}

export const DelegationLive = Layer.effect(
  Delegation,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const grants = yield* Grants
    const agents = yield* Agents
    const keys = yield* Keys
    const config = yield* Config
    const credentials = yield* Credentials
    const anomalies = yield* AnomalyCore // decisions §14: scope probing (AD-002)
    const gate = yield* Gate

    const delegate: DelegationService["delegate"] = (developer, input) =>
      Effect.gen(function*() {
        const wanted = yield* credentials.parseRequest(input) // decisions §18
        const ms = yield* nowMillis
        const claims = yield* keys.verify(input.parentGrantToken, Math.floor(ms / 1000)).pipe(
          Effect.mapError(() => new InvalidToken({ message: "parentGrantToken is not a valid grant token" }))
        )
        if (claims.dev !== developer.id) return yield* Effect.fail(new NotFound({ message: "Parent grant not found" }))
        const status = yield* grants.tokenStatus(claims)
        if (status !== "active") return yield* Effect.fail(new InvalidToken({ message: `parentGrantToken is ${status}` }))
        const parent = (yield* grants.find(developer.id, claims.grnt))!
        const subAgent = yield* agents.find(developer.id, input.subAgentId)
        if (subAgent === undefined) return yield* Effect.fail(new AgentNotFound({ message: "Sub-agent not found" }))
        if (subAgent.status !== "active") return yield* Effect.fail(new AgentSuspended({ message: "Sub-agent is suspended" }))
        if (input.scopes.length === 0) return yield* Effect.fail(new BadRequest({ message: "scopes must not be empty" }))
        const escalated = input.scopes.filter((s) => !parent.scopes.includes(s))
        if (escalated.length > 0) {
          yield* anomalies.scopeRefused(developer.id, parent.agentId, "SCOPE_ESCALATION")
          return yield* Effect.fail(new ScopeEscalation({ message: `Scopes not held by the parent grant: ${escalated.join(", ")}` }))
        }
        // an agent's scopes are its registered scopes (decisions §3), for a sub-agent as for authorize
        const unregistered = input.scopes.filter((s) => !subAgent.scopes.includes(s))
        if (unregistered.length > 0) {
          yield* anomalies.scopeRefused(developer.id, subAgent.id, "INVALID_SCOPES")
          return yield* Effect.fail(new InvalidScopes({ message: `Scopes not registered for the sub-agent: ${unregistered.join(", ")}` }))
        }
        const depth = parent.delegationDepth + 1
        if (depth > config.maxDelegationDepth) {
          return yield* Effect.fail(new DelegationDepthExceeded({ message: `Delegation deeper than ${config.maxDelegationDepth} levels` }))
        }
        // never beyond the parent's expiry: its grant's, nor the token presented (a one-hour token
        // must not mint a child that outlives it by a day)
        let expiresAt = new Date(Math.min(parent.expiresAt.getTime(), claims.exp * 1000))
        if (input.expiresIn !== undefined) {
          const seconds = parseDuration(input.expiresIn)
          if (seconds === undefined) return yield* Effect.fail(new BadRequest({ message: "expiresIn must look like 90s, 15m, 24h or 7d" }))
          if (seconds > MAX_GRANT_TTL_SECONDS) return yield* Effect.fail(new BadRequest({ message: "expiresIn may be at most 366 days" }))
          expiresAt = new Date(Math.min(expiresAt.getTime(), ms + seconds * 1000))
        }
        const scopes = [...new Set(input.scopes)]
        const { grant, token, issued } = yield* gate.transaction(Effect.gen(function*() {
          // The parent is locked and checked again: a revocation that locked it first wins (this
          // answers revoked), and one that comes after finds the child under it and revokes it too.
          const [current] = yield* sql<{ status: string }>`SELECT status FROM grants WHERE id = ${parent.id} FOR UPDATE`.pipe(Effect.orDie)
          if (current?.status !== "active") return yield* Effect.fail(new InvalidToken({ message: "parentGrantToken is revoked" }))
          // decisions §20: the sub-agent and the parent's lineage, the principal, policies (`grant` is the parent's), the cap
          const allowed = yield* gate.check("delegate", {
            developerId: developer.id, agentId: subAgent.id, principalId: parent.principalId, scopes, cap: "activeGrants",
            grant: { id: parent.id, delegationDepth: parent.delegationDepth, parentGrantId: parent.parentGrantId }
          })
          const grant = yield* grants.create({
            developerId: developer.id,
            agentId: subAgent.id,
            principalId: parent.principalId,
            scopes,
            expiresAt,
            audience: parent.audience,
            parentGrantId: parent.id,
            delegationDepth: depth,
            approvalMethod: "developer",
            policyId: allowed.policyId
          })
          const token = yield* grants.issueToken(grant, { parentAgt: claims.agt, parentGrnt: parent.id })
          const issued = yield* credentials.issueFor(grant, wanted) // decisions §18: in the delegation's transaction
          return { grant, token, issued }
        })).pipe(Effect.catchTag("GrantNoLongerActive", () => Effect.fail(new InvalidToken({ message: "parentGrantToken is revoked" }))))
        return { grantToken: token.grantToken, expiresAt: token.expiresAt.toISOString(), scopes: [...grant.scopes], grantId: grant.id, ...issued }
      })

    return { delegate }
  })
)
