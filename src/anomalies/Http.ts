/** Handlers of the anomaly endpoints (decisions §14): thin, over Anomalies, AnomalyCore and the repo. */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { BadRequest, Conflict, NotFound } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import { pageParams, toPage } from "../platform/Pagination.ts"
import { iso, nowMillis } from "../platform/Time.ts"
import { AnomalyChannels } from "./Channels.ts"
import { AnomalyCore } from "./Core.ts"
import { filterProblem } from "./Detectors.ts"
import { allowEntryProblem } from "./Network.ts"
import type { AlertRow, Settings } from "./Repo.ts"
import { BUILT_IN, type Condition, type EffectiveRule, evaluable, MAX_CUSTOM_RULES } from "./Rules.ts"
import { Anomalies } from "./Service.ts"

export const alertView = (a: AlertRow) => ({
  alertId: a.id,
  ruleId: a.ruleId,
  ruleName: a.ruleName,
  severity: a.severity,
  status: a.status,
  agentId: a.agentId,
  principalId: a.principalId,
  occurrences: a.occurrences,
  firstSeenAt: a.firstSeenAt.toISOString(),
  lastSeenAt: a.lastSeenAt.toISOString(),
  detectedAt: a.createdAt.toISOString(),
  description: a.description,
  context: a.context,
  response: a.response,
  responseRefs: [...a.responseRefs],
  acknowledgedAt: iso(a.acknowledgedAt),
  resolvedAt: iso(a.resolvedAt),
  note: a.note
})

const legacyView = (a: AlertRow) => ({ ...alertView(a), id: a.id, type: a.ruleId, metadata: a.context })

const ruleView = (r: EffectiveRule) => ({
  ruleId: r.ruleId,
  name: r.name,
  description: r.description,
  builtIn: r.builtIn,
  inline: r.inline,
  enabled: r.enabled,
  severity: r.severity,
  response: r.response,
  threshold: { ...r.threshold },
  condition: r.condition,
  alertChannels: [...r.alertChannels],
  evaluated: r.builtIn || (r.condition !== null && evaluable(r.condition)),
  createdAt: iso(r.createdAt),
  updatedAt: iso(r.updatedAt)
})

const settingsView = (s: Settings) => ({
  mode: s.mode,
  allowList: [...s.allowList],
  offHours: s.offHours === null ? null : { ...s.offHours, days: [...s.offHours.days] },
  updatedAt: iso(s.updatedAt)
})

const WINDOW_MS = { "1h": 3_600_000, "6h": 21_600_000, "24h": 86_400_000 } as const

const conditionProblem = (c: Condition) => {
  const problem = filterProblem(c)
  return problem === undefined ? Effect.void : Effect.fail(new BadRequest({ message: problem, details: [{ path: "condition.filter", message: problem }] }))
}

