/**
 * Cedar policy sets in process (decisions §13) with @cedar-policy/cedar-wasm. The wasm is imported
 * as a file so `bun build --compile` embeds it (as PGlite's is, platform/pgliteAssets.ts), and the
 * module is initialised from those bytes; the package's nodejs entry would read it from disk next
 * to itself, which the binary does not have.
 *
 * A set is validated against SCHEMA before it is stored (in a worker thread: CedarCheck.ts,
 * CedarPool.ts), then pre-parsed here once per developer (the
 * set id is the developer id, so a re-parse replaces it) and evaluated with the stateful call
 * (~4× cheaper than parsing on each request). Text is pre-scanned (CedarScan.ts) before the engine
 * sees it, and every call goes through `withEngine`, which replaces an engine that failed.
 */
import { onRecreate, withEngine } from "./CedarEngine.ts"
import { type CheckOutcome, checkHere, clip, type Details, precheck, type Reads, type ScopeJson } from "./CedarCheck.ts"
import type { EngineResult, PolicyContext } from "./Rules.ts"

export { MAX_SET_BYTES, MAX_SET_POLICIES, type Reads, SCHEMA } from "./CedarCheck.ts"
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
  | { readonly ok: false; readonly details: Details }

/** A set the engine checked (in a worker or here) as this thread evaluates it: scopes become predicates. */
export const fromChecked = (outcome: CheckOutcome): ParseOutcome => {
  if (!outcome.ok) return outcome
  const { policies, effects, reads } = outcome.set
  const scopes: Record<string, Matcher> = {}
  for (const [id, json] of Object.entries(outcome.set.scopes)) scopes[id] = json === null ? () => true : scopeMatcher(json)
  return { ok: true, set: { policies, effects, scopes, reads, slices: new Map() } }
}

/**
 * Parses and validates a set's text on this thread (the service parses uploads in workers,
 * CedarPool.ts; this is its fall-back and the tests' direct call). Text the pre-scan refuses never
 * reaches the engine; text on which the engine fails anyway (it has been re-created by then) is
 * refused like any invalid set.
 */
export const parseSet = (text: string): ParseOutcome => fromChecked(precheck(text) ?? checkHere(text))

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
const scopeMatcher = (json: ScopeJson | any): Matcher => {
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
    : {}),
  // decisions §22.5: present for OAuth authorizations only (`context has resourceServerId`)
  ...(ctx.resourceServerId !== undefined ? { resourceServerId: ctx.resourceServerId } : {}),
  ...(ctx.resource !== undefined ? { resource: ctx.resource } : {}),
  ...(ctx.clientOrigin !== undefined ? { clientOrigin: ctx.clientOrigin } : {})
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
