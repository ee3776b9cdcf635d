/** Console pages (decisions §23): audit log, webhooks, policies. */
import { Effect } from "effect"
import { button, card, code, escape, field, form, json, live, select, table, when } from "./Layout.ts"
import { EVENT_TYPES } from "../platform/Events.ts"
import { type ConsolePage, type Ctx, failed, list, outcome, problem, qs, read } from "./Page.ts"

export const audit: ConsolePage = {
  title: "Audit log",
  render: (ctx) =>
    Effect.gen(function*() {
      const filters = { agentId: ctx.query.get("agentId"), principalId: ctx.query.get("principalId"), action: ctx.query.get("action"), grantId: ctx.query.get("grantId") }
      const verify = ctx.query.get("verify") === "1"
        ? yield* Effect.map(ctx.api("GET", "/v1/audit/verify"), (a) =>
          card("Chain verification", failed(a) ? problem(a) : a.body.valid
            ? `<p class="ok" role="status"><strong>Chain intact</strong>: ${escape(a.body.checkedEntries)} entries checked.</p>`
            : `<p class="bad" role="status"><strong>Chain broken</strong> at ${code(a.body.firstBrokenAt)} (${escape(a.body.checkedEntries)} entries checked).</p>`))
        : ""
      const entryId = ctx.query.get("entry")
      const detail = entryId ? yield* Effect.map(ctx.api("GET", `/v1/audit/${encodeURIComponent(entryId)}`), (a) => card(`Entry ${entryId}`, failed(a) ? problem(a) : json(a.body))) : ""
      const verifyForm = `<form method="get" action="/console/audit" class="inline"><input type="hidden" name="verify" value="1"><button type="submit">Verify the chain</button></form>`
      const filterForm = `<form method="get" action="/console/audit" class="stack">
${field("agentId", "Agent id", { value: filters.agentId ?? "" })}${field("principalId", "Principal", { value: filters.principalId ?? "" })}
${field("action", "Action", { value: filters.action ?? "" })}<button type="submit" class="secondary">Filter</button></form>`
      const entries = yield* read(ctx, `/v1/audit/entries${qs({ ...filters, limit: "50", cursor: ctx.query.get("cursor") })}`, (b) =>
        table("Audit entries", ["Entry", "Action", "Status", "Agent", "Principal", "When"], b.entries.map((e: any) => [
          `<a href="/console/audit${qs({ ...filters, entry: e.entryId })}">${code(e.entryId)}</a>`,
          escape(e.action), escape(e.status), e.agentId ? code(e.agentId) : "", escape(e.principalId ?? ""), when(e.timestamp)
        ])) + (b.nextCursor ? `<p><a href="/console/audit${qs({ ...filters, cursor: b.nextCursor })}">Older entries</a></p>` : ""))
      return verify + detail + card("Integrity", `<p>Recompute every entry's hash and link.</p>${verifyForm}`) + card("Entries", filterForm + entries)
    }),
  actions: {}
}

const webhookRow = (ctx: Ctx) => (w: any) => [
  `<a href="/console/webhooks${qs({ webhook: w.id })}">${code(w.id)}</a><br>${code(w.url)}`,
  escape(w.events.join(", ")),
  w.enabled ? `<span class="badge ok">enabled</span>` : `<span class="badge bad">paused</span>`,
  button(ctx.frame, "test", { webhookId: w.id }, "Send test") +
  (w.enabled ? button(ctx.frame, "pause", { webhookId: w.id }, "Pause") : button(ctx.frame, "resume", { webhookId: w.id }, "Resume")) +
  button(ctx.frame, "rotate", { webhookId: w.id }, "Rotate secret") +
  button(ctx.frame, "remove", { webhookId: w.id }, "Delete", "danger")
]

