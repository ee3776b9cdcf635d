/**
 * The gate (decisions §20): one decision for every point where a grant is made or used, asked once
 * per point inside the transaction that makes or uses the grant, in a fixed order where the first
 * refusal wins:
 *   1. the agent and every agent its grant descends from are active (row locked FOR SHARE) → AGENT_SUSPENDED
 *   2. the principal is active in the directory (FOR SHARE: a deprovisioning in flight is waited for) → PRINCIPAL_INACTIVE
 *   3. the developer's requirements (fidoRequired, SSO enforce), met by the point's own approval → FIDO_REQUIRED / CONSENT_REQUIRED / pending
 *   4. policies (rules, Cedar, OPA; deny overrides) whenever one could apply → POLICY_DENIED
 *   5. the plan's active-grant cap and monthly quota, taken in this transaction → PLAN_LIMIT_EXCEEDED / QUOTA_EXCEEDED
 *   6. the anomaly signals of the point.
 * The answer is `Allowed` (its approvalMethod and policyId, which the grant records) or one of the
 * refusal errors. `check` needs a `GateTransaction`, which only `transaction` provides: a point
 * cannot ask the gate outside its transaction (it does not compile). What a refusal must leave
 * behind (the policy decision log, an AD-008 signal) and what a failed transaction must give back
 * (a quota unit) run after the rollback, so nothing of the refused work stays.
 *
 * It sits above the capabilities it asks (agents' rows, the directory, policies, billing,
 * anomalies) and below the points that ask it (authorization, grants' delegation, consent
 * bundles, the vault, offline sync).
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Exit, Layer } from "effect"
import { AnomalyCore } from "../anomalies/Core.ts"
import { type CapName, Entitlements, type QuotaMeter } from "../billing/Entitlements.ts"
import { DirectoryPrincipals } from "../directory/Principals.ts"
import type { ApprovalMethod } from "../grants/Record.ts"
import type { Developer } from "../platform/Auth.ts"
import {
  AgentSuspended, type ConsentRequired, type FidoRequired, type Forbidden, type PlanLimitExceeded, PolicyDenied, PrincipalInactive,
  type PrincipalMismatch, type QuotaExceeded
} from "../platform/Errors.ts"
import { PolicyEngine, type Subject } from "../policies/Service.ts"

/** Where a grant is made or used (decisions §20). */
export type GatePoint =
  | "authorize" | "consent.approve" | "code.exchange" | "token.refresh" | "delegate" | "bundle.create" | "bundle.refresh"
  | "vault.exchange" | "token.verify" | "offline.sync" | "credential.issue"

export type { ApprovalMethod }

/** The developer's requirements on whoever approves a grant for a principal (decisions §12). */
export interface Requirement {
  readonly passkey: boolean
  readonly sso: boolean
}

export type RequirementRefusal = FidoRequired | ConsentRequired | PrincipalMismatch | Forbidden

/**
 * What the gate asks about: the policies' subject (developer, agent, principal, scopes; the grant
 * used, whose agents' lineage is checked too; an OAuth authorization's resource server, resource and
 * client origin, decisions §22.5), and what the point adds.
 */
export interface GateInput<E = never> extends Subject {
  /**
   * A point that makes a grant for a person's approval says how the approval met the requirements
   * (or fails); without it the point makes no new approval (authorize decides here: pending unless
   * a policy or the sandbox approves and nothing is required).
   */
  readonly approval?: (requirement: Requirement) => Effect.Effect<ApprovalMethod, E>
  /** authorize: a sandbox developer's requests are approved at once */
  readonly sandbox?: boolean
  /** authorize: the person asserted a passkey when signing in (OAuth, decisions §22.5), so a policy allow may approve past `fidoRequired` */
  readonly passkeyAsserted?: boolean
  /** the plan's cap this point counts against (a grant asked for) */
  readonly cap?: Extract<CapName, "activeGrants">
  /** the monthly quota this point uses one unit of */
  readonly meter?: QuotaMeter
  /**
   * checkUse only: the principal's directory state, read by the caller in the same statement as the
   * token's online status (the vault exchange's one batched read), so the gate does not read it again
   */
  readonly principalInactive?: boolean
}

export interface Allowed {
  /** null: nothing approved here (authorize leaves the request pending; points that use a grant) */
  readonly approvalMethod: ApprovalMethod | null
  readonly policyId: string | null
  /** the decision log and audit entry of a policy auto-approval, in this transaction once the grant exists */
  readonly recordApproval: (grantId: string) => Effect.Effect<void>
}

