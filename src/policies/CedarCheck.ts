/**
 * What the Cedar engine does with an uploaded set before it is stored or used: split it into
 * policies, read each one's JSON form (id annotation, effect, scope, what its conditions read) and
 * validate the set against SCHEMA. This is the costly part (validation alone is milliseconds per
 * call for a 2-policy set, ~75 ms for 100 policies), so it runs in a worker (CedarPool.ts,
 * cedarWorker.ts) and answers only plain data that crosses a postMessage. The byte limit and the
 * pre-scan (`precheck`) run on the main thread before any of it.
 */
import { type Cedar, withEngine } from "./CedarEngine.ts"
import { scanCedar } from "./CedarScan.ts"

/** What a policy can see: the agent asks (principal), about a person (resource), for an action. */
export const SCHEMA = `entity Group;
entity Agent;
entity Principal in [Group] { active: Bool, ssoVerified: Bool };
type TimeInfo = { iso: String, hhmm: String, weekday: Long, tz: String, minuteOfDay: Long };
type RequestInfo = { ip?: String, userAgent?: String };
type GrantInfo = { id: String, delegationDepth: Long, parentGrantId?: String };
type PolicyContext = { agentId: String, agentDid: String, principalId: String, developerId: String, scopes: Set<String>,
  action: String, time: TimeInfo, request: RequestInfo, grant?: GrantInfo, resourceServerId?: String, resource?: String, clientOrigin?: String };
action "authorize", "delegate", "bundle.create", "token.refresh", "vault.exchange"
  appliesTo { principal: Agent, resource: Principal, context: PolicyContext };`

export const MAX_SET_BYTES = 256 * 1024
export const MAX_SET_POLICIES = 500

export type Details = ReadonlyArray<{ path: string; message: string }>

/**
 * What conditions read: context paths (`scopes`, `time.minuteOfDay`), whether they read the
 * principal or resource (entities, groups) or the action, or the context as a whole. A decision
 * depends on nothing else, so it can be remembered under those values.
 */
export interface Reads {
  readonly paths: ReadonlyArray<string>
  readonly entities: boolean
  readonly action: boolean
  readonly whole: boolean
}

/** A policy's scope as cedar's JSON form has it (principal, action, resource constraints). */
export type ScopeJson = { readonly principal: unknown; readonly action: unknown; readonly resource: unknown }

/** A validated set as plain data (structured-clonable): Cedar.ts's `fromChecked` makes it a ParsedSet. */
export interface CheckedSet {
  /** our policy id → policy text */
  readonly policies: Record<string, string>
  readonly effects: Record<string, "permit" | "forbid">
  /** null where cedar gave no JSON form (the policy's scope then matches every request) */
  readonly scopes: Record<string, ScopeJson | null>
  readonly reads: Record<string, Reads>
}

export type CheckOutcome =
  | { readonly ok: true; readonly set: CheckedSet }
  | { readonly ok: false; readonly details: Details }

/** the answer when the engine itself failed on the text (a trap, a crashed or silent worker) */
export const ENGINE_FAILURE: { readonly ok: false; readonly details: Details } = {
  ok: false,
  details: [{ path: "content", message: "the Cedar engine could not process this set (too deeply nested or too long an expression)" }]
}

const ID = /^[A-Za-z0-9_.:-]{1,100}$/

export const clip = (s: string) => s.length > 500 ? `${s.slice(0, 500)}…` : s

/** The checks made before the engine sees the text (linear, on the caller's thread); undefined when it passes. */
export const precheck = (text: string): CheckOutcome | undefined => {
  if (Buffer.byteLength(text) > MAX_SET_BYTES) {
    return { ok: false, details: [{ path: "content", message: `a policy set may be at most ${MAX_SET_BYTES} bytes` }] }
  }
  const problem = scanCedar(text)
  return problem === undefined ? undefined : { ok: false, details: [problem] }
}

/**
 * The engine's part against this thread's engine; a failure inside it (the engine has been
 * re-created by then) refuses the set like any invalid one.
 */
export const checkHere = (text: string): CheckOutcome => {
  try {
    return withEngine((engine) => checkSet(engine, text))
  } catch {
    return ENGINE_FAILURE
  }
}

/** Each policy gets its `@id` when present and unique, else `policy<N>`. */
const checkSet = (cedar: Cedar, text: string): CheckOutcome => {
  const split = cedar.policySetTextToParts(text)
  if (split.type === "failure") {
    return { ok: false, details: split.errors.slice(0, 20).map((e) => ({ path: "content", message: clip(e.message) })) }
  }
  if (split.policy_templates.length > 0) return { ok: false, details: [{ path: "content", message: "templates are not supported" }] }
  if (split.policies.length === 0) return { ok: false, details: [{ path: "content", message: "the set has no policies" }] }
  if (split.policies.length > MAX_SET_POLICIES) {
    return { ok: false, details: [{ path: "content", message: `a policy set may hold at most ${MAX_SET_POLICIES} policies` }] }
  }
  const policies: Record<string, string> = {}
  const effects: Record<string, "permit" | "forbid"> = {}
  const scopes: Record<string, ScopeJson | null> = {}
  const reads: Record<string, Reads> = {}
  split.policies.forEach((policy, index) => {
    const json = cedar.policyToJson(policy)
    const annotated = json.type === "success" ? json.json.annotations?.id : undefined
    const id = typeof annotated === "string" && ID.test(annotated) && policies[annotated] === undefined ? annotated : `policy${index}`
    policies[id] = policy
    if (json.type === "success") {
      const { principal, action, resource } = json.json
      scopes[id] = { principal, action, resource }
      reads[id] = readsOf(json.json.conditions)
      effects[id] = json.json.effect
    } else {
      scopes[id] = null
      reads[id] = { paths: [], entities: true, action: true, whole: true }
    }
  })
  const checked = cedar.validate({ schema: SCHEMA, policies: { staticPolicies: policies } })
  if (checked.type === "failure") {
    return { ok: false, details: checked.errors.slice(0, 20).map((e) => ({ path: "content", message: clip(e.message) })) }
  }
  if (checked.validationErrors.length > 0) {
    return {
      ok: false,
      details: checked.validationErrors.slice(0, 20).map((e) => ({ path: `content/${e.policyId}`, message: clip(e.error.message) }))
    }
  }
  return { ok: true, set: { policies, effects, scopes, reads } }
}

const readsOf = (conditions: unknown): Reads => {
  const paths = new Set<string>()
  let entities = false, action = false, whole = false
  /** ["time", "minuteOfDay"] for context.time.minuteOfDay; undefined when the chain is not on context */
  const chain = (node: any): Array<string> | undefined => {
    if (node?.Var === "context") return []
    const dot = node?.["."]
    if (dot && typeof dot === "object" && typeof dot.attr === "string") {
      const left = chain(dot.left)
      return left === undefined ? undefined : [...left, dot.attr]
    }
    return undefined
  }
  const walk = (node: any): void => {
    if (node === null || typeof node !== "object") return
    if (Array.isArray(node)) return node.forEach(walk)
    const path = chain(node)
    if (path !== undefined) {
      if (path.length === 0) whole = true
      else paths.add(path.join("."))
      return
    }
    const has = node.has
    if (has && typeof has === "object" && typeof has.attr === "string") {
      const left = chain(has.left)
      if (left !== undefined) {
        paths.add([...left, has.attr].join("."))
        return
      }
    }
    if (node.Var === "principal" || node.Var === "resource") entities = true
    if (node.Var === "action") action = true
    for (const value of Object.values(node)) walk(value)
  }
  walk(conditions)
  return { paths: [...paths].sort(), entities, action, whole }
}