const deliveriesOf = (ctx: Ctx, webhookId: string) =>
  Effect.gen(function*() {
    const status = ctx.query.get("status")
    const a = yield* ctx.api("GET", `/v1/webhooks/${encodeURIComponent(webhookId)}/deliveries${qs({ status, limit: "50", cursor: ctx.query.get("cursor") })}`)
    if (failed(a)) return card("Deliveries", problem(a))
    const eventId = ctx.query.get("event")
    const body = eventId
      ? yield* Effect.map(ctx.api("GET", `/v1/events/${encodeURIComponent(eventId)}`), (e) => card(`Body of ${eventId}`, failed(e) ? problem(e) : json(e.body)))
      : ""
    const filter = `<form method="get" action="/console/webhooks" class="inline"><input type="hidden" name="webhook" value="${escape(webhookId)}">
${select("status", "Status", ["", "pending", "held", "delivered", "failed"], status ?? "")}<button type="submit" class="secondary">Filter</button></form>`
    const rows = a.body.deliveries.map((d: any) => [
      code(d.id),
      `<a href="/console/webhooks${qs({ webhook: webhookId, event: d.eventId })}">${escape(d.eventType)}</a>`,
      `<span class="badge ${d.status === "delivered" ? "ok" : d.status === "failed" ? "bad" : ""}">${escape(d.status)}</span>`,
      `${escape(d.attempts)} / ${escape(d.maxAttempts)}`,
      `${d.lastResponseStatus === null ? "" : escape(d.lastResponseStatus)} ${escape(d.lastError ?? "")}`,
      when(d.nextAttemptAt),
      when(d.createdAt),
      d.status === "failed" ? button(ctx.frame, "retry", { webhookId, deliveryId: d.id }, "Retry") : ""
    ])
    const replay = form(ctx.frame, "replay",
      `<input type="hidden" name="webhookId" value="${escape(webhookId)}">` +
      field("since", "Since", { required: true, hint: "ISO 8601 date or time" }) + field("until", "Until", { hint: "default now" }) +
      select("status", "Deliveries that", ["failed", "delivered"]),
      "Replay range")
    const src = `/console/webhooks${qs({ webhook: webhookId, status, cursor: ctx.query.get("cursor") })}`
    return body + card(`Deliveries of ${webhookId}`, filter + live("deliveries", EVENT_TYPES, src, table("Deliveries", ["Delivery", "Event (body)", "Status", "Attempts", "Last answer", "Next attempt", "Created", ""], rows) +
      (a.body.nextCursor ? `<p><a href="/console/webhooks${qs({ webhook: webhookId, status, cursor: a.body.nextCursor })}">Older deliveries</a></p>` : ""))) +
      (replay === "" ? "" : card("Replay deliveries", replay))
  })

const webhookAction = (method: string, suffix: string, body: (f: Record<string, string>) => unknown, says: (b: any, f: Record<string, string>) => string) =>
  (ctx: Ctx, f: Record<string, string>) =>
    Effect.map(ctx.api(method, `/v1/webhooks/${encodeURIComponent(f.webhookId ?? "")}${suffix}`, body(f)), (a) => outcome(a, (b) => says(b, f)))

