/**
 * Anomaly detection (decisions §14): the windowed pass over one developer, the enforce-mode
 * responses, and the alert lifecycle (open → acknowledged → resolved; never deleted).
 *
 * Responses are the core's (Responses.ts), made when an alert opens in enforce mode; monitor mode
 * raises alerts and changes nothing.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Config } from "../Config.ts"
import { Conflict, NotFound } from "../platform/Errors.ts"
import { nowMillis } from "../platform/Time.ts"
import { AnomalyCore } from "./Core.ts"
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
    const config = yield* Config
    const repo = makeRepo(sql)


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
