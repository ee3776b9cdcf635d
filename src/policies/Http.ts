import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { Api } from "../Api.ts"
import { Entitlements } from "../billing/Entitlements.ts"
import { Config } from "../Config.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { BadRequest, NotFound, PolicyInvalid } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import { pageParams, toPage } from "../platform/Pagination.ts"
import { nowMillis } from "../platform/Time.ts"
import { type BundleRow, type DecisionRow, makeRepo, type RuleFields } from "./Repo.ts"
import { type PolicyAction, type Rule, ruleView } from "./Rules.ts"
import { PolicyEngine } from "./Service.ts"

const DECISION_WINDOW_MS = 30 * 24 * 60 * 60 * 1000

const bundleView = (b: BundleRow) => ({
  bundleId: b.id,
  format: b.format,
  version: b.version,
  sha256: b.sha256,
  policyCount: Number(b.policyCount),
  active: b.active,
  createdAt: b.createdAt.toISOString()
})

const decisionView = (d: DecisionRow) => ({
  decisionId: d.id,
  effect: d.effect,
  action: d.action,
  agentId: d.agentId,
  principalId: d.principalId,
  scopes: [...d.scopes],
  policyId: d.policyId,
  determiningPolicies: [...d.determiningPolicies],
  errors: Array.isArray(d.errors) ? d.errors as any : [],
  grantId: d.grantId,
  createdAt: d.createdAt.toISOString()
})

const dedupe = <A>(xs: ReadonlyArray<A> | null): ReadonlyArray<A> | null => xs === null ? null : [...new Set(xs)]

/** Cross-field rules the schema cannot say; 400 with details. */
const checkFields = (f: RuleFields) =>
  (f.timeOfDayStart === null) !== (f.timeOfDayEnd === null)
    ? Effect.fail(new BadRequest({
      message: "timeOfDayStart and timeOfDayEnd are given together",
      details: [{ path: f.timeOfDayStart === null ? "timeOfDayStart" : "timeOfDayEnd", message: "is required with the other time bound" }]
    }))
    : Effect.succeed(f)

/** the text, or undefined when the bytes are not UTF-8 (such content cannot be a Cedar set) */
const utf8 = (bytes: Uint8Array): string | undefined => {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes)
  } catch {
    return undefined
  }
}

const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

