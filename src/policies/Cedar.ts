/**
 * Cedar policy sets in process (decisions §13) with @cedar-policy/cedar-wasm. The wasm is imported
 * as a file so `bun build --compile` embeds it (as PGlite's is, platform/pgliteAssets.ts), and the
 * module is initialised from those bytes; the package's nodejs entry would read it from disk next
 * to itself, which the binary does not have.
 *
 * A set is validated against SCHEMA before it is stored, then pre-parsed once per developer (the
 * set id is the developer id, so a re-parse replaces it) and evaluated with the stateful call
 * (~4× cheaper than parsing on each request). Text is pre-scanned (CedarScan.ts) before the engine
 * sees it, and every call goes through `withEngine`, which replaces an engine that failed.
 */
import { type Cedar, onRecreate, withEngine } from "./CedarEngine.ts"
import { scanCedar } from "./CedarScan.ts"
import type { EngineResult, PolicyContext } from "./Rules.ts"

/** What a policy can see: the agent asks (principal), about a person (resource), for an action. */
export const SCHEMA = `entity Group;
entity Agent;
entity Principal in [Group] { active: Bool, ssoVerified: Bool };
type TimeInfo = { iso: String, hhmm: String, weekday: Long, tz: String, minuteOfDay: Long };
type RequestInfo = { ip?: String, userAgent?: String };
type GrantInfo = { id: String, delegationDepth: Long, parentGrantId?: String };
type PolicyContext = { agentId: String, agentDid: String, principalId: String, developerId: String, scopes: Set<String>,
  action: String, time: TimeInfo, request: RequestInfo, grant?: GrantInfo };
action "authorize", "delegate", "bundle.create", "token.refresh", "vault.exchange"
  appliesTo { principal: Agent, resource: Principal, context: PolicyContext };`

export const MAX_SET_BYTES = 256 * 1024
export const MAX_SET_POLICIES = 500

export { initCedar } from "./CedarEngine.ts"

/** A policy's scope (principal, action, resource constraints), read from its JSON form. */
type Matcher = (ctx: PolicyContext) => boolean

export interface ParsedSet {
  /** our policy id → policy text */
  readonly policies: Record<string, string>
  readonly effects: Record<string, "permit" | "forbid">
  /** whether a request can satisfy the policy's scope; a policy whose scope fails cannot apply or err */
  readonly scopes: Record<string, Matcher>
  /** what each policy's conditions read (the key under which a slice's decisions are remembered) */
  readonly reads: Record<string, Reads>
  /** slice (ids in the request's scope) → its pre-parsed set id; reset when full */
  readonly slices: Map<string, Slice>
}

export type ParseOutcome =
  | { readonly ok: true; readonly set: ParsedSet }
  | { readonly ok: false; readonly details: ReadonlyArray<{ path: string; message: string }> }

const ID = /^[A-Za-z0-9_.:-]{1,100}$/

const clip = (s: string) => s.length > 500 ? `${s.slice(0, 500)}…` : s

/**
 * Parses and validates a set's text; each policy gets its `@id` when present and unique, else
 * `policy<N>`. Text the pre-scan refuses never reaches the engine; text on which the engine fails
 * anyway (it has been re-created by then) is refused like any invalid set.
 */
export const parseSet = (text: string): ParseOutcome => {
  if (Buffer.byteLength(text) > MAX_SET_BYTES) {
    return { ok: false, details: [{ path: "content", message: `a policy set may be at most ${MAX_SET_BYTES} bytes` }] }
  }
  const problem = scanCedar(text)
  if (problem !== undefined) return { ok: false, details: [problem] }
  try {
    return withEngine((engine) => parseChecked(engine, text))
  } catch {
    return { ok: false, details: [{ path: "content", message: "the Cedar engine could not process this set (too deeply nested or too long an expression)" }] }
  }
}

