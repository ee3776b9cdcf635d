/**
 * Summaries, descriptions and examples of plans, usage and invoices (decisions §16); BillingApi
 * and BillingProviderApi carry them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { DEV, T } from "../platform/DocExamples.ts"

const INVOICE = "inv_01JDQ9C1D2E3F4G5H6J7K8M9N0"
const limits = { agents: 500, webhooks: 30, activeGrants: 1000, policies: 50, scimTokens: null, ssoConnections: null, authorizationsPerMonth: 50000, tokenExchangesPerMonth: 50000, resourceServers: 5, oauthClients: 1000 }
const invoice = {
  id: INVOICE, plan: "pro", periodStart: "2026-10-01T00:00:00.000Z", periodEnd: "2026-11-01T00:00:00.000Z", status: "open", currency: "USD",
  lines: [
    { kind: "fee", meter: null, quantity: 1, unitPrice: 49, amount: 49, plan: "pro", periodStart: "2026-10-01T00:00:00.000Z", periodEnd: "2026-11-01T00:00:00.000Z" },
    { kind: "overage", meter: "authorizations", quantity: 12000, unitPrice: 0.5, amount: 6, plan: "pro", periodStart: "2026-10-01T00:00:00.000Z", periodEnd: "2026-11-01T00:00:00.000Z" }
  ],
  total: 55,
  usage: { authorizations: 5012000, token_exchanges: 812000, vault_exchanges: 310, offline_entries: 0, active_agents: 41, active_grants: 9200 },
  issuedAt: "2026-11-01T00:10:00.000Z", paidAt: null
}
const counts = { tokenExchanges: 120, authorizations: 64, verifications: 40, vaultExchanges: 3, offlineEntries: 0, totalRequests: 227 }

export const BILLING_DOCS = {
  plans: {
    summary: "List the plans",
    description: "Every plan with its limits (`null` = unlimited), monthly fee, currency and overage prices per 1,000 units. Operators set them with `PLANS_FILE`.",
    response: { plans: [{ code: "free", name: "Free", limits, monthlyFee: 0, currency: "USD", overage: {} }] }
  },
  entitlements: {
    summary: "Your plan, its limits and this month's use",
    description: "`usage` holds every meter of the month by its meter name (`authorizations`, `token_exchanges`, `vault_exchanges`, `offline_entries`, and the peaks `active_agents`, `active_grants`), counted from stored records, with the plan limit that bounds it (`null` when none), and each capped limit by its limit name, counted from what exists now; `verifications` (token checks) is counted live and marked `estimated: true` (a crash can lose a few seconds of it). `pct` is `null` for an unlimited limit. Crossing 80 % and 100 % of a monthly quota emits `billing.quota.threshold`, once per month each.",
    response: {
      plan: "free", limits,
      usage: {
        authorizations: { used: 40000, limit: 50000, pct: 80 }, token_exchanges: { used: 31000, limit: 50000, pct: 62 },
        vault_exchanges: { used: 120, limit: null, pct: null }, offline_entries: { used: 0, limit: null, pct: null },
        verifications: { used: 90210, limit: null, pct: null, estimated: true },
        active_agents: { used: 12, limit: 500, pct: 2.4 }, active_grants: { used: 300, limit: 1000, pct: 30 },
        agents: { used: 12, limit: 500, pct: 2.4 }, authorizationsPerMonth: { used: 40000, limit: 50000, pct: 80 }
      },
      periodStart: "2026-11-01T00:00:00.000Z", periodEnd: "2026-12-01T00:00:00.000Z"
    }
  },
  subscription: {
    summary: "Your subscription",
    description: "The plan and the current calendar month (UTC). Without a payment provider every plan is `active` until an operator changes it.",
    response: { plan: "free", status: "active", currentPeriodStart: "2026-11-01T00:00:00.000Z", currentPeriodEnd: "2026-12-01T00:00:00.000Z", cancelAtPeriodEnd: false }
  },
  checkout: {
    summary: "Start a checkout (needs a payment provider)",
    description: "Checks the body (a paid plan, absolute http(s) URLs), then answers 503 `SERVICE_UNAVAILABLE` \"Billing provider not configured\" until a provider is configured.",
    request: { plan: "pro", successUrl: "https://app.example/billing/ok", cancelUrl: "https://app.example/billing" },
    response: { checkoutUrl: "https://pay.example/session/abc" }
  },
  portal: {
    summary: "Open the billing portal (needs a payment provider)",
    description: "Checks `returnUrl`, then answers 503 `SERVICE_UNAVAILABLE` until a provider is configured.",
    request: { returnUrl: "https://app.example/billing" },
    response: { portalUrl: "https://pay.example/portal/abc" }
  },
  invoices: {
    summary: "List your invoices",
    description: "Newest first, paged with `limit` and `cursor`. An invoice is issued when a month closes; money is exact to 4 decimal places.",
    response: { invoices: [invoice], nextCursor: null }
  },
  invoice: {
    summary: "Read an invoice",
    description: "Its lines (the monthly fee, and overage per meter above the plan's quota) and the month's measured usage. Each part of the month is priced at the plan in force then: a plan change mid-month gives each part its own lines (`plan`, `periodStart`, `periodEnd`), the fee prorated by the part's share of the month and the included quota likewise. Issued with `billing.invoice.created`; `paidAt` is set when an operator marks it paid (`agent-auth billing mark-paid`). 404 for another developer's invoice.",
    response: invoice
  },
  usage: {
    summary: "Today's usage",
    description: "Today's (UTC) counts: from stored records, and `verifications` (token checks) counted live, an estimate. `totalRequests` is the sum of the metered operations.",
    response: { developerId: DEV, period: T.slice(0, 10), ...counts }
  },
  usageHistory: {
    summary: "Usage per day",
    description: "The last `days` UTC days (1 to 90, default 30), newest first; 400 outside that range.",
    response: { developerId: DEV, days: 2, entries: [{ date: "2026-11-24", ...counts }, { date: "2026-11-23", ...counts }] }
  },
  usageSummary: {
    summary: "A month's meters",
    description: "Every meter for `period` (`YYYY-MM`, default this month), as an invoice counts them.",
    response: {
      developerId: DEV, period: "2026-11", periodStart: "2026-11-01T00:00:00.000Z", periodEnd: "2026-12-01T00:00:00.000Z",
      meters: { authorizations: 64, token_exchanges: 120, vault_exchanges: 3, offline_entries: 0, active_agents: 4, active_grants: 30, verifications: 512 }
    }
  }
} satisfies Record<string, OperationDoc>

export const BILLING_PROVIDER_DOCS = {
  webhook: {
    summary: "Payment provider events",
    description: "For the payment provider, not for you: no API key (the provider's signature will be checked). Checks the body, then 503 until a provider is configured.",
    request: { id: "evt_provider_1", type: "invoice.paid" },
    response: { received: true }
  }
} satisfies Record<string, OperationDoc>
