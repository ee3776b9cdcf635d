/**
 * Cedar policy sets in process (decisions §13) with @cedar-policy/cedar-wasm. The wasm is imported
 * as a file so `bun build --compile` embeds it (as PGlite's is, platform/pgliteAssets.ts), and the
 * module is initialised from those bytes; the package's nodejs entry would read it from disk next
 * to itself, which the binary does not have.
 *
 * A set is validated against SCHEMA before it is stored, then pre-parsed once per developer (the
 * set id is the developer id, so a re-parse replaces it) and evaluated with the stateful call
 * (~4× cheaper than parsing on each request).
 */
// @ts-ignore: Bun file import
import cedarWasmPath from "../../node_modules/@cedar-policy/cedar-wasm/web/cedar_wasm_bg.wasm" with { type: "file" }
import * as cedar from "@cedar-policy/cedar-wasm/web"
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

let initialised: Promise<void> | undefined
/** Loads the wasm once per process. */
export const initCedar = (): Promise<void> =>
  initialised ??= Bun.file(cedarWasmPath).arrayBuffer().then((bytes) => {
    cedar.initSync({ module: new WebAssembly.Module(bytes) })
  })

export interface ParsedSet {
  /** our policy id → policy text */
  readonly policies: Record<string, string>
  readonly effects: Record<string, "permit" | "forbid">
  /** whether a policy's action constraint names `vault.exchange` (only then are exchanges evaluated) */
  readonly namesVaultExchange: boolean
}

export type ParseOutcome =
  | { readonly ok: true; readonly set: ParsedSet }
  | { readonly ok: false; readonly details: ReadonlyArray<{ path: string; message: string }> }

const ID = /^[A-Za-z0-9_.:-]{1,100}$/

const clip = (s: string) => s.length > 500 ? `${s.slice(0, 500)}…` : s

/** Parses and validates a set's text; each policy gets its `@id` when present and unique, else `policy<N>`. */
export const parseSet = (text: string): ParseOutcome => {
  if (Buffer.byteLength(text) > MAX_SET_BYTES) {
    return { ok: false, details: [{ path: "content", message: `a policy set may be at most ${MAX_SET_BYTES} bytes` }] }
  }
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
  let namesVaultExchange = false
  split.policies.forEach((policy, index) => {
    const json = cedar.policyToJson(policy)
    const annotated = json.type === "success" ? json.json.annotations?.id : undefined
    const id = typeof annotated === "string" && ID.test(annotated) && policies[annotated] === undefined ? annotated : `policy${index}`
    policies[id] = policy
    if (json.type === "success") {
      effects[id] = json.json.effect
      if (JSON.stringify(json.json.action).includes(`"vault.exchange"`)) namesVaultExchange = true
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
  return { ok: true, set: { policies, effects, namesVaultExchange } }
}

/** Makes `set` the developer's pre-parsed set; false when cedar refuses it (it was validated before). */
export const preparse = (developerId: string, set: ParsedSet): boolean =>
  cedar.preparsePolicySet(developerId, { staticPolicies: set.policies }).type === "success"

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
    const answer = cedar.statefulIsAuthorized({ ...cedarRequest(ctx), preparsedPolicySetId: developerId })
    if (answer.type === "failure") {
      return { denies: [], allows: [], errors: answer.errors.map((e) => ({ policyId: null, message: clip(e.message) })), failed: true }
    }
    const { decision, diagnostics } = answer.response
    const errors = diagnostics.errors.map((e) => ({ policyId: e.policyId, message: clip(e.error.message) }))
    const erroredForbids = diagnostics.errors.filter((e) => set.effects[e.policyId] === "forbid").map((e) => e.policyId)
    if (decision === "allow") return { denies: erroredForbids, allows: diagnostics.reason, errors }
    return { denies: [...diagnostics.reason, ...erroredForbids], allows: [], errors }
  } catch (e) {
    return { denies: [], allows: [], errors: [{ policyId: null, message: "the Cedar engine failed" }], failed: true }
  }
}

/** Stateless evaluation (the oracle test's reference): cedar's own decision and reasons. */
export const isAuthorizedDirect = (text: string, ctx: PolicyContext) => {
  const answer = cedar.isAuthorized({ ...cedarRequest(ctx), policies: { staticPolicies: text } })
  return answer.type === "success" ? answer.response : undefined
}
