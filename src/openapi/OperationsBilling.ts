/** Summaries, descriptions and examples: billing and usage (decisions §16; see Document.ts). */
import type { OperationDoc } from "./Document.ts"
import { DEV, T } from "./Examples.ts"

const INVOICE = "inv_01JDQ9C1D2E3F4G5H6J7K8M9N0"
const limits = { agents: 500, webhooks: 30, activeGrants: 1000, policies: 50, scimTokens: null, ssoConnections: null, authorizationsPerMonth: 50000, tokenExchangesPerMonth: 50000 }
const invoice = {
  id: INVOICE, plan: "pro", periodStart: "2026-10-01T00:00:00.000Z", periodEnd: "2026-11-01T00:00:00.000Z", status: "open", currency: "USD",
  lines: [
    { kind: "fee", meter: null, quantity: 1, unitPrice: 49, amount: 49 },
    { kind: "overage", meter: "authorizations", quantity: 12000, unitPrice: 0.5, amount: 6 }
  ],
  total: 55,
  usage: { authorizations: 5012000, token_exchanges: 812000, vault_exchanges: 310, offline_entries: 0, active_agents: 41, active_grants: 9200 },
  issuedAt: "2026-11-01T00:10:00.000Z", paidAt: null
}
const counts = { tokenExchanges: 120, authorizations: 64, vaultExchanges: 3, offlineEntries: 0, totalRequests: 187 }

export const BILLING_OPERATIONS: Record<string, OperationDoc> = {
  "GET /v1/billing/plans": {
    summary: "List the plans",
    description: "Every plan with its limits (`null` = unlimited), monthly fee, currency and overage prices per 1,000 units. Operators set them with `PLANS_FILE`.",
    response: { plans: [{ code: "free", name: "Free", limits, monthlyFee: 0, currency: "USD", overage: {} }] }
  },
  "GET /v1/billing/entitlements": {
    summary: "Your plan, its limits and this month's use",
    description: "The monthly quotas are counted from stored records, the caps from what exists now. `pct` is `null` for an unlimited limit. Crossing 80 % and 100 % of a monthly quota emits `billing.quota.threshold`, once per month each.",
    response: {
      plan: "free", limits,
      usage: { agents: { used: 12, limit: 500, pct: 2.4 }, authorizationsPerMonth: { used: 40000, limit: 50000, pct: 80 } },
      periodStart: "2026-11-01T00:00:00.000Z", periodEnd: "2026-12-01T00:00:00.000Z"
    }
  },
  "GET /v1/billing/subscription": {
    summary: "Your subscription",
    description: "The plan and the current calendar month (UTC). Without a payment provider every plan is `active` until an operator changes it.",
    response: { plan: "free", status: "active", currentPeriodStart: "2026-11-01T00:00:00.000Z", currentPeriodEnd: "2026-12-01T00:00:00.000Z", cancelAtPeriodEnd: false }
  },
  "POST /v1/billing/checkout": {
    summary: "Start a checkout (needs a payment provider)",
    description: "Checks the body (a paid plan, absolute http(s) URLs), then answers 503 `SERVICE_UNAVAILABLE` \"Billing provider not configured\" until a provider is configured.",
    request: { plan: "pro", successUrl: "https://app.example/billing/ok", cancelUrl: "https://app.example/billing" },
    response: { checkoutUrl: "https://pay.example/session/abc" }
  },
  "POST /v1/billing/portal": {
    summary: "Open the billing portal (needs a payment provider)",
    description: "Checks `returnUrl`, then answers 503 `SERVICE_UNAVAILABLE` until a provider is configured.",
    request: { returnUrl: "https://app.example/billing" },
    response: { portalUrl: "https://pay.example/portal/abc" }
  },
  "POST /v1/billing/webhook": {
    summary: "Payment provider events",
    description: "For the payment provider, not for you: no API key (the provider's signature will be checked). Checks the body, then 503 until a provider is configured.",
    request: { id: "evt_provider_1", type: "invoice.paid" },
    response: { received: true }
  },
  "GET /v1/billing/invoices": {
    summary: "List your invoices",
    description: "Newest first, paged with `limit` and `cursor`. An invoice is issued when a month closes; money is exact to 4 decimal places.",
    response: { invoices: [invoice], nextCursor: null }
  },
  "GET /v1/billing/invoices/{id}": {
    summary: "Read an invoice",
    description: "Its lines (the monthly fee, and overage per meter above the plan's quota) and the month's measured usage. Issued with `billing.invoice.created`; `paidAt` is set when an operator marks it paid (`agent-auth billing mark-paid`). 404 for another developer's invoice.",
    response: invoice
  },
  "GET /v1/usage": {
    summary: "Today's usage",
    description: "Today's (UTC) counts from stored records. `totalRequests` is the sum of the metered operations.",
    response: { developerId: DEV, period: T.slice(0, 10), ...counts }
  },
  "GET /v1/usage/history": {
    summary: "Usage per day",
    description: "The last `days` UTC days (1 to 90, default 30), newest first; 400 outside that range.",
    response: { developerId: DEV, days: 2, entries: [{ date: "2026-11-24", ...counts }, { date: "2026-11-23", ...counts }] }
  },
  "GET /v1/usage/summary": {
    summary: "A month's meters",
    description: "Every meter for `period` (`YYYY-MM`, default this month), as an invoice counts them.",
    response: {
      developerId: DEV, period: "2026-11", periodStart: "2026-11-01T00:00:00.000Z", periodEnd: "2026-12-01T00:00:00.000Z",
      meters: { authorizations: 64, token_exchanges: 120, vault_exchanges: 3, offline_entries: 0, active_agents: 4, active_grants: 30 }
    }
  }
}
