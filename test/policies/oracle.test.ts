/**
 * decisions §13, acceptance: random rule sets and requests, decided by cedar-wasm directly (the
 * package's own nodejs build, loaded independently of ours) and by our API, must agree, both for
 * built-in rules (translated to Cedar here) and for the same text stored as a Cedar set. Then the
 * algebra of deny-overrides as properties of the rule engine.
 */
import * as cedar from "@cedar-policy/cedar-wasm/nodejs"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import fc from "fast-check"
import { evaluateSet, initCedar, parseSet, preparse } from "../../src/policies/Cedar.ts"
import { ACTIONS, combine, evaluateRules, type PolicyContext, type Rule } from "../../src/policies/Rules.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { b64 } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "1000" } })
})
afterAll(async () => {
  await app?.stop()
})

const AGENTS = ["ag_a", "ag_b"]
const PRINCIPALS = ["p1", "p2", "p3"]
const GROUPS = ["g1", "g2"]
const SCOPES = ["s1", "s2", "s3"]
const hhmm = fc.tuple(fc.integer({ min: 0, max: 23 }), fc.constantFrom(0, 15, 30, 45))
  .map(([h, m]) => `${String(h).padStart(2, "0")}:${String(m).padStart(2, "0")}`)
const someOf = <A>(xs: ReadonlyArray<A>) => fc.subarray([...xs], { minLength: 1 })

interface RuleInput {
  effect: "allow" | "deny"
  priority: number
  agentId: string | null
  principalId: string | null
  scopes: Array<string> | null
  window: [string, string] | null
  daysOfWeek: Array<number> | null
  actions: Array<string>
  principalGroups: Array<string> | null
}
const ruleArb: fc.Arbitrary<RuleInput> = fc.record({
  effect: fc.constantFrom("allow" as const, "deny" as const),
  priority: fc.integer({ min: -5, max: 5 }),
  agentId: fc.option(fc.constantFrom(...AGENTS)),
  principalId: fc.option(fc.constantFrom(...PRINCIPALS)),
  scopes: fc.option(someOf(SCOPES)),
  window: fc.option(fc.tuple(hhmm, hhmm)),
  daysOfWeek: fc.option(someOf([1, 2, 3, 4, 5, 6, 7])),
  actions: someOf(ACTIONS),
  principalGroups: fc.option(someOf(GROUPS))
})
interface RequestInput {
  action: typeof ACTIONS[number]
  agentId: string
  principalId: string
  scopes: Array<string>
  groups: Array<string>
  at: number
}
// a week of minutes from Monday 2026-11-23 00:00 UTC
const WEEK_START = Date.parse("2026-11-23T00:00:00.000Z")
const requestArb: fc.Arbitrary<RequestInput> = fc.record({
  action: fc.constantFrom(...ACTIONS),
  agentId: fc.constantFrom(...AGENTS),
  principalId: fc.constantFrom(...PRINCIPALS),
  scopes: someOf(SCOPES),
  groups: fc.subarray(GROUPS),
  at: fc.integer({ min: 0, max: 7 * 24 * 60 - 1 }).map((m) => WEEK_START + m * 60_000)
})

const minutes = (t: string) => Number(t.slice(0, 2)) * 60 + Number(t.slice(3))
const set = (xs: ReadonlyArray<string | number>) => `[${xs.map((x) => typeof x === "number" ? x : JSON.stringify(x)).join(", ")}]`

/** The oracle's own reading of a rule as a Cedar policy (UTC, as generated). */
const toCedar = (id: string, r: RuleInput) => {
  const when: Array<string> = []
  // agent, principal and a single group go in the policy's scope (which our evaluation slices on), the rest in conditions
  const principal = r.agentId !== null ? `principal == Agent::${JSON.stringify(r.agentId)}` : "principal"
  let resource = "resource"
  if (r.principalId !== null) resource = `resource == Principal::${JSON.stringify(r.principalId)}`
  if (r.principalGroups !== null) {
    if (r.principalId === null && r.principalGroups.length === 1) resource = `resource in Group::${JSON.stringify(r.principalGroups[0])}`
    else when.push(`(${r.principalGroups.map((g) => `resource in Group::${JSON.stringify(g)}`).join(" || ")})`)
  }
  if (r.scopes !== null) when.push(r.effect === "allow" ? `${set(r.scopes)}.containsAll(context.scopes)` : `context.scopes.containsAny(${set(r.scopes)})`)
  if (r.daysOfWeek !== null) when.push(`${set(r.daysOfWeek)}.contains(context.time.weekday)`)
  if (r.window !== null) {
    const [s, e] = r.window.map(minutes) as [number, number]
    if (s < e) when.push(`(context.time.minuteOfDay >= ${s} && context.time.minuteOfDay < ${e})`)
    else if (s > e) when.push(`(context.time.minuteOfDay >= ${s} || context.time.minuteOfDay < ${e})`)
  }
  const actions = `[${r.actions.map((a) => `Action::${JSON.stringify(a)}`).join(", ")}]`
  return `@id(${JSON.stringify(id)})\n${r.effect === "allow" ? "permit" : "forbid"}(${principal}, action in ${actions}, ${resource})${
    when.length > 0 ? ` when { ${when.join(" && ")} }` : ""
  };`
}

