/**
 * Plans (decisions §16): the seeded figures, the WEBHOOK_ENDPOINTS_* overrides, and PLANS_FILE,
 * read once at start into the configuration. The same figures are upserted into the `plans` table
 * so invoices are priced by SQL; the hot path reads them from memory, keyed by the cached developer's plan.
 */
import { readFileSync } from "node:fs"

export const LIMIT_NAMES = [
  "agents",
  "webhooks",
  "activeGrants",
  "policies",
  "scimTokens",
  "ssoConnections",
  "authorizationsPerMonth",
  "tokenExchangesPerMonth",
  // decisions §22.2, §22.3: resource servers, and OAuth clients that registered themselves (DCR, CIMD)
  "resourceServers",
  "oauthClients"
] as const
export type LimitName = typeof LIMIT_NAMES[number]

export const METERS = [
  "authorizations",
  "token_exchanges",
  "vault_exchanges",
  "offline_entries",
  "active_agents",
  "active_grants"
] as const
export type Meter = typeof METERS[number]

/** the monthly quota limit that includes a meter's units (overage is billed above it) */
export const QUOTA_OF: Partial<Record<Meter, LimitName>> = {
  authorizations: "authorizationsPerMonth",
  token_exchanges: "tokenExchangesPerMonth"
}

export interface Plan {
  readonly code: string
  readonly name: string
  readonly limits: Readonly<Record<LimitName, number | null>>
  /** decimal strings with at most 4 places: money never passes through a float */
  readonly monthlyFee: string
  readonly currency: string
  readonly overage: Readonly<Partial<Record<Meter, string>>>
}

export type Plans = Readonly<Record<string, Plan>>

const limits = (values: ReadonlyArray<number | null>): Record<LimitName, number | null> =>
  Object.fromEntries(LIMIT_NAMES.map((name, i) => [name, values[i] ?? null])) as Record<LimitName, number | null>

/** agents, webhooks, activeGrants, policies, scimTokens, ssoConnections, authorizations/month, exchanges/month, resourceServers, oauthClients */
export const DEFAULT_PLANS: Plans = {
  free: {
    code: "free", name: "Free", currency: "USD", monthlyFee: "0", overage: {},
    limits: limits([500, 30, 1_000, 50, null, null, 50_000, 50_000, 5, 1_000])
  },
  pro: {
    code: "pro", name: "Pro", currency: "USD", monthlyFee: "49", overage: { authorizations: "0.5", token_exchanges: "0.1" },
    limits: limits([5_000, 200, 50_000, 500, null, null, 5_000_000, 5_000_000, 100, 50_000])
  },
  enterprise: {
    code: "enterprise", name: "Enterprise", currency: "USD", monthlyFee: "499", overage: {},
    limits: limits([null, null, null, null, null, null, null, null])
  }
}

export class PlansProblem extends Error {}

const money = (value: unknown, where: string): string => {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) throw new PlansProblem(`${where} must be a number of at least 0`)
  const text = String(value)
  if (!/^\d{1,16}(\.\d{1,4})?$/.test(text)) throw new PlansProblem(`${where} must have at most 4 decimal places`)
  return text
}

/** Validates a PLANS_FILE document; each plan it names replaces (or adds) that plan whole. */
export const parsePlans = (text: string, base: Plans = DEFAULT_PLANS): Plans => {
  let doc: unknown
  try {
    doc = JSON.parse(text)
  } catch {
    throw new PlansProblem("is not valid JSON")
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw new PlansProblem("must be a JSON object of plans by code")
  const out: Record<string, Plan> = { ...base }
  for (const [code, raw] of Object.entries(doc as Record<string, unknown>)) {
    if (!/^[a-z][a-z0-9_-]{0,31}$/.test(code)) throw new PlansProblem(`plan code "${code.slice(0, 40)}" must be lowercase letters, digits, - or _`)
    if (typeof raw !== "object" || raw === null) throw new PlansProblem(`${code} must be an object`)
    const p = raw as Record<string, unknown>
    if (typeof p.name !== "string" || p.name.length === 0 || p.name.length > 100) throw new PlansProblem(`${code}.name must be a non-empty string`)
    if (typeof p.limits !== "object" || p.limits === null) throw new PlansProblem(`${code}.limits must be an object`)
    const given = p.limits as Record<string, unknown>
    for (const key of Object.keys(given)) {
      if (!(LIMIT_NAMES as ReadonlyArray<string>).includes(key)) throw new PlansProblem(`${code}.limits.${key} is not a limit (${LIMIT_NAMES.join(", ")})`)
    }
    const planLimits = limits(LIMIT_NAMES.map((name) => {
      const v = given[name]
      if (v === undefined || v === null) return null
      if (typeof v !== "number" || !Number.isInteger(v) || v < 0) throw new PlansProblem(`${code}.limits.${name} must be a whole number or null`)
      return v
    }))
    const currency = p.currency ?? "USD"
    if (typeof currency !== "string" || !/^[A-Z]{3}$/.test(currency)) throw new PlansProblem(`${code}.currency must be a 3-letter code`)
    const overage: Partial<Record<Meter, string>> = {}
    if (p.overage !== undefined) {
      if (typeof p.overage !== "object" || p.overage === null) throw new PlansProblem(`${code}.overage must be an object`)
      for (const [meter, price] of Object.entries(p.overage as Record<string, unknown>)) {
        if (!(METERS as ReadonlyArray<string>).includes(meter)) throw new PlansProblem(`${code}.overage.${meter} is not a meter (${METERS.join(", ")})`)
        overage[meter as Meter] = money(price, `${code}.overage.${meter}`)
      }
    }
    out[code] = { code, name: p.name, limits: planLimits, monthlyFee: money(p.monthlyFee ?? 0, `${code}.monthlyFee`), currency, overage }
  }
  return out
}

/**
 * The plans at start: defaults, then the WEBHOOK_ENDPOINTS_* overrides (kept for existing
 * deployments), then PLANS_FILE, which wins. Throws PlansProblem naming what is wrong.
 */
export const loadPlans = (
  webhookOverrides: { readonly free: number | null; readonly pro: number | null; readonly enterprise: number | null },
  plansFile: string | undefined
): Plans => {
  const base: Record<string, Plan> = {}
  for (const [code, plan] of Object.entries(DEFAULT_PLANS)) {
    base[code] = { ...plan, limits: { ...plan.limits, webhooks: webhookOverrides[code as "free"] } }
  }
  if (plansFile === undefined) return base
  let text: string
  try {
    text = readFileSync(plansFile, "utf8")
  } catch {
    throw new PlansProblem(`cannot read ${plansFile}`)
  }
  return parsePlans(text, base)
}

/** a developer's plan, or free for a code the configuration no longer names */
export const planOf = (plans: Plans, code: string): Plan => plans[code] ?? plans.free ?? DEFAULT_PLANS.free!

/** the calendar month in UTC holding `ms`: [start, end) */
export const periodOf = (ms: number): { start: Date; end: Date; label: string } => {
  const d = new Date(ms)
  const start = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1))
  const end = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1))
  return { start, end, label: start.toISOString().slice(0, 7) }
}

/** `YYYY-MM` → the period, or undefined when malformed */
export const parsePeriod = (label: string): { start: Date; end: Date; label: string } | undefined => {
  const m = /^(\d{4})-(0[1-9]|1[0-2])$/.exec(label)
  if (m === null) return undefined
  return periodOf(Date.UTC(Number(m[1]), Number(m[2]) - 1, 1))
}
