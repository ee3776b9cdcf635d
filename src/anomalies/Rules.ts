/**
 * The rule catalogue (decisions §14, §22.9): the twelve built-ins AD-001…AD-012, the published protocol's four
 * legacy types, their default severities, responses and thresholds, and the closed schema of a
 * custom rule's condition. A developer's overrides (anomaly_rules rows) are merged over these.
 */
import { Schema } from "effect"

export type Severity = "low" | "medium" | "high" | "critical"
export type Response = "alert" | "suspend_agent" | "revoke_grants"
export type Mode = "off" | "monitor" | "enforce"
export const SEVERITIES: ReadonlyArray<Severity> = ["low", "medium", "high", "critical"]
export const RESPONSES: ReadonlyArray<Response> = ["alert", "suspend_agent", "revoke_grants"]

export interface BuiltIn {
  readonly ruleId: string
  readonly name: string
  readonly description: string
  readonly severity: Severity
  /** inline rules fire in the transaction that sees the event; the others run in the detection pass */
  readonly inline: boolean
  /** enabled unless the developer changes it (AD-004 needs an off-hours window first) */
  readonly enabled: boolean
  readonly threshold: Readonly<Record<string, number>>
}

export const BUILT_INS: ReadonlyArray<BuiltIn> = [
  {
    ruleId: "AD-001", name: "Velocity spike", severity: "high", inline: false, enabled: true,
    description: "Grants for one agent in `windowMinutes` above max(`minimum`, `medianFactor` × its 7-day median for such a window)",
    threshold: { windowMinutes: 5, minimum: 20, medianFactor: 10 }
  },
  {
    ruleId: "AD-002", name: "Scope probing", severity: "high", inline: true, enabled: true,
    description: "`count` or more INVALID_SCOPES or SCOPE_ESCALATION answers for one agent in `windowMinutes`",
    threshold: { count: 3, windowMinutes: 10 }
  },
  {
    ruleId: "AD-003", name: "New network", severity: "medium", inline: false, enabled: true,
    description: "A token of an agent used from an IPv4 /24 or IPv6 /48 not seen for that agent in `days` days",
    threshold: { days: 30 }
  },
  {
    ruleId: "AD-004", name: "Off-hours activity", severity: "low", inline: false, enabled: true,
    description: "At least `count` grants or audit entries of one agent inside the developer's off-hours window (off until settings.offHours is set)",
    threshold: { count: 1 }
  },
  {
    ruleId: "AD-005", name: "Delegation depth", severity: "medium", inline: false, enabled: true,
    description: "A delegated grant at the maximum delegation depth, or deeper than the agent has ever gone",
    threshold: {}
  },
  {
    ruleId: "AD-006", name: "Mass revocation", severity: "high", inline: true, enabled: true,
    description: "More than `count` grants revoked within `windowSeconds`",
    threshold: { count: 5, windowSeconds: 60 }
  },
  {
    ruleId: "AD-007", name: "Budget cliff", severity: "high", inline: false, enabled: true,
    description: "`percent` % of a budget allocation spent within `windowMinutes`",
    threshold: { percent: 90, windowMinutes: 60 }
  },
  {
    ruleId: "AD-008", name: "Suspended agent use", severity: "critical", inline: true, enabled: true,
    description: "A token of a suspended or deleted agent presented (token verify, delegation, vault exchange)",
    threshold: {}
  },
  {
    ruleId: "AD-009", name: "Replay", severity: "critical", inline: true, enabled: true,
    description: "A reused authorization code or refresh token (the grant is revoked by the token endpoint itself)",
    threshold: {}
  },
  {
    ruleId: "AD-010", name: "Stale bundle", severity: "low", inline: false, enabled: true,
    description: "An active consent bundle with no offline sync for `hours` hours",
    threshold: { hours: 72 }
  },
  {
    ruleId: "AD-011", name: "Passkey counter regression", severity: "high", inline: true, enabled: true,
    description: "A genuine passkey signature whose counter did not grow above the stored one (a cloned authenticator)",
    threshold: {}
  },
  {
    ruleId: "AD-012", name: "Registration flood", severity: "medium", inline: true, enabled: true,
    description: "More than `developerCount` dynamic client registrations at your OAuth issuer, or more than `networkCount` from one IPv4 /24 or IPv6 /48, within `windowMinutes`",
    threshold: { developerCount: 50, networkCount: 10, windowMinutes: 10 }
  },
  {
    ruleId: "rate_spike", name: "Rate spike", severity: "high", inline: false, enabled: true,
    description: "More than `count` audit actions of one agent in the last hour (published protocol)",
    threshold: { count: 50 }
  },
  {
    ruleId: "high_failure_rate", name: "High failure rate", severity: "medium", inline: false, enabled: true,
    description: "Over `percent` % failure or blocked of at least `minimum` audit entries of one agent in 24 h (published protocol)",
    threshold: { percent: 20, minimum: 5 }
  },
  {
    ruleId: "new_principal", name: "New principal", severity: "low", inline: false, enabled: true,
    description: "A grant for an (agent, principal) pair never seen before (published protocol)",
    threshold: {}
  },
  {
    ruleId: "off_hours_activity", name: "Off-hours activity (UTC)", severity: "low", inline: false, enabled: true,
    description: "More than `count` audit entries of one agent between 22:00 and 06:00 UTC in 24 h (published protocol)",
    threshold: { count: 10 }
  }
]