const parseChecked = (cedar: Cedar, text: string): ParseOutcome => {
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
  const scopes: Record<string, Matcher> = {}
  const reads: Record<string, Reads> = {}
  split.policies.forEach((policy, index) => {
    const json = cedar.policyToJson(policy)
    const annotated = json.type === "success" ? json.json.annotations?.id : undefined
    const id = typeof annotated === "string" && ID.test(annotated) && policies[annotated] === undefined ? annotated : `policy${index}`
    policies[id] = policy
    scopes[id] = json.type === "success" ? scopeMatcher(json.json) : () => true
    reads[id] = json.type === "success" ? readsOf(json.json.conditions) : { paths: [], entities: true, action: true, whole: true }
    if (json.type === "success") effects[id] = json.json.effect
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
  return { ok: true, set: { policies, effects, scopes, reads, slices: new Map() } }
}

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

interface Slice {
  readonly setId: string
  readonly reads: Reads
  readonly memo: Map<string, EngineResult>
}
const MEMO_MAX = 4096

type Uid = { type?: string; id?: string; __entity?: { type: string; id: string } }
const uid = (e: Uid | undefined) => e?.__entity ?? (e?.type !== undefined ? { type: e.type, id: e.id! } : undefined)

/**
 * The scope of a policy as a predicate over our requests (principal Agent, action, resource
 * Principal in its groups). Anything not understood answers true: the slice may then hold a policy
 * that cannot apply, never lose one that could.
 */
const scopeMatcher = (json: any): Matcher => {
  const checks: Array<Matcher> = []
  const p = json.principal, a = json.action, r = json.resource
  if ((p?.op === "==" || p?.op === "in") && uid(p.entity) !== undefined) {
    const e = uid(p.entity)!
    checks.push(e.type === "Agent" ? (ctx) => ctx.agentId === e.id : () => false)
  }
  if (a?.op === "==" && uid(a.entity) !== undefined) {
    const e = uid(a.entity)!
    checks.push((ctx) => ctx.action === e.id)
  } else if (a?.op === "in" && Array.isArray(a.entities)) {
    const ids = a.entities.map((x: Uid) => uid(x)?.id)
    checks.push((ctx) => ids.includes(ctx.action))
  } else if (a?.op === "in" && uid(a.entity) !== undefined) {
    const e = uid(a.entity)!
    checks.push((ctx) => ctx.action === e.id)
  }
  const resourceIn = (e: { type: string; id: string }): Matcher =>
    e.type === "Principal" ? (ctx) => ctx.principalId === e.id : e.type === "Group" ? (ctx) => ctx.principal.groups.includes(e.id) : () => false
  if (r?.op === "==" && uid(r.entity) !== undefined) {
    const e = uid(r.entity)!
    checks.push(e.type === "Principal" ? (ctx) => ctx.principalId === e.id : () => false)
  } else if (r?.op === "in" && uid(r.entity) !== undefined) {
    checks.push(resourceIn(uid(r.entity)!))
  } else if (r?.op === "is" && r.in?.entity !== undefined && uid(r.in.entity) !== undefined) {
    checks.push(resourceIn(uid(r.in.entity)!))
  }
  return (ctx) => checks.every((check) => check(ctx))
}

/** which set each pre-parsed id holds now: ids are reused, so a holder checks before it evaluates */
const holders = new Map<string, object>()
// a new engine holds no pre-parsed set: each is pre-parsed again when next used
onRecreate(() => holders.clear())
const MAX_SLICES = 64

const ensurePreparsed = (setId: string, holder: object, policies: Record<string, string>): boolean => {
  if (holders.get(setId) === holder) return true
  try {
    if (withEngine((cedar) => cedar.preparsePolicySet(setId, { staticPolicies: policies })).type !== "success") return false
  } catch {
    return false
  }
  holders.set(setId, holder)
  return true
}

/** Makes `set` the developer's pre-parsed set; false when cedar refuses it (it was validated before). */
export const preparse = (developerId: string, set: ParsedSet): boolean => ensurePreparsed(developerId, set, set.policies)

/**
 * The pre-parsed set holding only the policies whose scope the request satisfies (Cedar's own
 * decision and reasons are the same: a policy outside its scope is never satisfied and never errs),
 * or undefined when none is. Most requests touch few policies of a large set, and cedar's cost
 * grows with the set (100 policies ≈ 1.3 ms a decision, a few ≈ 0.2 ms).
 */
const sliceFor = (developerId: string, set: ParsedSet, ctx: PolicyContext): Slice | "failed" | undefined => {
  const ids = Object.keys(set.policies).filter((id) => set.scopes[id]!(ctx))
  if (ids.length === 0) return undefined
  const key = ids.join("\u0000")
  let slice = set.slices.get(key)
  if (slice === undefined) {
    if (set.slices.size >= MAX_SLICES) set.slices.clear()
    // the object itself marks which slice a reused id holds
    const all = ids.map((id) => set.reads[id]!)
    slice = {
      // the whole set keeps the developer's id (pre-parsed at load); a part gets a numbered one
      setId: ids.length === Object.keys(set.policies).length ? developerId : `${developerId}#${set.slices.size}`,
      reads: {
        paths: [...new Set(all.flatMap((r) => r.paths))],
        entities: all.some((r) => r.entities),
        action: all.some((r) => r.action),
        whole: all.some((r) => r.whole)
      },
      memo: new Map()
    }
    set.slices.set(key, slice)
  }
  return ensurePreparsed(slice.setId, slice, Object.fromEntries(ids.map((id) => [id, set.policies[id]!]))) ? slice : "failed"
}

const valueAt = (value: any, path: string) => {
  for (const part of path.split(".")) value = value?.[part]
  return value
}

/** The values the slice's decision depends on (its scopes were satisfied, so only what conditions read). */
const memoKey = (slice: Slice, ctx: PolicyContext, context: Record<string, unknown>): string | undefined => {
  if (slice.reads.whole) return undefined
  const parts: Array<unknown> = slice.reads.paths.map((p) => valueAt(context, p) ?? null)
  if (slice.reads.action) parts.push(ctx.action)
  if (slice.reads.entities) parts.push(ctx.agentId, ctx.principalId, ctx.principal)
  return JSON.stringify(parts)
}

const cedarContext = (ctx: PolicyContext, minuteOfDay: number) => ({
  agentId: ctx.agentId,
  agentDid: ctx.agentDid,
  principalId: ctx.principalId,
  developerId: ctx.developerId,
  scopes: [...ctx.scopes],
  action: ctx.action,
  time: { ...ctx.time, minuteOfDay },
  request: {
    ...(ctx.request.ip !== null ? { ip: ctx.request.ip } : {}),
    ...(ctx.request.userAgent !== null ? { userAgent: ctx.request.userAgent } : {})
  },
  ...(ctx.grant !== undefined
    ? {
      grant: {
        id: ctx.grant.id,
        delegationDepth: ctx.grant.delegationDepth,
        ...(ctx.grant.parentGrantId !== null ? { parentGrantId: ctx.grant.parentGrantId } : {})
      }
    }
    : {})
})

/** The request as cedar takes it; exported for the oracle test, which calls cedar directly. */
export const cedarRequest = (ctx: PolicyContext) => {
  const minuteOfDay = Number(ctx.time.hhmm.slice(0, 2)) * 60 + Number(ctx.time.hhmm.slice(3, 5))
  return {
    principal: { type: "Agent", id: ctx.agentId },
    action: { type: "Action", id: ctx.action },
    resource: { type: "Principal", id: ctx.principalId },
    context: cedarContext(ctx, minuteOfDay),
    entities: [{
      uid: { type: "Principal", id: ctx.principalId },
      attrs: { active: ctx.principal.active, ssoVerified: ctx.principal.ssoVerified },
      parents: ctx.principal.groups.map((id) => ({ type: "Group", id }))
    }]
  }
}

/**
 * One decision against the developer's pre-parsed set. A forbid that fails to evaluate counts as a
 * deny (cedar would skip it, which would fail open); a failure of the call as a whole fails closed.
 */
export const evaluateSet = (developerId: string, set: ParsedSet, ctx: PolicyContext): EngineResult => {
  try {
    const slice = sliceFor(developerId, set, ctx)
    if (slice === undefined) return { denies: [], allows: [], errors: [] }
    if (slice === "failed") return { denies: [], allows: [], errors: [{ policyId: null, message: "the Cedar set could not be prepared" }], failed: true }
    const request = cedarRequest(ctx)
    const key = memoKey(slice, ctx, request.context)
    const remembered = key === undefined ? undefined : slice.memo.get(key)
    if (remembered !== undefined) return remembered
    const answer = withEngine((cedar) => cedar.statefulIsAuthorized({ ...request, preparsedPolicySetId: slice.setId }))
    if (answer.type === "failure") {
      return { denies: [], allows: [], errors: answer.errors.map((e) => ({ policyId: null, message: clip(e.message) })), failed: true }
    }
    const { decision, diagnostics } = answer.response
    const errors = diagnostics.errors.map((e) => ({ policyId: e.policyId, message: clip(e.error.message) }))
    const erroredForbids = diagnostics.errors.filter((e) => set.effects[e.policyId] === "forbid").map((e) => e.policyId)
    const result: EngineResult = decision === "allow"
      ? { denies: erroredForbids, allows: diagnostics.reason, errors }
      : { denies: [...diagnostics.reason, ...erroredForbids], allows: [], errors }
    if (key !== undefined) {
      if (slice.memo.size >= MEMO_MAX) slice.memo.clear()
      slice.memo.set(key, result)
    }
    return result
  } catch (e) {
    return { denies: [], allows: [], errors: [{ policyId: null, message: "the Cedar engine failed" }], failed: true }
  }
}

/** Stateless evaluation (the oracle test's reference): cedar's own decision and reasons. */
export const isAuthorizedDirect = (text: string, ctx: PolicyContext) => {
  const answer = withEngine((cedar) => cedar.isAuthorized({ ...cedarRequest(ctx), policies: { staticPolicies: text } }))
  return answer.type === "success" ? answer.response : undefined
}
