/** Console pages (decisions §23): overview, agents, consent requests and grants. */
import { Effect } from "effect"
import { button, card, code, escape, field, form, live, select, table, when } from "./Layout.ts"
import { type ConsolePage, type Ctx, failed, list, outcome, problem, qs, read } from "./Page.ts"

const usageRows = (usage: Record<string, { used: number; limit: number | null; pct: number | null }>) =>
  Object.entries(usage)
    .filter(([name]) => !name.includes("_"))
    .map(([name, u]) => [escape(name), escape(u.used), u.limit === null ? `<span class="muted">no limit</span>` : escape(u.limit), u.pct === null ? "" : `${escape(u.pct)} %`])

export const overview: ConsolePage = {
  title: "Overview",
  render: (ctx) =>
    Effect.gen(function*() {
      const [ent, alerts, summary, hooks] = yield* Effect.all([
        ctx.api("GET", "/v1/billing/entitlements"),
        ctx.api("GET", "/v1/anomaly/alerts?status=open&limit=5"),
        ctx.api("GET", "/v1/compliance/summary"),
        ctx.api("GET", "/v1/webhooks")
      ])
      const webhooks: Array<any> = failed(hooks) ? [] : hooks.body.webhooks.slice(0, 10)
      const failures = yield* Effect.forEach(webhooks, (w) =>
        Effect.map(ctx.api("GET", `/v1/webhooks/${w.id}/deliveries?status=failed&limit=100`), (a) => [w, failed(a) ? 0 : a.body.deliveries.length] as const))
      const s = failed(summary) ? undefined : summary.body
      const stats = `<div class="grid">
${card("Plan", failed(ent) ? problem(ent) : `<p class="stat">${escape(ent.body.plan)}</p><p class="muted"><a href="/console/billing">Billing</a></p>`)}
${card("Open alerts", failed(alerts) ? problem(alerts) : `<p class="stat">${escape(s?.anomalies?.open ?? alerts.body.data.length)}</p><p class="muted"><a href="/console/anomalies">Anomalies</a></p>`)}
${card("Breaches", s === undefined ? problem(summary) : `<p class="stat">${escape(s.breaches.open)} open</p><p class="${s.breaches.overdue > 0 ? "bad" : "muted"}">${escape(s.breaches.overdue)} overdue · <a href="/console/breaches">Breaches</a></p>`)}
${card("Webhook failures", `<p class="stat">${failures.reduce((n, [, c]) => n + c, 0)}</p><p class="muted">failed deliveries · <a href="/console/webhooks">Webhooks</a></p>`)}
</div>`
      const usage = failed(ent) ? problem(ent) : table("Usage against quotas", ["Quota", "Used", "Limit", "Used %"], usageRows(ent.body.usage))
      const recent = failed(alerts) ? "" : table("Open alerts", ["Alert", "Severity", "Rule", "Last seen"],
        alerts.body.data.map((a: any) => [code(a.id ?? a.alertId), escape(a.severity), escape(a.ruleId), when(a.lastSeenAt ?? a.createdAt)]))
      const counts = s === undefined ? "" : card("Your account", `<p>${escape(s.agents.total)} agents (${escape(s.agents.active)} active) · ${escape(s.grants.active)} active grants · ${escape(s.auditEntries.total)} audit entries · ${escape(s.policies.total)} policies</p>`)
      return live("overview", ["anomaly.detected", "grant.created", "grant.revoked", "dpdp.breach.recorded"], "/console/overview",
        `${stats}${counts}${card("Usage against quotas", usage)}${card("Open alerts", recent)}`)
    }),
  actions: {}
}

const agentRow = (ctx: Ctx) => (a: any) => [
  `<strong>${escape(a.name)}</strong><br>${code(a.agentId)}`,
  `<span class="badge ${a.status === "active" ? "ok" : "bad"}">${escape(a.status)}</span>`,
  escape(a.scopes.join(", ")),
  a.redirectUris.map((u: string) => code(u)).join("<br>"),
  a.status === "active"
    ? button(ctx.frame, "suspend", { agentId: a.agentId }, "Suspend", "danger")
    : button(ctx.frame, "activate", { agentId: a.agentId }, "Reactivate")
]

