/**
 * Anomaly detection (decisions §14): the windowed pass over one developer, the enforce-mode
 * responses, and the alert lifecycle (open → acknowledged → resolved; never deleted).
 *
 * Responses go through the part-one paths only: an agent is suspended by the agents service (its
 * bundles revoked, its credentials suspended), grants are revoked by the grants service (cascade,
 * bundles, `grant.revoked`), then `anomaly.auto_revoked` says which. They run in enforce mode only;
 * monitor mode raises alerts and changes nothing.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Agents } from "../agents/Service.ts"
import { Config } from "../Config.ts"
import { Grants } from "../grants/Service.ts"
import { Conflict, NotFound } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { nowMillis } from "../platform/Time.ts"
import { AnomalyCore, type Responder } from "./Core.ts"
import { customRule, DETECTORS, type PassContext } from "./Detectors.ts"
import { type AlertRow, makeRepo } from "./Repo.ts"
import { evaluable } from "./Rules.ts"

export interface DetectOutcome {
  readonly detectedAt: Date
  readonly alerts: ReadonlyArray<AlertRow>
  readonly autoRevokedGrants: number
}

export interface AnomaliesService {
  /** runs the developer's windowed rules now, in one transaction */
  readonly detect: (developerId: string) => Effect.Effect<DetectOutcome>
  readonly transition: (developerId: string, id: string, to: "acknowledged" | "resolved", note?: string) => Effect.Effect<AlertRow, NotFound | Conflict>
  readonly repo: ReturnType<typeof makeRepo>
}

export class Anomalies extends Context.Tag("agent-auth/Anomalies")<Anomalies, AnomaliesService>() {}

/** signals older than this are no longer read by any inline rule */
const SIGNAL_RETENTION_MS = 86_400_000

export const AnomaliesLive = Layer.effect(
  Anomalies,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const core = yield* AnomalyCore
    const grants = yield* Grants
    const agents = yield* Agents
    const events = yield* Events
    const config = yield* Config
    const repo = makeRepo(sql)

    const respond: Responder = (alert, rule) =>
      Effect.gen(function*() {
        const agentId = alert.agentId
        if (agentId === null) return { response: "none" as const, refs: [] }
        if (rule.response === "suspend_agent") {
          const agent = yield* agents.find(alert.developerId, agentId)
          if (agent === undefined || agent.status !== "active") return { response: "none" as const, refs: [] }
          yield* agents.update(alert.developerId, agentId, { status: "suspended" }).pipe(Effect.orDie)
          return { response: "suspended_agent" as const, refs: [agentId] }
        }
        // revoke_grants: the agent's active grants; the revocation path takes their descendants too
        const active = yield* repo.q<{ id: string; root: boolean }>(
          `WITH RECURSIVE t AS (
             SELECT id, true AS root FROM grants WHERE developer_id = $1 AND agent_id = $2 AND status = 'active'
             UNION SELECT g.id, false FROM grants g JOIN t ON g.parent_grant_id = t.id WHERE g.status = 'active'
           ) SELECT id, bool_or(root) AS root FROM t GROUP BY id ORDER BY id`,
          [alert.developerId, agentId]
        ).pipe(Effect.orDie)
        if (active.length === 0) return { response: "none" as const, refs: [] }
        yield* grants.revokeMany(alert.developerId, active.filter((g) => g.root).map((g) => g.id))
        const revoked = active.map((g) => g.id)
        yield* events.emit(alert.developerId, "anomaly.auto_revoked", { alertId: alert.id, revokedGrants: revoked })
        return { response: "revoked_grants" as const, refs: revoked }
      })
    core.setResponder(respond)

    const detect = (developerId: string) =>
      sql.withTransaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        const now = new Date(ms)
        core.changed(developerId)
        const view = yield* core.view(developerId)
        yield* repo.q(`DELETE FROM anomaly_signals WHERE developer_id = $1 AND created_at < $2`, [developerId, new Date(ms - SIGNAL_RETENTION_MS)])
        if (view.settings.mode === "off") return { detectedAt: now, alerts: [], autoRevokedGrants: 0 }
        const ctx: PassContext = { repo, developerId, now, settings: view.settings, maxDelegationDepth: config.maxDelegationDepth }
        const alerts: Array<AlertRow> = []
        let autoRevokedGrants = 0
        for (const rule of view.rules) {
          if (!rule.enabled || rule.inline) continue
          const detector = rule.builtIn ? DETECTORS[rule.ruleId] : rule.condition !== null && evaluable(rule.condition) ? customRule : undefined
          if (detector === undefined) continue
          const findings = yield* detector(ctx, rule)
          for (const f of [...findings].sort((a, b) => a.evidenceAt.getTime() - b.evidenceAt.getTime())) {
            const alert = yield* core.raise({ developerId, rule, ...f, inline: false })
            if (alert === undefined) continue
            alerts.push(alert)
            autoRevokedGrants += alert.revokedNow?.length ?? 0
          }
        }
        return { detectedAt: now, alerts, autoRevokedGrants }
      })).pipe(Effect.orDie)

    const transition: AnomaliesService["transition"] = (developerId, id, to, note) =>
      sql.withTransaction(Effect.gen(function*() {
        const alert = yield* repo.lockAlert(developerId, id).pipe(Effect.orDie)
        if (alert === undefined) return yield* Effect.fail(new NotFound({ message: "Alert not found" }))
        if (alert.status === to) return alert
        if (alert.status === "resolved" || (alert.status === "acknowledged" && to === "acknowledged")) {
          return yield* Effect.fail(new Conflict({ message: `The alert is ${alert.status}; it cannot become ${to}` }))
        }
        return yield* repo.setStatus(id, to, note, new Date(yield* nowMillis)).pipe(Effect.orDie)
      })).pipe(Effect.catchTag("SqlError", Effect.die))

    return { detect, transition, repo }
  })
)