export const BUILT_IN = new Map(BUILT_INS.map((r) => [r.ruleId, r]))

// ---- custom rules: the closed condition schema -----------------------------------------------

export const CUSTOM_EVENTS = ["token.issued", "authorize.requested", "vault.exchanged", "audit.logged", "token.verified"] as const
export const WINDOWS = { "1m": 60, "5m": 300, "15m": 900, "1h": 3600, "24h": 86400 } as const
export const MAX_CUSTOM_RULES = 50

/** unknown keys answer 400 (decisions §14: the closed schema) */
export const strict = { parseOptions: { onExcessProperty: "error" as const } }
export const Text = (max: number) => Schema.String.pipe(Schema.minLength(1), Schema.maxLength(max))

export const Condition = Schema.Struct({
  event: Schema.Literal(...CUSTOM_EVENTS),
  filter: Schema.optional(Schema.Struct({
    agentId: Schema.optional(Text(100)),
    scopesAny: Schema.optional(Schema.Array(Text(200)).pipe(Schema.minItems(1), Schema.maxItems(50))),
    status: Schema.optional(Schema.Literal("success", "failure", "blocked"))
  }).annotations(strict)),
  window: Schema.Literal("1m", "5m", "15m", "1h", "24h"),
  threshold: Schema.Int.pipe(Schema.greaterThanOrEqualTo(1), Schema.lessThanOrEqualTo(1_000_000)),
  groupBy: Schema.Literal("agent", "principal", "ip")
}).annotations(strict)
export type Condition = typeof Condition.Type

/**
 * Whether the detection pass can count a custom condition: `token.verified` and grouping by `ip` have
 * no durable per-request record to count (verification is the hot path), so such rules are kept and
 * listed with `evaluated: false`.
 */
export const evaluable = (c: Condition) => c.event !== "token.verified" && c.groupBy !== "ip"

/** A rule as it applies to one developer: the catalogue merged with their overrides, or a custom rule. */
export interface EffectiveRule {
  readonly ruleId: string
  readonly name: string
  readonly description: string | null
  readonly builtIn: boolean
  readonly inline: boolean
  readonly enabled: boolean
  readonly severity: Severity
  readonly response: Response
  readonly threshold: Readonly<Record<string, number>>
  readonly condition: Condition | null
  readonly alertChannels: ReadonlyArray<string>
  readonly createdAt: Date | null
  readonly updatedAt: Date | null
}

export interface RuleRow {
  readonly ruleId: string
  readonly builtIn: boolean
  readonly name: string | null
  readonly description: string | null
  readonly condition: Condition | null
  readonly severity: Severity | null
  readonly response: Response | null
  readonly threshold: Record<string, number> | null
  readonly enabled: boolean | null
  readonly alertChannels: ReadonlyArray<string>
  readonly createdAt: Date
  readonly updatedAt: Date
}

export const effectiveRules = (rows: ReadonlyArray<RuleRow>): ReadonlyArray<EffectiveRule> => {
  const byId = new Map(rows.map((r) => [r.ruleId, r]))
  const builtIns = BUILT_INS.map((b): EffectiveRule => {
    const o = byId.get(b.ruleId)
    return {
      ruleId: b.ruleId, name: b.name, description: b.description, builtIn: true, inline: b.inline,
      enabled: o?.enabled ?? b.enabled, severity: o?.severity ?? b.severity, response: o?.response ?? "alert",
      threshold: { ...b.threshold, ...(o?.threshold ?? {}) }, condition: null, alertChannels: o?.alertChannels ?? [],
      createdAt: null, updatedAt: o?.updatedAt ?? null
    }
  })
  const custom = rows.filter((r) => !r.builtIn).map((r): EffectiveRule => ({
    ruleId: r.ruleId, name: r.name ?? r.ruleId, description: r.description, builtIn: false, inline: false,
    enabled: r.enabled ?? true, severity: r.severity ?? "medium", response: r.response ?? "alert", threshold: {},
    condition: r.condition, alertChannels: r.alertChannels, createdAt: r.createdAt, updatedAt: r.updatedAt
  }))
  return [...builtIns, ...custom]
}