export const agents: ConsolePage = {
  title: "Agents",
  render: (ctx) =>
    Effect.gen(function*() {
      const listed = yield* read(ctx, `/v1/agents${qs({ cursor: ctx.query.get("cursor"), limit: "50" })}`, (b) =>
        table("Agents", ["Agent", "Status", "Scopes", "Redirect URIs", ""], b.agents.map(agentRow(ctx))) +
        (b.nextCursor ? `<p><a href="/console/agents${qs({ cursor: b.nextCursor })}">Next page</a></p>` : ""))
      const create = form(ctx.frame, "create",
        field("name", "Name", { required: true }) +
        field("description", "Description") +
        field("scopes", "Scopes", { required: true, hint: "comma-separated, e.g. email:read, calendar:read" }) +
        field("redirectUris", "Redirect URIs", { textarea: true, hint: "one per line (https, or http to a loopback host)" }),
        "Create agent")
      const redirects = form(ctx.frame, "redirects",
        field("agentId", "Agent id", { required: true }) + field("redirectUris", "Redirect URIs", { textarea: true, hint: "one per line; replaces the list" }),
        "Save redirect URIs")
      return card("Your agents", listed) + (create === "" ? "" : card("Register an agent", create) + card("Redirect URIs", redirects))
    }),
  actions: {
    create: (ctx, f) =>
      Effect.map(ctx.api("POST", "/v1/agents", {
        name: f.name, ...(f.description ? { description: f.description } : {}), scopes: list(f.scopes), redirectUris: list(f.redirectUris)
      }), (a) => outcome(a, (b) => `<p class="ok">Agent <strong>${escape(b.name)}</strong> created: ${code(b.agentId)}</p><p>DID ${code(b.did)}</p>`)),
    suspend: (ctx, f) =>
      Effect.map(ctx.api("PATCH", `/v1/agents/${encodeURIComponent(f.agentId ?? "")}`, { status: "suspended" }), (a) =>
        outcome(a, (b) => `<p class="ok">Agent ${code(b.agentId)} suspended.</p>`)),
    activate: (ctx, f) =>
      Effect.map(ctx.api("PATCH", `/v1/agents/${encodeURIComponent(f.agentId ?? "")}`, { status: "active" }), (a) =>
        outcome(a, (b) => `<p class="ok">Agent ${code(b.agentId)} is active again.</p>`)),
    redirects: (ctx, f) =>
      Effect.map(ctx.api("PATCH", `/v1/agents/${encodeURIComponent(f.agentId ?? "")}`, { redirectUris: list(f.redirectUris) }), (a) =>
        outcome(a, (b) => `<p class="ok">Redirect URIs of ${code(b.agentId)} saved.</p>`))
  }
}

/** a pending request with its approve and deny buttons */
const requestCard = (ctx: Ctx, id: string, r: any) =>
  card(`Consent request ${id}`, `<p><strong>${escape(r.agentName)}</strong> asks for ${r.scopes.map((s: string) => code(s)).join(" ")}</p>
<ul>${Object.entries(r.scopeDescriptions ?? {}).map(([s, d]) => `<li>${code(s)} ${escape(d)}</li>`).join("")}</ul>
<p class="muted">Status ${escape(r.status)} · expires ${when(r.expiresAt)}</p>
${r.status === "pending"
    ? button(ctx.frame, "approve", { requestId: id }, "Approve", "") + button(ctx.frame, "deny", { requestId: id }, "Deny", "danger")
    : ""}`)

const grantRow = (ctx: Ctx) => (g: any) => [
  code(g.grantId),
  code(g.agentId),
  escape(g.principalId),
  escape(g.scopes.join(", ")),
  `<span class="badge ${g.status === "active" ? "ok" : ""}">${escape(g.status)}</span>${g.parentGrantId ? `<br><span class="muted">delegated from</span> ${code(g.parentGrantId)}` : ""}`,
  escape(g.approvalMethod),
  when(g.expiresAt),
  g.status === "active" ? button(ctx.frame, "revoke", { grantId: g.grantId }, "Revoke", "danger") : ""
]