export type GateRefusal = AgentSuspended | PrincipalInactive | PolicyDenied | PlanLimitExceeded | QuotaExceeded

/** What one gated transaction leaves to run after it ends: undone on failure (quota), recorded after a refusal. */
export interface GateTransactionState {
  readonly onFailure: Array<Effect.Effect<void>>
  /** run once the transaction ended, however */
  readonly after: Array<Effect.Effect<void>>
}
export class GateTransaction extends Context.Tag("agent-auth/GateTransaction")<GateTransaction, GateTransactionState>() {}

/** the refusals one point's input can meet: a cap or quota only where the point counts one, and its approval's own */
export type RefusalOf<I> =
  | AgentSuspended | PrincipalInactive | PolicyDenied
  | (I extends { readonly cap: CapName } ? PlanLimitExceeded : never)
  | (I extends { readonly meter: QuotaMeter } ? QuotaExceeded : never)
  | (I extends { readonly approval: (requirement: Requirement) => Effect.Effect<ApprovalMethod, infer E> } ? E : never)

export interface GateService {
  readonly check: <const I extends GateInput<any>>(point: GatePoint, input: I) => Effect.Effect<Allowed, RefusalOf<I>, GateTransaction>
  /**
   * The points that use a grant and make nothing (vault exchange, token verify): steps 2, 4 and 6 on
   * the pool, no transaction to hold. Step 1 is their token's online status (grants' AGENT_STATUS_SQL,
   * read in the same batched lookup as the token), which the caller has checked.
   */
  readonly checkUse: (point: "vault.exchange" | "token.verify", input: GateInput<never>) => Effect.Effect<Allowed, PrincipalInactive | PolicyDenied>
  /** runs `body` in one transaction with the gate's bookkeeping: a failure rolls back, then gives back and records */
  readonly transaction: <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<A, E, Exclude<R, GateTransaction>>
}

export class Gate extends Context.Tag("agent-auth/Gate")<Gate, GateService>() {}

/** The policy action each point is evaluated as: the rules' names where rules name it, else the point's own (Cedar, OPA). */
const POLICY_ACTION: Record<GatePoint, string> = {
  authorize: "authorize",
  "consent.approve": "consent.approve",
  "code.exchange": "code.exchange",
  "token.refresh": "token.refresh",
  delegate: "delegate",
  "bundle.create": "bundle.create",
  "bundle.refresh": "bundle.refresh",
  "vault.exchange": "vault.exchange",
  "token.verify": "token.verify",
  "offline.sync": "offline.sync",
  "credential.issue": "credential.issue"
}

/** points where a refused token of a suspended agent is an AD-008 sighting */
const USES_TOKEN: ReadonlySet<GatePoint> = new Set(["token.refresh", "vault.exchange", "token.verify", "bundle.refresh", "delegate"])

