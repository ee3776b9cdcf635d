/**
 * What an agent's suspension does beyond its row (decisions §18, §19): its consent bundles revoked
 * through the one revocation path (a device cannot be paused, so it is told to wipe; reactivation
 * does not restore them) and its credentials' suspension bits set or cleared, in the caller's
 * transaction. Below the anomaly core, whose enforce-mode response suspends agents through it.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Credentials } from "../credentials/Service.ts"
import { RevocationPath } from "../grants/Revocation.ts"
import { inTransaction } from "../platform/AuditChain.ts"
import { nowMillis } from "../platform/Time.ts"

export interface AgentSuspensionService {
  /** after the agent's row changed status: answers the grants (of its bundles) revoked now */
  readonly statusChanged: (developerId: string, agentId: string, suspended: boolean, at: Date) => Effect.Effect<ReadonlyArray<string>>
  /** suspends the agent if it is active (one statement, no read first); false when it was not */
  readonly suspendActive: (developerId: string, agentId: string) => Effect.Effect<boolean>
}

export class AgentSuspension extends Context.Tag("agent-auth/AgentSuspension")<AgentSuspension, AgentSuspensionService>() {}

export const AgentSuspensionLive = Layer.effect(
  AgentSuspension,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const revocation = yield* RevocationPath
    const credentials = yield* Credentials

    const statusChanged: AgentSuspensionService["statusChanged"] = (developerId, agentId, suspended, at) =>
      Effect.gen(function*() {
        let revokedNow: ReadonlyArray<string> = []
        if (suspended) {
          // the agent's row lock, taken by the caller's UPDATE, orders this after any bundle creation that read it active
          const rows = yield* sql<{ grantId: string }>`
            SELECT grant_id FROM consent_bundles WHERE agent_id = ${agentId} AND developer_id = ${developerId} AND status = 'active'`
          revokedNow = (yield* revocation.revokeTrees(developerId, rows.map((r) => r.grantId))).revokedNow
        }
        yield* credentials.setAgentSuspended(developerId, agentId, suspended, at)
        return revokedNow
      }).pipe(Effect.orDie)

    const suspendActive: AgentSuspensionService["suspendActive"] = (developerId, agentId) =>
      inTransaction(sql, Effect.gen(function*() {
        const at = new Date(yield* nowMillis)
        const rows = yield* sql`UPDATE agents SET status = 'suspended', updated_at = ${at}
                                WHERE id = ${agentId} AND developer_id = ${developerId} AND deleted_at IS NULL AND status = 'active'
                                RETURNING id`
        if (rows.length === 0) return false
        yield* statusChanged(developerId, agentId, true, at)
        return true
      })).pipe(Effect.orDie)

    return { statusChanged, suspendActive }
  })
)
