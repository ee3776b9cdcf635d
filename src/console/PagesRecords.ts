/** Console pages (decisions §23): vault metadata, breaches, compliance, billing, DPDP. */
import { Effect } from "effect"
import { card, code, escape, field, form, select } from "./Layout.ts"
import { type ConsolePage, list, outcome, read } from "./Page.ts"
import { rowsOf } from "./PagesAdmin.ts"

export const vault: ConsolePage = {
  title: "Vault",
  render: (ctx) =>
    Effect.map(read(ctx, "/v1/vault/credentials?limit=100", (b) =>
      rowsOf("Stored credentials", b.credentials, [["id", "Credential"], ["principalId", "Principal"], ["service", "Service"], ["credentialType", "Type"], ["hasRefreshToken", "Refreshable"], ["tokenExpiresAt", "Token expires"], ["metadata", "Metadata"], ["createdAt", "Stored"]])),
    (t) => card("Credentials (metadata only)", `<p class="muted">Secrets are never shown here or by the API's lists.</p>${t}`)),
  actions: {}
}

export const breaches: ConsolePage = {
  title: "Breaches",
  render: (ctx) =>
    Effect.gen(function*() {
      const listed = yield* read(ctx, "/v1/dpdp/breaches?limit=100", (b) =>
        rowsOf("Breaches", b.breaches, [["breachId", "Breach"], ["status", "Status"], ["nature", "Nature"], ["awareAt", "Aware at"], ["affectedCount", "Affected"],
          ["boardInitialIntimationSentAt", "Board told"], ["boardDetailedReportDueAt", "Board report due (72 h)"], ["boardDetailedReportOverdue", "Report overdue"]]))
      const record = form(ctx.frame, "record",
        field("description", "What happened", { required: true }) + field("nature", "Nature", { required: true }) + field("extent", "Extent", { required: true }) +
        field("occurredAt", "Occurred at", { hint: "ISO 8601" }) + field("location", "Location") +
        field("affectedDataPrincipalIds", "Affected principals", { textarea: true, hint: "ids, one per line (never shown in lists or events)" }),
        "Record breach")
      return card("Breach register", listed) + (record === "" ? "" : card("Record a breach", `<p class="muted">The Board's detailed report is due 72 hours after the time you became aware (now).</p>${record}`))
    }),
  actions: {
    record: (ctx, f) => {
      const body: Record<string, unknown> = { description: f.description, nature: f.nature, extent: f.extent }
      if (f.occurredAt) body.occurredAt = f.occurredAt
      if (f.location) body.location = f.location
      if (list(f.affectedDataPrincipalIds).length > 0) body.affectedDataPrincipalIds = list(f.affectedDataPrincipalIds)
      return Effect.map(ctx.api("POST", "/v1/dpdp/breaches", body), (a) =>
        outcome(a, (b) => `<p class="ok">Breach ${code(b.breachId)} recorded; the Board's detailed report is due ${escape(b.boardDetailedReportDueAt)}.</p>`))
    }
  }
}

export const compliance: ConsolePage = {
  title: "Compliance",
  render: (ctx) =>
    Effect.gen(function*() {
      const summary = yield* read(ctx, "/v1/compliance/summary", (b) =>
        rowsOf("Summary", Object.entries(b).filter(([, v]) => typeof v === "object" && v !== null).map(([k, v]) => ({ area: k, counts: v })), [["area", "Area"], ["counts", "Counts"]]))
      const create = form(ctx.frame, "createJob", select("kind", "Export", ["audit", "grants"]) + select("format", "Format", ["ndjson", "csv"]), "Start export job")
      return card("Summary", summary) + (create === "" ? "" : card("Exports", `<p class="muted">A job runs in the background; its download is signed.</p>${create}`))
    }),
  actions: {
    createJob: (ctx, f) =>
      Effect.map(ctx.api("POST", "/v1/compliance/exports", { kind: f.kind || "audit", format: f.format || "ndjson" }), (a) =>
        outcome(a, (b) => `<p class="ok">Export job ${code(b.id ?? b.exportId)} ${escape(b.status ?? "queued")}.</p>`))
  }
}

export const billing: ConsolePage = {
  title: "Billing",
  render: (ctx) =>
    Effect.gen(function*() {
      const sub = yield* read(ctx, "/v1/billing/subscription", (b) => rowsOf("Subscription", [b], [["plan", "Plan"], ["status", "Status"], ["currentPeriodStart", "Period start"], ["currentPeriodEnd", "Period end"], ["cancelAtPeriodEnd", "Cancels at end"]]))
      const invoices = yield* read(ctx, "/v1/billing/invoices?limit=24", (b) => rowsOf("Invoices", b.invoices, [["id", "Invoice"], ["plan", "Plan"], ["periodStart", "From"], ["periodEnd", "To"], ["status", "Status"], ["total", "Total"], ["currency", "Currency"], ["issuedAt", "Issued"], ["paidAt", "Paid"]]))
      return card("Plan", sub) + card("Invoices", invoices)
    }),
  actions: {}
}

export const dpdp: ConsolePage = {
  title: "DPDP records and grievances",
  render: (ctx) =>
    Effect.gen(function*() {
      const records = yield* read(ctx, "/v1/dpdp/consent-records?limit=50", (b) =>
        rowsOf("Consent records", b.records ?? [], [["recordId", "Record"], ["dataPrincipalId", "Principal"], ["consentNoticeId", "Notice"], ["consentNoticeVersion", "Version"], ["scopes", "Scopes"], ["status", "Status"], ["createdAt", "Given"]]))
      const grievances = yield* read(ctx, "/v1/dpdp/grievances?limit=50", (b) =>
        rowsOf("Grievances", b.grievances, [["referenceNumber", "Reference"], ["dataPrincipalId", "Principal"], ["type", "Type"], ["status", "Status"], ["expectedResolutionBy", "Expected by"], ["statutoryDueAt", "Statutory deadline"], ["createdAt", "Filed"]]))
      return card("Consent records", records) + card("Grievances", grievances)
    }),
  actions: {}
}
