/**
 * Summaries, descriptions and examples of anomaly alerts, rules and settings (decisions §14);
 * AnomaliesApi carries them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { AGENT, T } from "../platform/DocExamples.ts"

const ALERT = "anm_01JDQA1B2C3D4E5F6G7H8J9K0M"
const alert = {
  alertId: ALERT, ruleId: "AD-002", ruleName: "Scope probing", severity: "high", status: "open", agentId: AGENT, principalId: null,
  occurrences: 2, firstSeenAt: T, lastSeenAt: T, detectedAt: T,
  description: `4 scope refusals (INVALID_SCOPES) for agent ${AGENT} within 10 minutes`,
  context: { refusals: 4, lastCode: "INVALID_SCOPES", windowMinutes: 10 }, response: "none", responseRefs: [],
  acknowledgedAt: null, resolvedAt: null, note: null
}
const legacy = { ...alert, id: ALERT, type: "AD-002", metadata: alert.context }
const builtIn = {
  ruleId: "AD-001", name: "Velocity spike", description: "Grants for one agent in `windowMinutes` above max(`minimum`, `medianFactor` × its 7-day median for such a window)",
  builtIn: true, inline: false, enabled: true, severity: "high", response: "alert", threshold: { windowMinutes: 5, minimum: 20, medianFactor: 10 },
  condition: null, alertChannels: [], evaluated: true, createdAt: null, updatedAt: null
}
const condition = { event: "token.issued", filter: { scopesAny: ["payments:write"] }, window: "1h", threshold: 100, groupBy: "agent" }
const custom = {
  ruleId: "many-payment-tokens", name: "Many payment tokens", description: "More than 100 payment tokens an hour for one agent", builtIn: false,
  inline: false, enabled: true, severity: "high", response: "alert", threshold: {}, condition, alertChannels: [], evaluated: true, createdAt: T, updatedAt: T
}
const settings = { mode: "monitor", allowList: ["203.0.113.0/24"], offHours: { start: "22:00", end: "06:00", days: [1, 2, 3, 4, 5], timeZone: "Europe/Paris" }, updatedAt: T }
const MODES = "Responses act only in `enforce` mode; `monitor` (the default) raises alerts and changes nothing; `off` detects nothing."

export const ANOMALIES_DOCS = {
  detect: {
    summary: "Run the windowed rules now",
    description: `Runs your windowed rules at once (the detection fiber runs them every \`ANOMALY_INTERVAL_SECONDS\`) and answers the alerts opened or counted again by this run; evidence already counted is not counted twice, and nothing is ever deleted (the published implementation deleted unacknowledged alerts). ${MODES} \`autoRevokedGrants\` counts grants an enforce-mode response revoked. 30 a minute.`,
    response: { detectedAt: T, total: 1, autoRevokedGrants: 0, anomalies: [{ ...legacy, ruleId: "AD-001", type: "AD-001" }] }
  },
  legacyList: {
    summary: "List anomalies (published shape)",
    description: "Alerts newest first in the published shape (`id`, `type`, `metadata`) beside the alert fields; `unacknowledged=true` lists open ones only. Page with `cursor` / `limit` (1–100).",
    response: { anomalies: [legacy], total: 1, nextCursor: null }
  },
  legacyAcknowledge: {
    summary: "Acknowledge an anomaly (published route)",
    description: "Moves an open alert to `acknowledged`; an acknowledged one answers unchanged; a resolved one 409 `CONFLICT` (alerts never move backwards).",
    response: { ...legacy, status: "acknowledged", acknowledgedAt: T }
  },
  alerts: {
    summary: "List alerts",
    description: "Alerts newest first, filtered by `status`, `severity`, `agentId`, `ruleId` and `since` (last seen at or after); `{ data, nextCursor }`, page with `cursor` / `limit` (1–100).",
    response: { data: [alert], nextCursor: null }
  },
  alert: { summary: "Read an alert", description: "One alert by its `anm_` id; 404 for another developer's.", response: alert },
  acknowledge: {
    summary: "Acknowledge an alert",
    description: "open → acknowledged, with an optional `note`. Further triggers still count `occurrences` on an acknowledged alert. Acknowledging a resolved alert answers 409 `CONFLICT`.",
    request: { note: "Looking into it" },
    response: { ...alert, status: "acknowledged", acknowledgedAt: T, note: "Looking into it" }
  },
  resolve: {
    summary: "Resolve an alert",
    description: "open or acknowledged → resolved, with an optional `note`. A later trigger of the same rule for the same subject opens a new alert.",
    request: { note: "Agent key rotated" },
    response: { ...alert, status: "resolved", resolvedAt: T, note: "Agent key rotated" }
  },
  metrics: {
    summary: "Alert counts",
    description: "Alerts last seen within `window` (`1h`, `6h`, `24h`; default 24h), optionally for one `agentId`, by status and by severity.",
    response: { window: "24h", total: 3, byStatus: { open: 2, acknowledged: 0, resolved: 1 }, bySeverity: { critical: 1, high: 2, medium: 0, low: 0 } }
  },
  rules: {
    summary: "List rules",
    description: "The twelve built-in rules `AD-001`…`AD-012`, the published protocol's four (`rate_spike`, `high_failure_rate`, `new_principal`, `off_hours_activity`), each with your overrides, then your custom rules. `inline` rules fire on the request that shows them; the others run in the detection pass.",
    response: { rules: [builtIn, custom] }
  },
  createRule: {
    summary: "Create a custom rule",
    description: "A rule counted by the detection pass: `condition` is `{ event: token.issued|authorize.requested|vault.exchanged|audit.logged|token.verified, filter?: { agentId, scopesAny, status }, window: 1m|5m|15m|1h|24h, threshold (≥ 1), groupBy: agent|principal|ip }`; any other key answers 400. `scopesAny` applies to token.issued and authorize.requested, `status` to audit.logged. Rules on `token.verified` or grouped by `ip` are kept but not counted (`evaluated: false`): nothing durable records those. `alertChannels` (channel ids) choose where its alerts go. At most 50 custom rules (409 `CONFLICT`); a taken `ruleId` answers 409.",
    request: { ruleId: "many-payment-tokens", name: "Many payment tokens", description: "More than 100 payment tokens an hour for one agent", condition, severity: "high" },
    response: custom
  },
  updateRule: {
    summary: "Change a rule",
    description: `Built-in rules too: \`enabled\`, \`severity\`, \`response\` (\`alert\`, \`suspend_agent\`, \`revoke_grants\`) and \`threshold\` (the rule's own named figures only; others answer 400); custom rules also \`name\`, \`description\`, \`condition\`. ${MODES}`,
    request: { response: "revoke_grants", threshold: { minimum: 50 } },
    response: { ...builtIn, response: "revoke_grants", threshold: { windowMinutes: 5, minimum: 50, medianFactor: 10 }, updatedAt: T }
  },
  deleteRule: {
    summary: "Delete a custom rule",
    description: "Removes a custom rule (its alerts stay). Built-in rules cannot be deleted (409 `CONFLICT`): disable them instead."
  },
  settings: { summary: "Read anomaly settings", description: `Mode, allow-list and off-hours window. ${MODES}`, response: settings },
  updateSettings: {
    summary: "Change anomaly settings",
    description: `The fields sent replace their values: \`mode\` (\`off\`, \`monitor\`, \`enforce\`), \`allowList\` (up to 100 IPs or CIDRs; a request from one of them triggers no rule), \`offHours\` (\`start\` and \`end\` as HH:MM, may cross midnight; \`days\` 1 Monday … 7 Sunday, default all; \`timeZone\` IANA, default UTC), or null to turn AD-004 off. ${MODES}`,
    request: { mode: "enforce", allowList: ["203.0.113.0/24"], offHours: { start: "22:00", end: "06:00", days: [1, 2, 3, 4, 5], timeZone: "Europe/Paris" } },
    response: { ...settings, mode: "enforce" }
  }
} satisfies Record<string, OperationDoc>