export const AnomaliesHttp = HttpApiBuilder.group(Api, "anomalies", (handlers) =>
  Effect.gen(function*() {
    const anomalies = yield* Anomalies
    const core = yield* AnomalyCore
    const channels = yield* AnomalyChannels
    /** a rule's alertChannels must be the developer's live channels */
    const checkChannels = (developerId: string, ids: ReadonlyArray<string> | undefined) =>
      Effect.gen(function*() {
        if (ids === undefined || ids.length === 0) return
        const owned = new Set(yield* channels.ownedIds(developerId, [...new Set(ids)]))
        const unknown = ids.findIndex((id) => !owned.has(id))
        if (unknown >= 0) {
          return yield* Effect.fail(new BadRequest({
            message: `alertChannels: ${ids[unknown]} is not one of your anomaly channels`,
            details: [{ path: `alertChannels.${unknown}`, message: "is not one of your anomaly channels" }]
          }))
        }
      })
    const repo = anomalies.repo
    const orDie = <A, E>(e: Effect.Effect<A, E>) => Effect.orDie(e)
    const ruleOf = (developerId: string, ruleId: string) =>
      Effect.gen(function*() {
        core.changed(developerId)
        const rule = (yield* core.view(developerId)).rule(ruleId)
        if (rule === undefined) return yield* Effect.fail(new NotFound({ message: "Rule not found" }))
        return rule
      })
    const listPage = (developerId: string, urlParams: { limit?: string | undefined; cursor?: string | undefined }, filters: Parameters<typeof repo.listAlerts>[1]) =>
      Effect.gen(function*() {
        const { limit, cursor } = yield* pageParams(urlParams)
        const rows = yield* orDie(repo.listAlerts(developerId, filters, limit, cursor))
        return toPage(rows, limit)
      })

    return handlers
      .handle("detect", () =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const outcome = yield* anomalies.detect(developer.id)
          return {
            detectedAt: outcome.detectedAt.toISOString(),
            total: outcome.alerts.length,
            autoRevokedGrants: outcome.autoRevokedGrants,
            anomalies: outcome.alerts.map(legacyView)
          }
        }))
      .handle("legacyList", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const { page, nextCursor } = yield* listPage(developer.id, urlParams,
            urlParams.unacknowledged === "true" ? { status: "open" } : {})
          return { anomalies: page.map(legacyView), total: page.length, nextCursor }
        }))
      .handle("legacyAcknowledge", ({ path }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          return legacyView(yield* anomalies.transition(developer.id, path.id, "acknowledged"))
        }))
      .handle("alerts", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const since = urlParams.since === undefined ? undefined : new Date(urlParams.since)
          if (since !== undefined && Number.isNaN(since.getTime())) {
            return yield* Effect.fail(new BadRequest({ message: "since must be an ISO 8601 time" }))
          }
          const { page, nextCursor } = yield* listPage(developer.id, urlParams, { ...urlParams, since })
          return { data: page.map(alertView), nextCursor }
        }))
      .handle("alert", ({ path }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const alert = yield* orDie(repo.findAlert(developer.id, path.id))
          if (alert === undefined) return yield* Effect.fail(new NotFound({ message: "Alert not found" }))
          return alertView(alert)
        }))
      .handle("acknowledge", ({ path, payload }) =>
        Effect.flatMap(CurrentDeveloper, (developer) =>
          Effect.map(anomalies.transition(developer.id, path.id, "acknowledged", payload.note), alertView)))
      .handle("resolve", ({ path, payload }) =>
        Effect.flatMap(CurrentDeveloper, (developer) =>
          anomalies.transition(developer.id, path.id, "resolved", payload.note).pipe(
            Effect.map(alertView),
            // resolving is never backwards: a resolved alert answers unchanged
            Effect.catchTag("Conflict", Effect.die)
          )))
      .handle("metrics", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const window = urlParams.window ?? "24h"
          const since = new Date((yield* nowMillis) - WINDOW_MS[window])
          const rows = yield* orDie(repo.metrics(developer.id, since, urlParams.agentId))
          const sum = (f: (r: typeof rows[number]) => boolean) => rows.filter(f).reduce((n, r) => n + r.n, 0)
          return {
            window,
            total: sum(() => true),
            byStatus: { open: sum((r) => r.status === "open"), acknowledged: sum((r) => r.status === "acknowledged"), resolved: sum((r) => r.status === "resolved") },
            bySeverity: {
              critical: sum((r) => r.severity === "critical"), high: sum((r) => r.severity === "high"),
              medium: sum((r) => r.severity === "medium"), low: sum((r) => r.severity === "low")
            }
          }
        }))
      .handle("rules", () =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          return { rules: (yield* core.view(developer.id)).rules.map(ruleView) }
        }))
      .handle("createRule", ({ payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          yield* conditionProblem(payload.condition)
          yield* checkChannels(developer.id, payload.alertChannels)
          const ms = yield* nowMillis
          const ruleId = payload.ruleId ?? newId("arule", ms)
          if (BUILT_IN.has(ruleId)) return yield* Effect.fail(new Conflict({ message: `${ruleId} is a built-in rule` }))
          const rows = yield* orDie(repo.q(
            `INSERT INTO anomaly_rules (developer_id, rule_id, built_in, name, description, condition, severity, response, enabled,
                                        alert_channels, created_at, updated_at)
             SELECT $1, $2, false, $3, $4, $5::jsonb, $6, $7, $8, $9, $10, $10
             WHERE (SELECT count(*) FROM anomaly_rules WHERE developer_id = $1 AND NOT built_in) < $11
             ON CONFLICT (developer_id, rule_id) DO NOTHING RETURNING rule_id`,
            [developer.id, ruleId, payload.name, payload.description ?? null, JSON.stringify(payload.condition), payload.severity ?? "medium",
              payload.response ?? "alert", payload.enabled ?? true, [...(payload.alertChannels ?? [])], new Date(ms), MAX_CUSTOM_RULES]
          ))
          if (rows.length === 0) {
            const [exists] = yield* orDie(repo.q(`SELECT 1 FROM anomaly_rules WHERE developer_id = $1 AND rule_id = $2`, [developer.id, ruleId]))
            return yield* Effect.fail(new Conflict({
              message: exists !== undefined ? `A rule ${ruleId} exists` : `At most ${MAX_CUSTOM_RULES} custom rules per developer`
            }))
          }
          return ruleView(yield* ruleOf(developer.id, ruleId).pipe(Effect.orDie))
        }))
      .handle("updateRule", ({ path, payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const rule = yield* ruleOf(developer.id, path.ruleId)
          const builtIn = BUILT_IN.get(rule.ruleId)
          if (builtIn !== undefined) {
            const custom = (["name", "description", "condition"] as const).find((k) => payload[k] !== undefined)
            if (custom !== undefined) {
              return yield* Effect.fail(new BadRequest({ message: `${custom} is fixed for built-in rules`, details: [{ path: custom, message: "is fixed for built-in rules" }] }))
            }
            const unknown = Object.keys(payload.threshold ?? {}).find((k) => !(k in builtIn.threshold))
            if (unknown !== undefined) {
              const known = Object.keys(builtIn.threshold)
              return yield* Effect.fail(new BadRequest({
                message: `${rule.ruleId} has no threshold ${unknown}${known.length > 0 ? ` (it has ${known.join(", ")})` : ""}`,
                details: [{ path: `threshold.${unknown}`, message: "is not a threshold of this rule" }]
              }))
            }
          } else if (payload.threshold !== undefined) {
            return yield* Effect.fail(new BadRequest({ message: "A custom rule's threshold is condition.threshold", details: [{ path: "threshold", message: "is for built-in rules" }] }))
          }
          if (payload.condition !== undefined) yield* conditionProblem(payload.condition)
          yield* checkChannels(developer.id, payload.alertChannels)
          const ms = yield* nowMillis
          yield* orDie(repo.q(
            `INSERT INTO anomaly_rules (developer_id, rule_id, built_in, enabled, severity, response, threshold, alert_channels, created_at, updated_at)
             VALUES ($1, $2, true, $3, $4, $5, $6::jsonb, coalesce($7, '{}'::text[]), $8, $8)
             ON CONFLICT (developer_id, rule_id) DO UPDATE SET
               enabled = coalesce($3, anomaly_rules.enabled), severity = coalesce($4, anomaly_rules.severity),
               response = coalesce($5, anomaly_rules.response),
               threshold = CASE WHEN $6::jsonb IS NULL THEN anomaly_rules.threshold ELSE coalesce(anomaly_rules.threshold, '{}'::jsonb) || $6::jsonb END,
               alert_channels = coalesce($7, anomaly_rules.alert_channels),
               name = coalesce($9, anomaly_rules.name),
               description = CASE WHEN $10::boolean THEN $11 ELSE anomaly_rules.description END,
               condition = coalesce($12::jsonb, anomaly_rules.condition),
               updated_at = $8`,
            [developer.id, rule.ruleId, payload.enabled ?? null, payload.severity ?? null, payload.response ?? null,
              payload.threshold === undefined ? null : JSON.stringify(payload.threshold),
              payload.alertChannels === undefined ? null : [...payload.alertChannels], new Date(ms), payload.name ?? null,
              payload.description !== undefined, payload.description ?? null,
              payload.condition === undefined ? null : JSON.stringify(payload.condition)]
          ))
          return ruleView(yield* ruleOf(developer.id, rule.ruleId).pipe(Effect.orDie))
        }))
      .handle("deleteRule", ({ path }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          if (BUILT_IN.has(path.ruleId)) {
            return yield* Effect.fail(new Conflict({ message: "Built-in rules cannot be deleted; disable them with PATCH { enabled: false }" }))
          }
          const rows = yield* orDie(repo.q(`DELETE FROM anomaly_rules WHERE developer_id = $1 AND rule_id = $2 AND NOT built_in RETURNING rule_id`,
            [developer.id, path.ruleId]))
          if (rows.length === 0) return yield* Effect.fail(new NotFound({ message: "Rule not found" }))
          core.changed(developer.id)
          return HttpServerResponse.empty({ status: 204 })
        }))
      .handle("settings", () =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          return settingsView(yield* orDie(repo.settings(developer.id)))
        }))
      .handle("updateSettings", ({ payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          for (const [i, entry] of (payload.allowList ?? []).entries()) {
            const problem = allowEntryProblem(entry)
            if (problem !== undefined) return yield* Effect.fail(new BadRequest({ message: problem, details: [{ path: `allowList.${i}`, message: problem }] }))
          }
          const oh = payload.offHours
          if (oh !== undefined && oh !== null && oh.start === oh.end) {
            return yield* Effect.fail(new BadRequest({ message: "offHours.start and offHours.end must differ", details: [{ path: "offHours.end", message: "equals start" }] }))
          }
          const current = yield* orDie(repo.settings(developer.id))
          const next: Settings = {
            mode: payload.mode ?? current.mode,
            allowList: payload.allowList === undefined ? current.allowList : [...new Set(payload.allowList)],
            offHours: oh === undefined ? current.offHours : oh === null ? null : {
              start: oh.start, end: oh.end, days: [...new Set(oh.days ?? [1, 2, 3, 4, 5, 6, 7])].sort(), timeZone: oh.timeZone ?? "UTC"
            },
            updatedAt: new Date(yield* nowMillis)
          }
          yield* orDie(repo.saveSettings(developer.id, next, next.updatedAt!))
          core.changed(developer.id)
          return settingsView(next)
        }))
  }))