export const webhooks: ConsolePage = {
  title: "Webhooks",
  render: (ctx) =>
    Effect.gen(function*() {
      const endpoints = yield* read(ctx, "/v1/webhooks", (b) => table("Webhook endpoints", ["Endpoint", "Events", "State", ""], b.webhooks.map(webhookRow(ctx))))
      const webhookId = ctx.query.get("webhook")
      const deliveries = webhookId ? yield* deliveriesOf(ctx, webhookId) : ""
      const create = form(ctx.frame, "create",
        field("url", "URL", { required: true, type: "url" }) + field("events", "Events", { required: true, hint: "comma-separated, e.g. grant.created, grant.revoked" }),
        "Add endpoint")
      return card("Endpoints", endpoints) + deliveries + (create === "" ? "" : card("Add an endpoint", create))
    }),
  actions: {
    create: (ctx, f) =>
      Effect.map(ctx.api("POST", "/v1/webhooks", { url: f.url, events: list(f.events) }), (a) =>
        outcome(a, (b) => `<p class="ok">Endpoint ${code(b.id)} added. Its signing secret, shown once:</p><p>${code(b.secret)}</p>`)),
    test: webhookAction("POST", "/test", () => ({}), (b) =>
      b.ok ? `<p class="ok">Test ${escape(b.eventType)} delivered (HTTP ${escape(b.responseStatus)}).</p>` : `<p class="bad">Test ${escape(b.eventType)} failed: ${escape(b.error ?? `HTTP ${b.responseStatus}`)}</p>`),
    pause: webhookAction("PATCH", "", () => ({ enabled: false }), (b) => `<p class="ok">Endpoint ${code(b.id)} paused: new deliveries are held.</p>`),
    resume: webhookAction("PATCH", "", () => ({ enabled: true }), (b) => `<p class="ok">Endpoint ${code(b.id)} resumed: held deliveries are sent in order.</p>`),
    rotate: webhookAction("POST", "/rotate-secret", () => ({}), (b) =>
      `<p class="ok">New secret (shown once): ${code(b.secret)}</p><p class="muted">The old one stays valid until ${when(b.previousSecretExpiresAt)}.</p>`),
    remove: webhookAction("DELETE", "", () => undefined, (_, f) => `<p class="ok">Endpoint ${code(f.webhookId)} deleted.</p>`),
    retry: (ctx, f) =>
      Effect.map(ctx.api("POST", `/v1/webhooks/${encodeURIComponent(f.webhookId ?? "")}/deliveries/${encodeURIComponent(f.deliveryId ?? "")}/retry`, {}), (a) =>
        outcome(a, (b) => `<p class="ok">Delivery ${code(b.id)} re-queued.</p>`)),
    replay: webhookAction("POST", "/replay", (f) => ({ since: f.since, ...(f.until ? { until: f.until } : {}), status: f.status || "failed" }), (b) =>
      `<p class="ok">${escape(b.requeued)} deliveries re-queued${b.nextSince ? `; continue from ${when(b.nextSince)}` : ""}.</p>`)
  }
}

const ruleRow = (ctx: Ctx) => (p: any) => [
  `<strong>${escape(p.name)}</strong><br>${code(p.id ?? p.policyId)}`,
  `<span class="badge ${p.effect === "deny" ? "bad" : "ok"}">${escape(p.effect)}</span>`,
  escape((p.actions ?? []).join(", ")),
  escape((p.scopes ?? []).join(", ")),
  [p.agentId && `agent ${code(p.agentId)}`, p.principalId && `principal ${escape(p.principalId)}`,
    p.timeOfDayStart && `${escape(p.timeOfDayStart)}–${escape(p.timeOfDayEnd)} ${escape(p.timeZone ?? "")}`].filter(Boolean).join("<br>"),
  button(ctx.frame, "removeRule", { policyId: p.id ?? p.policyId }, "Delete", "danger")
]

const ACTIONS = ["authorize", "delegate", "bundle.create", "token.refresh", "vault.exchange"]

