/** Console pages (decisions §23): anomalies, keys, directory, SSO. */
import { Effect } from "effect"
import { button, card, code, escape, field, form, live, select, table, when } from "./Layout.ts"
import { type ConsolePage, type Ctx, list, outcome, qs, read } from "./Page.ts"

/** a cell for any value: dates as times, lists joined, objects as compact JSON */
export const cell = (value: unknown): string => {
  if (value === null || value === undefined) return `<span class="muted">—</span>`
  if (typeof value === "string" && /^\d{4}-\d\d-\d\dT/.test(value)) return when(value)
  if (Array.isArray(value)) return escape(value.map((v) => typeof v === "object" ? JSON.stringify(v) : String(v)).join(", "))
  if (typeof value === "object") return `<code>${escape(JSON.stringify(value))}</code>`
  return escape(value)
}

/** a table of chosen fields of each row, with an optional last column of buttons */
export const rowsOf = (caption: string, rows: ReadonlyArray<any>, fields: ReadonlyArray<readonly [string, string]>, actions?: (row: any) => string) =>
  table(caption, [...fields.map(([, label]) => label), ...(actions ? [""] : [])], rows.map((r) => [
    ...fields.map(([key]) => cell(r[key])),
    ...(actions ? [actions(r)] : [])
  ]))

const alertActions = (ctx: Ctx) => (a: any) =>
  (a.status === "open" ? button(ctx.frame, "acknowledge", { alertId: a.alertId }, "Acknowledge") : "") +
  (a.status !== "resolved" ? button(ctx.frame, "resolve", { alertId: a.alertId }, "Resolve") : "")

export const anomalies: ConsolePage = {
  title: "Anomalies",
  render: (ctx) =>
    Effect.gen(function*() {
      const status = ctx.query.get("status") ?? "open"
      const filter = `<form method="get" action="/console/anomalies" class="inline">${select("status", "Status", ["open", "acknowledged", "resolved"], status)}<button type="submit" class="secondary">Show</button></form>`
      const alerts = yield* read(ctx, `/v1/anomaly/alerts${qs({ status, limit: "50" })}`, (b) =>
        rowsOf("Alerts", b.data, [["alertId", "Alert"], ["ruleName", "Rule"], ["severity", "Severity"], ["status", "Status"], ["description", "What"], ["occurrences", "Times"], ["lastSeenAt", "Last seen"]], alertActions(ctx)))
      const rules = yield* read(ctx, "/v1/anomaly/rules", (b) =>
        rowsOf("Detection rules", b.rules, [["ruleId", "Rule"], ["name", "Name"], ["severity", "Severity"], ["response", "Response"], ["enabled", "Enabled"], ["threshold", "Threshold"]], (r) =>
          r.enabled ? button(ctx.frame, "disableRule", { ruleId: r.ruleId }, "Disable") : button(ctx.frame, "enableRule", { ruleId: r.ruleId }, "Enable")))
      const channels = yield* read(ctx, "/v1/anomaly/channels", (b) =>
        rowsOf("Alert channels", b.channels, [["id", "Channel"], ["name", "Name"], ["type", "Type"], ["url", "URL"], ["severities", "Severities"], ["createdAt", "Created"]], (c) =>
          button(ctx.frame, "removeChannel", { channelId: c.id }, "Delete", "danger")))
      const addChannel = form(ctx.frame, "createChannel",
        select("type", "Type", ["webhook", "slack"]) + field("url", "URL", { required: true, type: "url" }) + field("name", "Name") +
        field("severities", "Severities", { hint: "comma-separated of low, medium, high, critical; empty for all" }),
        "Add channel")
      return card("Alerts", filter + live("alerts", ["anomaly.detected", "anomaly.auto_revoked"], `/console/anomalies${qs({ status })}`, alerts)) + card("Rules", rules) +
        card("Channels", channels) + (addChannel === "" ? "" : card("New alert channel", addChannel))
    }),
  actions: {
    acknowledge: (ctx, f) =>
      Effect.map(ctx.api("POST", `/v1/anomaly/alerts/${encodeURIComponent(f.alertId ?? "")}/acknowledge`, {}), (a) => outcome(a, () => `<p class="ok">Alert ${code(f.alertId)} acknowledged.</p>`)),
    resolve: (ctx, f) =>
      Effect.map(ctx.api("POST", `/v1/anomaly/alerts/${encodeURIComponent(f.alertId ?? "")}/resolve`, {}), (a) => outcome(a, () => `<p class="ok">Alert ${code(f.alertId)} resolved.</p>`)),
    createChannel: (ctx, f) =>
      Effect.map(ctx.api("POST", "/v1/anomaly/channels", {
        type: f.type || "webhook", url: f.url, ...(f.name ? { name: f.name } : {}), ...(list(f.severities).length > 0 ? { severities: list(f.severities) } : {})
      }), (a) => outcome(a, (b) => `<p class="ok">Channel ${code(b.id)} added.${b.secret ? ` Its signing secret, shown once: ${code(b.secret)}` : ""}</p>`)),
    removeChannel: (ctx, f) =>
      Effect.map(ctx.api("DELETE", `/v1/anomaly/channels/${encodeURIComponent(f.channelId ?? "")}`), (a) => outcome(a, () => `<p class="ok">Channel ${code(f.channelId)} deleted.</p>`)),
    enableRule: (ctx, f) =>
      Effect.map(ctx.api("PATCH", `/v1/anomaly/rules/${encodeURIComponent(f.ruleId ?? "")}`, { enabled: true }), (a) => outcome(a, () => `<p class="ok">Rule ${code(f.ruleId)} enabled.</p>`)),
    disableRule: (ctx, f) =>
      Effect.map(ctx.api("PATCH", `/v1/anomaly/rules/${encodeURIComponent(f.ruleId ?? "")}`, { enabled: false }), (a) => outcome(a, () => `<p class="ok">Rule ${code(f.ruleId)} disabled.</p>`))
  }
}

