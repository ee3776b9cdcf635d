/**
 * Enforce-mode responses (decisions §14): an opened alert suspends its agent or revokes the agent's
 * grants through the paths every other caller uses (the agent suspension, the one revocation
 * path: cascade to delegated grants, bundles, `grant.revoked`), then `anomaly.auto_revoked` says
 * which. Both paths sit below the anomaly core, so the core holds its responses from the start and
 * nothing is bound late; neither raises a signal, so a response's own revocations never count as
 * a mass revocation (AD-006).
 */
import { Effect } from "effect"
import type { AgentSuspensionService } from "../agents/Suspension.ts"
import type { RevocationPathService } from "../grants/Revocation.ts"
import type { EventsService } from "../platform/Events.ts"
import type { AlertRow, makeRepo } from "./Repo.ts"
import type { EffectiveRule } from "./Rules.ts"

export interface ResponseOutcome {
  readonly response: AlertRow["response"]
  readonly refs: ReadonlyArray<string>
}

const NONE: ResponseOutcome = { response: "none", refs: [] }

export const makeResponder = (deps: {
  readonly repo: ReturnType<typeof makeRepo>
  readonly revocation: RevocationPathService
  readonly suspension: AgentSuspensionService
  readonly events: EventsService
}) =>
(alert: AlertRow, rule: EffectiveRule): Effect.Effect<ResponseOutcome> =>
  Effect.gen(function*() {
    const agentId = alert.agentId
    if (agentId === null) return NONE
    if (rule.response === "suspend_agent") {
      const suspended = yield* deps.suspension.suspendActive(alert.developerId, agentId)
      return suspended ? { response: "suspended_agent" as const, refs: [agentId] } : NONE
    }
    // revoke_grants: the agent's active grants; the revocation path takes their descendants too
    const active = yield* deps.repo.q<{ id: string; root: boolean }>(
      `WITH RECURSIVE t AS (
         SELECT id, true AS root FROM grants WHERE developer_id = $1 AND agent_id = $2 AND status = 'active'
         UNION SELECT g.id, false FROM grants g JOIN t ON g.parent_grant_id = t.id WHERE g.status = 'active'
       ) SELECT id, bool_or(root) AS root FROM t GROUP BY id ORDER BY id`,
      [alert.developerId, agentId]
    ).pipe(Effect.orDie)
    if (active.length === 0) return NONE
    yield* deps.revocation.revokeTrees(alert.developerId, active.filter((g) => g.root).map((g) => g.id))
    const revoked = active.map((g) => g.id)
    yield* deps.events.emit(alert.developerId, "anomaly.auto_revoked", { alertId: alert.id, revokedGrants: revoked })
    return { response: "revoked_grants" as const, refs: revoked }
  })
