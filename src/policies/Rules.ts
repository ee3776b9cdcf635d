/**
 * Built-in rules (decisions §13): the published shape plus days, time zones, actions and principal
 * groups, matched in plain TypeScript. Deny overrides: any matching deny denies, whatever the
 * priorities; `priority` only chooses which allow is reported.
 */

/** The points where policies are evaluated, as named in rules (`actions`) and in Cedar (`Action::"…"`). */
export const ACTIONS = ["authorize", "delegate", "bundle.create", "token.refresh", "vault.exchange"] as const
export type PolicyAction = typeof ACTIONS[number]

export interface Rule {
  readonly id: string
  readonly name: string
  readonly description: string | null
  readonly effect: "allow" | "deny"
  readonly priority: number
  readonly agentId: string | null
  readonly principalId: string | null
  readonly scopes: ReadonlyArray<string> | null
  readonly timeOfDayStart: string | null
  readonly timeOfDayEnd: string | null
  readonly daysOfWeek: ReadonlyArray<number> | null
  readonly timeZone: string
  readonly actions: ReadonlyArray<string>
  readonly principalGroups: ReadonlyArray<string> | null
  readonly createdAt: Date
  readonly updatedAt: Date
}

/** A rule as the API (and the compliance evidence pack) shows it. */
export const ruleView = (r: Rule) => ({
  id: r.id,
  name: r.name,
  description: r.description,
  effect: r.effect,
  priority: r.priority,
  agentId: r.agentId,
  principalId: r.principalId,
  scopes: r.scopes === null ? null : [...r.scopes],
  timeOfDayStart: r.timeOfDayStart,
  timeOfDayEnd: r.timeOfDayEnd,
  daysOfWeek: r.daysOfWeek === null ? null : [...r.daysOfWeek],
  timeZone: r.timeZone,
  actions: [...r.actions],
  principalGroups: r.principalGroups === null ? null : [...r.principalGroups],
  createdAt: r.createdAt.toISOString(),
  updatedAt: r.updatedAt.toISOString()
})

/** What every engine is given (decisions §13). */
export interface PolicyContext {
  readonly agentId: string
  readonly agentDid: string
  readonly principalId: string
  readonly developerId: string
  readonly scopes: ReadonlyArray<string>
  readonly action: PolicyAction
  readonly time: { readonly iso: string; readonly hhmm: string; readonly weekday: number; readonly tz: string }
  readonly request: { readonly ip: string | null; readonly userAgent: string | null }
  readonly grant?: { readonly id: string; readonly delegationDepth: number; readonly parentGrantId: string | null }
  readonly principal: { readonly active: boolean; readonly groups: ReadonlyArray<string>; readonly ssoVerified: boolean }
  /** decisions §22.5: an OAuth authorization's resource server, its identifier and how the client registered */
  readonly resourceServerId?: string
  readonly resource?: string
  readonly clientOrigin?: OAuthClientOrigin
}

export type OAuthClientOrigin = "api" | "dcr" | "cimd"

/** what an OAuth authorization adds to a point's policy context (decisions §22.5) */
export interface OAuthPolicyFacts {
  readonly resourceServerId: string
  readonly resource: string
  readonly clientOrigin: OAuthClientOrigin
}

export interface Decision {
  readonly effect: "allow" | "deny" | null
  readonly policyId: string | null
  readonly determiningPolicies: ReadonlyArray<string>
  readonly errors: ReadonlyArray<{ readonly policyId: string | null; readonly message: string }>
}

/** What one engine found: the ids of matching denies and allows (allows best first), and its errors. */
export interface EngineResult {
  readonly denies: ReadonlyArray<string>
  readonly allows: ReadonlyArray<string>
  readonly errors: ReadonlyArray<{ readonly policyId: string | null; readonly message: string }>
  /** the engine failed as a whole: fail closed */
  readonly failed?: boolean
}

export const HHMM = /^([01][0-9]|2[0-3]):[0-5][0-9]$/
export const INACTIVE_PRINCIPAL = "builtin:principal-inactive"
export const ENGINE_FAILED = "builtin:engine-failed"

const formatters = new Map<string, Intl.DateTimeFormat>()
const formatterFor = (timeZone: string) => {
  let f = formatters.get(timeZone)
  if (f === undefined) {
    f = new Intl.DateTimeFormat("en-GB", { timeZone, hourCycle: "h23", hour: "2-digit", minute: "2-digit", weekday: "short" })
    if (formatters.size > 1000) formatters.clear()
    formatters.set(timeZone, f)
  }
  return f
}