export const keys: ConsolePage = {
  title: "API keys",
  render: (ctx) =>
    Effect.gen(function*() {
      const listed = yield* read(ctx, "/v1/keys", (b) =>
        rowsOf("API keys", b.keys, [["name", "Name"], ["id", "Key"], ["prefix", "Starts with"], ["scope", "Scope"], ["createdAt", "Created"], ["lastUsedAt", "Last used"]], (k) =>
          button(ctx.frame, "remove", { keyId: k.id }, "Delete", "danger")))
      const create = form(ctx.frame, "create", field("name", "Name", { required: true }) + select("scope", "Scope", ["full", "read"]), "Create key")
      return card("Your keys", `<p class="muted">Deleting the key this console signed in with ends this session.</p>${listed}`) + (create === "" ? "" : card("New key", create))
    }),
  actions: {
    create: (ctx, f) =>
      Effect.map(ctx.api("POST", "/v1/keys", { name: f.name, scope: f.scope || "full" }), (a) =>
        outcome(a, (b) => `<p class="ok">Key ${escape(b.name)} (${escape(b.scope)}) created. Copy it now, it is shown once:</p><p>${code(b.apiKey)}</p>`)),
    remove: (ctx, f) =>
      Effect.map(ctx.api("DELETE", `/v1/keys/${encodeURIComponent(f.keyId ?? "")}`), (a) => outcome(a, () => `<p class="ok">Key ${code(f.keyId)} deleted.</p>`))
  }
}

export const directory: ConsolePage = {
  title: "Directory",
  render: (ctx) =>
    Effect.gen(function*() {
      const settings = yield* read(ctx, "/v1/scim/settings", (b) => rowsOf("Directory settings", [b], Object.keys(b).map((k) => [k, k] as const)))
      const tokens = yield* read(ctx, "/v1/scim/tokens", (b) =>
        rowsOf("SCIM tokens", b.tokens, [["id", "Token"], ["label", "Label"], ["createdAt", "Created"], ["expiresAt", "Expires"], ["lastUsedAt", "Last used"]], (t) =>
          button(ctx.frame, "removeToken", { tokenId: t.id }, "Delete", "danger")))
      const create = form(ctx.frame, "createToken", field("label", "Label", { required: true }) + field("expiresIn", "Expires in", { hint: "e.g. 365d; empty for none" }), "Create SCIM token")
      return card("SCIM provisioning", `<p class="muted">Users and groups are provisioned by your identity provider at <code>/scim/v2</code> with a SCIM token.</p>${settings}`) +
        card("SCIM tokens", tokens) + (create === "" ? "" : card("New SCIM token", create))
    }),
  actions: {
    createToken: (ctx, f) =>
      Effect.map(ctx.api("POST", "/v1/scim/tokens", { label: f.label, ...(f.expiresIn ? { expiresIn: f.expiresIn } : {}) }), (a) =>
        outcome(a, (b) => `<p class="ok">SCIM token created. Copy it now, it is shown once:</p><p>${code(b.token)}</p>`)),
    removeToken: (ctx, f) =>
      Effect.map(ctx.api("DELETE", `/v1/scim/tokens/${encodeURIComponent(f.tokenId ?? "")}`), (a) => outcome(a, () => `<p class="ok">Token ${code(f.tokenId)} deleted.</p>`))
  }
}

export const sso: ConsolePage = {
  title: "SSO connections",
  render: (ctx) =>
    Effect.gen(function*() {
      const listed = yield* read(ctx, "/v1/sso/connections", (b) =>
        rowsOf("SSO connections", b.connections, [["id", "Connection"], ["name", "Name"], ["protocol", "Protocol"], ["status", "Status"], ["domains", "Domains"], ["createdAt", "Created"]], (c) =>
          button(ctx.frame, "test", { connectionId: c.id }, "Test")))
      return card("Connections", listed)
    }),
  actions: {
    test: (ctx, f) =>
      Effect.map(ctx.api("POST", `/v1/sso/connections/${encodeURIComponent(f.connectionId ?? "")}/test`, {}), (a) =>
        outcome(a, (b) => `<p class="${b.success ? "ok" : "bad"}"><strong>${b.success ? "Connection works" : "Connection failed"}</strong> (${escape(b.protocol)})</p>` +
          `<ul>${(b.checks ?? []).map((c: any) => `<li class="${c.ok ? "ok" : "bad"}">${escape(c.name)}: ${c.ok ? "ok" : "failed"} — ${escape(c.detail ?? "")}</li>`).join("")}</ul>`))
  }
}