/** cedar-wasm's own answer for the request, built here from the schema's field names. */
const direct = (policies: Record<string, string>, q: RequestInput, developerId: string) => {
  const d = new Date(q.at)
  const answer = cedar.isAuthorized({
    principal: { type: "Agent", id: q.agentId },
    action: { type: "Action", id: q.action },
    resource: { type: "Principal", id: q.principalId },
    context: {
      agentId: q.agentId, agentDid: `did:service:${q.agentId}`, principalId: q.principalId, developerId, scopes: q.scopes,
      action: q.action, request: {},
      time: {
        iso: d.toISOString(), hhmm: d.toISOString().slice(11, 16), weekday: d.getUTCDay() === 0 ? 7 : d.getUTCDay(), tz: "UTC",
        minuteOfDay: d.getUTCHours() * 60 + d.getUTCMinutes()
      }
    },
    entities: [{ uid: { type: "Principal", id: q.principalId }, attrs: { active: true, ssoVerified: false }, parents: q.groups.map((id) => ({ type: "Group", id })) }],
    // as a map, so that cedar reports our ids (it ignores @id)
    policies: { staticPolicies: policies }
  })
  if (answer.type !== "success") throw new Error(JSON.stringify(answer.errors))
  expect(answer.response.diagnostics.errors).toEqual([])
  const { decision, diagnostics } = answer.response
  return { effect: decision === "allow" ? "allow" : diagnostics.reason.length > 0 ? "deny" : null, reasons: [...diagnostics.reason].sort() }
}

const evaluate = (apiKey: string, q: RequestInput, principal: Record<string, unknown> = {}) =>
  app.request("POST", "/v1/policies/evaluate", {
    apiKey,
    body: { action: q.action, agentId: q.agentId, principalId: q.principalId, scopes: q.scopes, at: new Date(q.at).toISOString(), principal: { groups: q.groups, ...principal } }
  })

describe("oracle: our API and cedar-wasm decide alike", () => {
  test("built-in rules and the same text as a Cedar set", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(ruleArb, { maxLength: 5 }), fc.array(requestArb, { minLength: 1, maxLength: 4 }), async (rules, requests) => {
        const rulesDev = await app.signup({ plan: "pro" })
        const ids: Array<string> = []
        for (const r of rules) {
          const res = await app.request("POST", "/v1/policies", {
            apiKey: rulesDev.apiKey,
            body: {
              name: "r", effect: r.effect, priority: r.priority, agentId: r.agentId, principalId: r.principalId, scopes: r.scopes,
              timeOfDayStart: r.window?.[0] ?? null, timeOfDayEnd: r.window?.[1] ?? null, daysOfWeek: r.daysOfWeek, actions: r.actions,
              principalGroups: r.principalGroups
            }
          })
          expect(res.status).toBe(201)
          ids.push(res.body.id)
        }
        const policies: Record<string, string> = rules.length === 0
          ? { none: `@id("none") forbid(principal, action, resource) when { false };` }
          : Object.fromEntries(rules.map((r, i) => [ids[i]!, toCedar(ids[i]!, r)]))
        const text = Object.values(policies).join("\n")
        const cedarDev = await app.signup({ plan: "pro" })
        const synced = await app.request("POST", "/v1/policies/sync", { apiKey: cedarDev.apiKey, body: { format: "cedar", version: "1", content: b64(text) } })
        expect(synced.status).toBe(201)
        for (const q of requests) {
          for (const dev of [rulesDev, cedarDev]) {
            const expected = direct(policies, q, dev.developerId)
            const ours = await evaluate(dev.apiKey, q)
            expect(ours.status).toBe(200)
            expect({ effect: ours.body.effect, reasons: [...ours.body.determiningPolicies].sort() }).toEqual(expected)
          }
          // an inactive principal is denied whatever the rules say
          expect((await evaluate(rulesDev.apiKey, q, { active: false })).body.effect).toBe("deny")
        }
      }),
      { numRuns: 30 }
    )
  })
})