export const PoliciesHttp = HttpApiBuilder.group(Api, "policies", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const engine = yield* PolicyEngine
    const entitlements = yield* Entitlements
    const repo = makeRepo(sql)
    const orDie = <A, E>(e: Effect.Effect<A, E>) => Effect.orDie(e)
    const notFound = () => new NotFound({ message: "Policy not found" })

    type Input = Partial<Omit<RuleFields, "priority" | "timeZone" | "actions">> & {
      priority?: number | undefined
      timeZone?: string | undefined
      actions?: ReadonlyArray<string> | undefined
    }
    const merge = (base: RuleFields, p: Input): RuleFields => ({
      name: p.name ?? base.name,
      description: p.description === undefined ? base.description : p.description,
      effect: p.effect ?? base.effect,
      priority: p.priority ?? base.priority,
      agentId: p.agentId === undefined ? base.agentId : p.agentId,
      principalId: p.principalId === undefined ? base.principalId : p.principalId,
      scopes: p.scopes === undefined ? base.scopes : dedupe(p.scopes),
      timeOfDayStart: p.timeOfDayStart === undefined ? base.timeOfDayStart : p.timeOfDayStart,
      timeOfDayEnd: p.timeOfDayEnd === undefined ? base.timeOfDayEnd : p.timeOfDayEnd,
      daysOfWeek: p.daysOfWeek === undefined ? base.daysOfWeek : p.daysOfWeek === null ? null : [...new Set(p.daysOfWeek)].sort(),
      timeZone: p.timeZone ?? base.timeZone,
      actions: p.actions === undefined ? base.actions : dedupe(p.actions)!,
      principalGroups: p.principalGroups === undefined ? base.principalGroups : dedupe(p.principalGroups)
    })
    const blank: RuleFields = {
      name: "", description: null, effect: "deny", priority: 0, agentId: null, principalId: null, scopes: null, timeOfDayStart: null,
      timeOfDayEnd: null, daysOfWeek: null, timeZone: "UTC", actions: ["authorize"], principalGroups: null
    }
    /** a change is seen at once here; other instances hear it from the trigger's notification */
    const changed = (developerId: string) => engine.changed(developerId)

    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const fields = yield* checkFields(merge(blank, payload as Input))
          const ms = yield* nowMillis
          // the plan's cap (decisions §13, §16), counted under the entitlements' lock so two creations cannot pass it together
          const rule = yield* entitlements.withinCap(developer, "policies", orDie(repo.insert(developer.id, newId("pol", ms), fields, new Date(ms))))
          yield* changed(developer.id)
          return ruleView(rule)
        }))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const { limit, cursor } = yield* pageParams(urlParams)
          const rows = yield* orDie(repo.rulesPage(developer.id, limit, cursor))
          const total = yield* orDie(repo.count(developer.id))
          const { page, nextCursor } = toPage(rows, limit)
          return { policies: page.map(ruleView), total, nextCursor }
        }))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const rule = yield* orDie(repo.find(developer.id, path.id))
          if (rule === undefined) return yield* Effect.fail(notFound())
          return ruleView(rule)
        }))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const current = yield* orDie(repo.find(developer.id, path.id))
          if (current === undefined) return yield* Effect.fail(notFound())
          const fields = yield* checkFields(merge(current, payload as Input))
          const ms = yield* nowMillis
          const rule = yield* orDie(repo.update(developer.id, path.id, fields, new Date(ms)))
          if (rule === undefined) return yield* Effect.fail(notFound())
          yield* changed(developer.id)
          return ruleView(rule)
        }))
      .handle("remove", ({ path }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          if (!(yield* orDie(repo.remove(developer.id, path.id)))) return yield* Effect.fail(notFound())
          yield* changed(developer.id)
          return HttpServerResponse.empty({ status: 204 })
        }))
      .handle("sync", ({ payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          if (!STRICT_BASE64.test(payload.content)) {
            return yield* Effect.fail(new BadRequest({ message: "content must be base64", details: [{ path: "content", message: "must be base64" }] }))
          }
          const content = Buffer.from(payload.content, "base64")
          let policyCount = payload.fileCount ?? 1
          if (payload.format === "rego") {
            if (config.policy.backend !== "opa") {
              return yield* Effect.fail(new PolicyInvalid({
                message: "rego bundles are accepted only with POLICY_BACKEND=opa",
                details: [{ path: "format", message: "rego needs POLICY_BACKEND=opa" }]
              }))
            }
          } else {
            const text = utf8(content)
            if (text === undefined) {
              return yield* Effect.fail(new PolicyInvalid({ message: "content is not UTF-8 text", details: [{ path: "content", message: "is not UTF-8 text" }] }))
            }
            const parsed = yield* engine.parseCedar(text)
            if (!parsed.ok) {
              return yield* Effect.fail(new PolicyInvalid({ message: `The Cedar policy set is not valid: ${parsed.details[0]?.message}`, details: parsed.details }))
            }
            policyCount = Object.keys(parsed.set.policies).length
          }
          const ms = yield* nowMillis
          const activate = payload.activate ?? true
          const row = yield* orDie(repo.insertBundle(developer.id, {
            id: newId("pbnd", ms),
            format: payload.format,
            version: payload.version,
            sha256: createHash("sha256").update(content).digest("hex"),
            content,
            policyCount,
            activate,
            at: new Date(ms)
          }))
          if (activate) yield* changed(developer.id)
          return { ...bundleView(row), fileCount: payload.fileCount ?? 1, activated: activate }
        }))
      .handle("bundles", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const { limit, cursor } = yield* pageParams(urlParams)
          const rows = yield* orDie(repo.bundles(developer.id, urlParams.format, limit, cursor))
          const { page, nextCursor } = toPage(rows, limit)
          return { bundles: page.map(bundleView), nextCursor }
        }))
      .handle("activeBundle", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const row = yield* orDie(repo.activeBundle(developer.id, urlParams.format ?? "cedar"))
          if (row === undefined) return yield* Effect.fail(new NotFound({ message: "No active policy bundle" }))
          return bundleView(row)
        }))
      .handle("activate", ({ path }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const row = yield* orDie(repo.activate(developer.id, path.id))
          if (row === undefined) return yield* Effect.fail(new NotFound({ message: "Policy bundle not found" }))
          yield* changed(developer.id)
          return bundleView(row)
        }))
      .handle("evaluate", ({ payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          return yield* engine.explain((payload.action ?? "authorize") as PolicyAction, {
            developerId: developer.id,
            agentId: payload.agentId,
            principalId: payload.principalId,
            scopes: payload.scopes,
            ...(payload.grant !== undefined
              ? { grant: { id: payload.grant.id, delegationDepth: payload.grant.delegationDepth, parentGrantId: payload.grant.parentGrantId ?? null } }
              : {}),
            ...(payload.oauth !== undefined ? { oauth: payload.oauth } : {})
          }, {
            ...(payload.at !== undefined ? { at: Date.parse(payload.at) } : {}),
            ...(payload.request !== undefined ? { request: payload.request } : {}),
            ...(payload.principal !== undefined ? { principal: payload.principal } : {})
          })
        }))
      .handle("decisions", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const { limit, cursor } = yield* pageParams(urlParams)
          const ms = yield* nowMillis
          let since = ms - DECISION_WINDOW_MS
          if (urlParams.since !== undefined) {
            const at = Date.parse(urlParams.since)
            if (Number.isNaN(at)) {
              return yield* Effect.fail(new BadRequest({ message: "since must be an ISO 8601 time", details: [{ path: "since", message: "must be an ISO 8601 time" }] }))
            }
            since = Math.max(since, at)
          }
          const rows = yield* orDie(repo.decisions(developer.id, {
            ...(urlParams.effect !== undefined ? { effect: urlParams.effect } : {}),
            ...(urlParams.agentId !== undefined ? { agentId: urlParams.agentId } : {}),
            since: new Date(since),
            limit,
            cursor
          }))
          const { page, nextCursor } = toPage(rows, limit)
          return { decisions: page.map(decisionView), nextCursor }
        }))
  }))