export const policies: ConsolePage = {
  title: "Policies",
  render: (ctx) =>
    Effect.gen(function*() {
      const rules = yield* read(ctx, "/v1/policies?limit=100", (b) => table("Policy rules", ["Rule", "Effect", "Actions", "Scopes", "Conditions", ""], b.policies.map(ruleRow(ctx))))
      const sets = yield* read(ctx, "/v1/policies/bundles?limit=20", (b) => table("Cedar policy sets", ["Set", "Version", "Active", "Uploaded", ""], b.bundles.map((s: any) => [
        code(s.id ?? s.bundleId), escape(s.version), s.active ? `<span class="badge ok">active</span>` : "", when(s.createdAt),
        s.active ? "" : button(ctx.frame, "activate", { bundleId: s.id ?? s.bundleId }, "Activate")
      ])))
      const dryRun = form(ctx.frame, "evaluate",
        // after a dry run the form keeps what was asked, to try the next variation
        select("action", "Action", ACTIONS, ctx.query.get("action") ?? undefined) +
        field("agentId", "Agent id", { required: true, value: ctx.query.get("agentId") ?? "" }) +
        field("principalId", "Principal", { required: true, value: ctx.query.get("principalId") ?? "" }) +
        field("scopes", "Scopes", { hint: "comma-separated", value: ctx.query.get("scopes") ?? "" }) +
        field("at", "At", { hint: "ISO 8601; default now", value: ctx.query.get("at") ?? "" }),
        "Evaluate")
      const create = form(ctx.frame, "createRule",
        field("name", "Name", { required: true }) + select("effect", "Effect", ["deny", "allow"]) + field("scopes", "Scopes", { hint: "comma-separated; empty means any" }) +
        field("actions", "Actions", { hint: `comma-separated of ${ACTIONS.join(", ")}; default authorize` }) +
        field("agentId", "Agent id", { hint: "empty means any" }) + field("principalId", "Principal", { hint: "empty means any" }),
        "Create rule")
      const upload = form(ctx.frame, "sync",
        field("version", "Version label", { required: true }) + field("content", "Cedar policies", { textarea: true, required: true, placeholder: 'forbid(principal, action, resource) when { context.scopes.contains("email:send") };' }),
        "Upload and activate")
      return (dryRun === "" ? "" : card("Dry run", `<p>What your rules and active Cedar set would decide, with no side effect.</p>${dryRun}`)) + card("Rules", rules) +
        (create === "" ? "" : card("New rule", create)) + card("Cedar policy sets", sets) + (upload === "" ? "" : card("Upload a Cedar set", upload))
    }),
  actions: {
    evaluate: (ctx, f) =>
      Effect.map(ctx.api("POST", "/v1/policies/evaluate", {
        action: f.action || "authorize", agentId: f.agentId, principalId: f.principalId, scopes: list(f.scopes), ...(f.at ? { at: f.at } : {})
      }), (a) => outcome(a, (b) => `<p role="status"><strong>Decision: ${b.effect === null ? "no opinion (the normal consent step)" : escape(b.effect)}</strong>${b.policyId ? ` by ${code(b.policyId)}` : ""}</p>
${b.determiningPolicies.length > 0 ? `<p>Matched: ${b.determiningPolicies.map((p: string) => code(p)).join(" ")}</p>` : ""}
${b.errors.length > 0 ? `<p class="bad">Evaluation errors:</p>${json(b.errors)}` : `<p class="muted">No evaluation errors.</p>`}`)),
    createRule: (ctx, f) => {
      const body: Record<string, unknown> = { name: f.name, effect: f.effect }
      if (list(f.scopes).length > 0) body.scopes = list(f.scopes)
      if (list(f.actions).length > 0) body.actions = list(f.actions)
      if (f.agentId) body.agentId = f.agentId
      if (f.principalId) body.principalId = f.principalId
      return Effect.map(ctx.api("POST", "/v1/policies", body), (a) => outcome(a, (b) => `<p class="ok">Rule ${code(b.id ?? b.policyId)} created.</p>`))
    },
    removeRule: (ctx, f) =>
      Effect.map(ctx.api("DELETE", `/v1/policies/${encodeURIComponent(f.policyId ?? "")}`), (a) => outcome(a, () => `<p class="ok">Rule ${code(f.policyId)} deleted.</p>`)),
    sync: (ctx, f) =>
      Effect.map(ctx.api("POST", "/v1/policies/sync", { format: "cedar", version: f.version, content: Buffer.from(f.content ?? "", "utf8").toString("base64"), activate: true }), (a) =>
        outcome(a, (b) => `<p class="ok">Cedar set ${code(b.id ?? b.bundleId)} (${escape(b.fileCount)} file) stored${b.activated ? " and active" : ""}.</p>`)),
    activate: (ctx, f) =>
      Effect.map(ctx.api("POST", `/v1/policies/bundles/${encodeURIComponent(f.bundleId ?? "")}/activate`, {}), (a) => outcome(a, () => `<p class="ok">Set ${code(f.bundleId)} is now active.</p>`))
  }
}