export const GateLive = Layer.effect(
  Gate,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const directory = yield* DirectoryPrincipals
    const policies = yield* PolicyEngine
    const entitlements = yield* Entitlements
    const anomalies = yield* AnomalyCore

    /**
     * Steps 1-3's rows in one statement (one round trip where three were, issue 37): the agent
     * (locked FOR SHARE: a suspension waits for this transaction, or is seen) and the agents its grant
     * descends from, the principal's directory rows (the directory's own fragment, locked FOR SHARE),
     * and the developer's plan and passkey requirement.
     */
    const standing = (developerId: string, agentId: string, grantId: string | undefined, principalId: string) =>
      sql<{ agentActive: boolean | null; principalLiveFlags: Array<boolean>; plan: Developer["plan"]; fidoRequired: boolean }>`
        SELECT (SELECT a.status = 'active' AND a.deleted_at IS NULL
                       AND NOT EXISTS (
                         SELECT 1 FROM grants g JOIN agents x ON x.id = ANY(g.ancestor_agent_ids || g.agent_id)
                         WHERE g.id = ${grantId ?? null} AND (x.status <> 'active' OR x.deleted_at IS NOT NULL))
                FROM agents a WHERE a.id = ${agentId} AND a.developer_id = ${developerId} FOR SHARE OF a) AS agent_active,
               ${directory.lockedLiveFlags(developerId, principalId)} AS principal_live_flags,
               d.plan, d.fido_required
        FROM developers d WHERE d.id = ${developerId}`.pipe(
        Effect.map((rows) => rows[0] ?? { agentActive: null, principalLiveFlags: [], plan: "free" as const, fidoRequired: false }),
        Effect.orDie
      )

    const check = (point: GatePoint, input: GateInput<unknown>) =>
      Effect.gen(function*() {
        const tx = yield* GateTransaction
        const { developerId, agentId, principalId } = input
        const rows = yield* standing(developerId, agentId, input.grant?.id, principalId)
        // 1. the agent and its lineage
        if (rows.agentActive !== true) {
          if (USES_TOKEN.has(point) && input.grant !== undefined) {
            tx.onFailure.push(anomalies.suspendedAgentUse(developerId, agentId, input.grant.id, point))
          }
          return yield* Effect.fail(new AgentSuspended({ message: "Agent is suspended" }))
        }
        // 2. the principal, read under the directory row's lock
        yield* directory.refuseIfInactive(rows.principalLiveFlags)
        // 3. the developer's requirements, met by the point's approval
        const developer = rows
        const needsApproval = input.approval !== undefined || point === "authorize"
        const requirement: Requirement = needsApproval
          ? { passkey: developer.fidoRequired, sso: yield* policies.ssoEnforced(developerId) }
          : { passkey: false, sso: false }
        let approvalMethod: ApprovalMethod | null = input.approval !== undefined ? yield* input.approval(requirement) : null
        // 4. policies, whenever one could apply
        let policyId: string | null = null
        let recordApproval: Allowed["recordApproval"] = () => Effect.void
        const action = POLICY_ACTION[point]
        if (yield* policies.applies(developerId, action)) {
          const { decision, record } = yield* policies.decide(action, {
            developerId, agentId, principalId, scopes: input.scopes, ...(input.grant !== undefined ? { grant: input.grant } : {}),
            ...(input.oauth !== undefined ? { oauth: input.oauth } : {})
          })
          if (decision.effect === "deny") {
            tx.onFailure.push(record(null))
            return yield* Effect.fail(new PolicyDenied({ message: policies.denyMessage(decision) }))
          }
          // an allow approves only at authorize, and never past a passkey or SSO requirement
          if (point === "authorize" && decision.effect === "allow" && (!requirement.passkey || input.passkeyAsserted === true) && !requirement.sso) {
            approvalMethod = "policy"
            policyId = decision.policyId
            recordApproval = (grantId) => record(grantId)
          }
        }
        if (point === "authorize" && approvalMethod === null && input.sandbox === true) approvalMethod = "sandbox"
        // 5. the plan: the cap on active grants, then one unit of the monthly quota (given back if this transaction fails)
        const plan = { id: developerId, plan: developer.plan }
        if (input.cap !== undefined) yield* entitlements.belowCap(plan, input.cap)
        if (input.meter !== undefined) {
          const taken = yield* entitlements.admit(plan, input.meter)
          tx.after.push(taken.notify)
          if (taken.refusal !== undefined) return yield* Effect.fail(taken.refusal)
          tx.onFailure.push(taken.giveBack)
        }
        return { approvalMethod, policyId, recordApproval }
      })

    const checkUse: GateService["checkUse"] = (point, input) =>
      Effect.gen(function*() {
        const { developerId, agentId, principalId } = input
        if (input.principalInactive === true) return yield* Effect.fail(new PrincipalInactive({ message: "The principal is deactivated in the directory" }))
        if (input.principalInactive === undefined) yield* directory.requireActiveNow(developerId, principalId)
        const action = POLICY_ACTION[point]
        if (yield* policies.applies(developerId, action)) {
          const { decision, record } = yield* policies.decide(action, {
            developerId, agentId, principalId, scopes: input.scopes, ...(input.grant !== undefined ? { grant: input.grant } : {})
          })
          if (decision.effect === "deny") {
            yield* record(null)
            return yield* Effect.fail(new PolicyDenied({ message: policies.denyMessage(decision) }))
          }
        }
        yield* anomalies.tokenUsed(developerId, agentId)
        return { approvalMethod: null, policyId: null, recordApproval: () => Effect.void }
      })

    const transaction: GateService["transaction"] = (body) =>
      Effect.suspend(() => {
        const state: GateTransactionState = { onFailure: [], after: [] }
        return sql.withTransaction(Effect.provideService(body, GateTransaction, state)).pipe(
          Effect.onExit((exit) =>
            Effect.all([...(Exit.isFailure(exit) ? state.onFailure : []), ...state.after], { discard: true })
          ),
          Effect.catchTag("SqlError" as any, Effect.die)
        ) as any
      })

    return { check: check as GateService["check"], checkUse, transaction }
  })
)