export const isTimeZone = (tz: string): boolean => {
  if (tz.length === 0 || tz.length > 64) return false
  try {
    formatterFor(tz)
    return true
  } catch {
    return false
  }
}

const WEEKDAYS: Record<string, number> = { Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6, Sun: 7 }

/** The wall-clock time and ISO weekday (Monday 1 … Sunday 7) at `ms` in `timeZone`. */
export const localTime = (ms: number, timeZone: string): { hhmm: string; weekday: number; minutes: number } => {
  let hour = "00", minute = "00", weekday = 1
  for (const part of formatterFor(timeZone).formatToParts(ms)) {
    if (part.type === "hour") hour = part.value
    else if (part.type === "minute") minute = part.value
    else if (part.type === "weekday") weekday = WEEKDAYS[part.value] ?? 1
  }
  return { hhmm: `${hour}:${minute}`, weekday, minutes: Number(hour) * 60 + Number(minute) }
}

const minutesOf = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5))

/** [start, end) with wrap past midnight; start = end means the whole day. */
const inWindow = (minutes: number, start: string, end: string) => {
  const s = minutesOf(start), e = minutesOf(end)
  if (s === e) return true
  return s < e ? minutes >= s && minutes < e : minutes >= s || minutes < e
}

/** Every condition of the rule holds (null means any); scopes differ by effect. */
export const ruleMatches = (rule: Rule, ctx: PolicyContext, ms: number): boolean => {
  if (!rule.actions.includes(ctx.action)) return false
  if (rule.agentId !== null && rule.agentId !== ctx.agentId) return false
  if (rule.principalId !== null && rule.principalId !== ctx.principalId) return false
  if (rule.principalGroups !== null && !rule.principalGroups.some((g) => ctx.principal.groups.includes(g))) return false
  if (rule.scopes !== null) {
    const held = rule.scopes
    // an allow must cover every requested scope; a deny matches any overlap
    const ok = rule.effect === "allow"
      ? ctx.scopes.length > 0 && ctx.scopes.every((s) => held.includes(s))
      : ctx.scopes.some((s) => held.includes(s))
    if (!ok) return false
  }
  if (rule.daysOfWeek !== null || (rule.timeOfDayStart !== null && rule.timeOfDayEnd !== null)) {
    const local = localTime(ms, rule.timeZone)
    if (rule.daysOfWeek !== null && !rule.daysOfWeek.includes(local.weekday)) return false
    if (rule.timeOfDayStart !== null && rule.timeOfDayEnd !== null && !inWindow(local.minutes, rule.timeOfDayStart, rule.timeOfDayEnd)) {
      return false
    }
  }
  return true
}

/** Rules are kept sorted by priority (highest first), then age, so the first allow is the one reported. */
export const sortRules = (rules: ReadonlyArray<Rule>): ReadonlyArray<Rule> =>
  [...rules].sort((a, b) =>
    b.priority - a.priority || a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  )

export const evaluateRules = (rules: ReadonlyArray<Rule>, ctx: PolicyContext, ms: number): EngineResult => {
  const denies: Array<string> = []
  const allows: Array<string> = []
  for (const rule of rules) {
    if (ruleMatches(rule, ctx, ms)) (rule.effect === "deny" ? denies : allows).push(rule.id)
  }
  return { denies, allows, errors: [] }
}

/** Deny overrides across engines; an engine that failed denies; an inactive principal is denied. */
export const combine = (ctx: PolicyContext, results: ReadonlyArray<EngineResult>): Decision => {
  const errors = results.flatMap((r) => r.errors)
  const denies = results.flatMap((r) => r.denies)
  if (!ctx.principal.active) denies.unshift(INACTIVE_PRINCIPAL)
  if (results.some((r) => r.failed)) denies.push(ENGINE_FAILED)
  if (denies.length > 0) return { effect: "deny", policyId: denies[0]!, determiningPolicies: denies, errors }
  const allows = results.flatMap((r) => r.allows)
  if (allows.length > 0) return { effect: "allow", policyId: allows[0]!, determiningPolicies: allows, errors }
  return { effect: null, policyId: null, determiningPolicies: [], errors }
}

/** Whether any rule names the action (the vault exchange is evaluated only then). */
export const rulesName = (rules: ReadonlyArray<Rule>, action: PolicyAction) => rules.some((r) => r.actions.includes(action))