export const consent: ConsolePage = {
  title: "Consent requests and grants",
  render: (ctx) =>
    Effect.gen(function*() {
      const requestId = ctx.query.get("request")
      const lookup = requestId
        ? yield* Effect.map(ctx.api("GET", `/v1/consent/${encodeURIComponent(requestId)}`), (a) => failed(a) ? card("Consent request", problem(a)) : requestCard(ctx, requestId, a.body))
        : ""
      const agentsList = yield* ctx.api("GET", "/v1/agents?limit=100")
      const agentIds: Array<readonly [string, string]> = failed(agentsList)
        ? []
        : agentsList.body.agents.filter((a: any) => a.status === "active").map((a: any) => [a.agentId, `${a.name} (${a.agentId})`] as const)
      const start = form(ctx.frame, "authorize",
        (agentIds.length > 0 ? select("agentId", "Agent", agentIds) : field("agentId", "Agent id", { required: true })) +
        field("principalId", "Principal (your id for the person)", { required: true }) +
        field("scopes", "Scopes", { required: true, hint: "comma-separated" }),
        "Start consent request")
      const find = `<form method="get" action="/console/consent" class="stack">${field("request", "Request id", { value: requestId ?? "", placeholder: "areq_…" })}<button type="submit" class="secondary">Open request</button></form>`
      const filters = { principalId: ctx.query.get("principalId"), agentId: ctx.query.get("agentId"), status: ctx.query.get("status") }
      const filterForm = `<form method="get" action="/console/consent" class="stack">
${field("principalId", "Principal", { value: filters.principalId ?? "" })}${field("agentId", "Agent id", { value: filters.agentId ?? "" })}
${select("status", "Status", ["", "active", "revoked", "expired"], filters.status ?? "")}<button type="submit" class="secondary">Filter grants</button></form>`
      const grants = yield* read(ctx, `/v1/grants${qs({ ...filters, limit: "50", cursor: ctx.query.get("cursor") })}`, (b) =>
        table("Grants", ["Grant", "Agent", "Principal", "Scopes", "Status", "Approved by", "Expires", ""], b.grants.map(grantRow(ctx))) +
        (b.nextCursor ? `<p><a href="/console/consent${qs({ ...filters, cursor: b.nextCursor })}">Next page</a></p>` : ""))
      const src = `/console/consent${qs({ ...filters, cursor: ctx.query.get("cursor") })}`
      return lookup + (start === "" ? "" : card("Ask a person for consent", start)) + card("Find a request", find) +
        card("Grants", filterForm + live("grants", ["grant.created", "grant.revoked"], src, grants))
    }),
  actions: {
    authorize: (ctx, f) =>
      Effect.gen(function*() {
        const a = yield* ctx.api("POST", "/v1/authorize", { agentId: f.agentId, principalId: f.principalId, scopes: list(f.scopes) })
        if (failed(a)) return { ok: false, html: problem(a) }
        if (a.body.sandbox) return { ok: true, html: `<p class="ok">Sandbox: approved at once; code ${code(a.body.code)}</p>` }
        const id = a.body.authRequestId
        const r = yield* ctx.api("GET", `/v1/consent/${encodeURIComponent(id)}`)
        return {
          ok: true,
          html: `<p class="ok">Consent request ${code(id)} created. Send the person to <a href="${escape(a.body.consentUrl)}">the consent page</a>, or approve it here.</p>` +
            (failed(r) ? problem(r) : requestCard(ctx, id, r.body))
        }
      }),
    approve: (ctx, f) =>
      Effect.map(ctx.api("POST", `/v1/consent/${encodeURIComponent(f.requestId ?? "")}/approve`, {}), (a) =>
        outcome(a, () => `<p class="ok">Request ${code(f.requestId)} approved: the grant is below.</p>`)),
    deny: (ctx, f) =>
      Effect.map(ctx.api("POST", `/v1/consent/${encodeURIComponent(f.requestId ?? "")}/deny`, {}), (a) =>
        outcome(a, () => `<p class="ok">Request ${code(f.requestId)} denied.</p>`)),
    revoke: (ctx, f) =>
      Effect.map(ctx.api("DELETE", `/v1/grants/${encodeURIComponent(f.grantId ?? "")}`), (a) =>
        outcome(a, () => `<p class="ok">Grant ${code(f.grantId)} revoked, with every grant delegated from it (their tokens stop verifying now).</p>`))
  }
}