describe("oracle in process: one set, many requests (slices and remembered decisions)", () => {
  test("evaluateSet agrees with cedar-wasm on every request", async () => {
    await initCedar()
    let developer = 0
    fc.assert(fc.property(fc.array(ruleArb, { minLength: 1, maxLength: 12 }), fc.array(requestArb, { minLength: 20, maxLength: 60 }), (rules, requests) => {
      const developerId = `dev_oracle_${developer++}`
      const policies = Object.fromEntries(rules.map((r, i) => [`p${i}`, toCedar(`p${i}`, r)]))
      const parsed = parseSet(Object.values(policies).join("\n"))
      if (!parsed.ok) throw new Error(JSON.stringify(parsed.details))
      expect(preparse(developerId, parsed.set)).toBe(true)
      // each request twice: the second answer may come from memory and must not differ
      for (const q of [...requests, ...requests]) {
        const expected = direct(policies, q, developerId)
        const ctx: PolicyContext = {
          ...ctxOf(q), developerId, agentDid: `did:service:${q.agentId}`,
          time: { iso: new Date(q.at).toISOString(), hhmm: new Date(q.at).toISOString().slice(11, 16), weekday: new Date(q.at).getUTCDay() || 7, tz: "UTC" }
        }
        const ours = evaluateSet(developerId, parsed.set, ctx)
        const effect = ours.denies.length > 0 ? "deny" : ours.allows.length > 0 ? "allow" : null
        expect({ effect, reasons: [...ours.denies, ...ours.allows].sort() }).toEqual(expected)
      }
    }), { numRuns: 60 })
  })
})

// ---- properties of deny-overrides (the engine itself, many more cases) ----------------------------

let seq = 0
const asRule = (r: RuleInput): Rule => ({
  id: `pol_${++seq}`, name: "r", description: null, effect: r.effect, priority: r.priority, agentId: r.agentId, principalId: r.principalId,
  scopes: r.scopes, timeOfDayStart: r.window?.[0] ?? null, timeOfDayEnd: r.window?.[1] ?? null, daysOfWeek: r.daysOfWeek,
  timeZone: "UTC", actions: r.actions, principalGroups: r.principalGroups, createdAt: new Date(seq), updatedAt: new Date(seq)
})
const ctxOf = (q: RequestInput, active = true): PolicyContext => ({
  agentId: q.agentId, agentDid: "", principalId: q.principalId, developerId: "dev", scopes: q.scopes, action: q.action,
  time: { iso: "", hhmm: "", weekday: 0, tz: "UTC" }, request: { ip: null, userAgent: null },
  principal: { active, groups: q.groups, ssoVerified: false }
})
const decide = (rules: ReadonlyArray<Rule>, q: RequestInput, active = true) =>
  combine(ctxOf(q, active), [evaluateRules([...rules].sort((a, b) => b.priority - a.priority), ctxOf(q, active), q.at)]).effect
const rank = (e: "allow" | "deny" | null) => e === "allow" ? 2 : e === null ? 1 : 0

describe("properties", () => {
  test("adding a deny never allows more", () => {
    fc.assert(fc.property(fc.array(ruleArb, { maxLength: 8 }), ruleArb, requestArb, (rules, extra, q) => {
      const base = rules.map(asRule)
      const withDeny = [...base, asRule({ ...extra, effect: "deny" })]
      expect(rank(decide(withDeny, q))).toBeLessThanOrEqual(rank(decide(base, q)))
    }), { numRuns: 2000 })
  })

  test("removing an allow never allows more", () => {
    fc.assert(fc.property(fc.array(ruleArb, { minLength: 1, maxLength: 8 }), fc.nat(), requestArb, (rules, pick, q) => {
      const base = rules.map(asRule)
      const allows = base.filter((r) => r.effect === "allow")
      if (allows.length === 0) return
      const removed = allows[pick % allows.length]!
      const without = base.filter((r) => r !== removed)
      expect(decide(without, q) === "allow" ? decide(base, q) : "allow").toBe("allow")
    }), { numRuns: 2000 })
  })

  test("priority never lets an allow beat a deny", () => {
    fc.assert(fc.property(fc.array(ruleArb, { maxLength: 8 }), requestArb, fc.array(fc.integer({ min: -1000, max: 1000 }), { minLength: 8, maxLength: 8 }), (rules, q, priorities) => {
      const base = rules.map(asRule)
      const reprioritised = base.map((r, i) => ({ ...r, priority: priorities[i]! }))
      const anyDeny = base.some((r) => r.effect === "deny" && evaluateRules([r], ctxOf(q), q.at).denies.length > 0)
      if (anyDeny) expect(decide(reprioritised, q)).toBe("deny")
      expect(decide(reprioritised, q)).toBe(decide(base, q))
    }), { numRuns: 2000 })
  })

  test("an inactive principal is always denied", () => {
    fc.assert(fc.property(fc.array(ruleArb, { maxLength: 8 }), requestArb, (rules, q) => {
      expect(decide(rules.map(asRule), q, false)).toBe("deny")
    }), { numRuns: 1000 })
  })

  test("a scope outside every allow never auto-approves", () => {
    fc.assert(fc.property(fc.array(ruleArb, { maxLength: 8 }), requestArb, (rules, q) => {
      const base = rules.map(asRule)
      const outside = { ...q, scopes: [...q.scopes, "s_unknown"] }
      // a rule without scopes allows any scope; only those with scopes must refuse the outsider
      const scoped = base.filter((r) => r.scopes !== null || r.effect === "deny")
      expect(decide(scoped, outside)).not.toBe("allow")
    }), { numRuns: 1000 })
  })
})
