/** Summaries, descriptions and examples: plans, entitlements, subscription, invoices and usage (decisions §16; see Document.ts). */
import type { OperationDoc } from "./Document.ts"
import { DEV } from "./Examples.ts"

const INVOICE = "inv_01JDQ9YH1JKMNPQRSTVWXYZABC"
const limits = (values: Array<number | null>) => ({
  agents: values[0], webhooks: values[1], activeGrants: values[2], policies: values[3], scimTokens: values[4], ssoConnections: values[5],
  authorizationsPerMonth: values[6], tokenExchangesPerMonth: values[7]
})
const proLimits = limits([5_000, 200, 50_000, 500, null, null, 5_000_000, 5_000_000])
const invoice = {
  id: INVOICE, plan: "pro", periodStart: "2026-10-01T00:00:00.000Z", periodEnd: "2026-11-01T00:00:00.000Z", status: "open", currency: "USD",
  lines: [
    { kind: "fee", meter: null, quantity: 1, unitPrice: 49, amount: 49 },
    { kind: "overage", meter: "authorizations", quantity: 120_000, unitPrice: 0.5, amount: 60 }
  ],
  total: 109,
  usage: { authorizations: 5_120_000, token_exchanges: 4_310_552, vault_exchanges: 88_410, offline_entries: 120_553, active_agents: 41, active_grants: 18_220 },
  issuedAt: "2026-11-01T00:05:00.000Z", paidAt: null
}
const counts = { tokenExchanges: 14_210, authorizations: 9_874, vaultExchanges: 312, offlineEntries: 2_480, totalRequests: 61_733 }
const NO_PROVIDER = "No payment provider is configured on this service yet: after checking the body (400) it answers 503 `SERVICE_UNAVAILABLE` (\"Billing provider not configured\"); plans are changed by an operator (`agent-auth billing set-plan`)."

export const BILLING_OPERATIONS: Record<string, OperationDoc> = {
  "GET /v1/billing/plans": {
    summary: "List plans",
    description: "The plans this service offers, with their limits (`null` = unlimited): resource caps (`agents`, `webhooks`, `activeGrants`, `policies`, `scimTokens`, `ssoConnections`, answered 402 `PLAN_LIMIT_EXCEEDED` when reached) and monthly quotas (`authorizationsPerMonth`, `tokenExchangesPerMonth`), the monthly fee and the overage price per 1,000 units. Operators set the figures (`PLANS_FILE`).",
    response: {
      plans: [
        { code: "free", name: "Free", limits: limits([500, 30, 1_000, 50, null, null, 50_000, 50_000]), monthlyFee: 0, currency: "USD", overage: {} },
        { code: "pro", name: "Pro", limits: proLimits, monthlyFee: 49, currency: "USD", overage: { authorizations: 0.5, token_exchanges: 0.1 } }
      ]
    }
  },
  "GET /v1/billing/entitlements": {
    summary: "Your limits and what you use",
    description: "Your plan's limits and, for each, how much is used now (caps) or this month (quotas) with the percentage. On the free plan, reaching 100 % of a monthly quota stops `POST /v1/authorize` and code exchange with 402 `QUOTA_EXCEEDED` until the month ends (refreshing a token is never blocked, so running agents do not break); paid plans are billed overage instead. Crossing 80 % and 100 % emits `billing.quota.threshold` once per month.",
    response: {
      plan: "pro", limits: proLimits,
      usage: {
        agents: { used: 41, limit: 5_000, pct: 0.82 }, webhooks: { used: 3, limit: 200, pct: 1.5 }, activeGrants: { used: 18_220, limit: 50_000, pct: 36.44 },
        authorizationsPerMonth: { used: 4_102_330, limit: 5_000_000, pct: 82.05 }, tokenExchangesPerMonth: { used: 3_118_004, limit: 5_000_000, pct: 62.36 }
      },
      periodStart: "2026-11-01T00:00:00.000Z", periodEnd: "2026-12-01T00:00:00.000Z"
    }
  },
  "GET /v1/billing/subscription": {
    summary: "Your subscription",
    description: "Your plan and the current billing period (a calendar month in UTC; `currentPeriodEnd` is the first instant of the next month). Without a payment provider every plan is `active` until an operator changes it.",
    response: { plan: "pro", status: "active", currentPeriodStart: "2026-11-01T00:00:00.000Z", currentPeriodEnd: "2026-12-01T00:00:00.000Z", cancelAtPeriodEnd: false }
  },
  "POST /v1/billing/checkout": {
    summary: "Start a plan checkout",
    description: `For upgrading to a paid \`plan\` through the payment provider's checkout page, returning to \`successUrl\` or \`cancelUrl\` (absolute http(s) URLs). ${NO_PROVIDER}`,
    request: { plan: "pro", successUrl: "https://app.acme.example/billing/done", cancelUrl: "https://app.acme.example/billing" },
    response: { checkoutUrl: "https://checkout.payments.example/c/pay/cs_live_a1B2c3D4" }
  },
  "POST /v1/billing/portal": {
    summary: "Open the billing portal",
    description: `A link to the payment provider's customer portal, returning to \`returnUrl\`. ${NO_PROVIDER}`,
    request: { returnUrl: "https://app.acme.example/billing" },
    response: { portalUrl: "https://billing.payments.example/p/session/bps_a1B2c3D4" }
  },
  "POST /v1/billing/webhook": {
    summary: "Payment provider webhook",
    description: "Called by the payment provider, not by you (no API key; its adapter will verify the provider's signature and deduplicate by event id). Until a provider is configured it answers 503 `SERVICE_UNAVAILABLE` after checking the body.",
    request: { id: "evt_1QxYz2AbCdEfGh", type: "customer.subscription.updated" },
    response: { received: true }
  },
  "GET /v1/billing/invoices": {
    summary: "List invoices",
    description: "One invoice per closed month, newest first: the plan's fee and the overage lines (per meter, per 1,000 units above the quota), computed from stored facts when the month is closed (automatically shortly after it ends). Amounts are JSON numbers computed in exact decimals. Page with `cursor` / `limit`.",
    response: { invoices: [invoice], nextCursor: null }
  },
  "GET /v1/billing/invoices/{id}": {
    summary: "Read an invoice",
    description: "One invoice with its lines, the month's meter readings (`usage`) and whether it is paid (`paidAt`, marked by an operator). Emitted as `billing.invoice.created` when issued. 404 for another developer's.",
    response: invoice
  },
  "GET /v1/usage": {
    summary: "Today's usage",
    description: "Counts for the current UTC day (`period` is the date): grant tokens issued, authorization requests, vault exchanges, offline audit entries accepted and API requests.",
    response: { developerId: DEV, period: "2026-11-24", ...counts }
  },
  "GET /v1/usage/history": {
    summary: "Daily usage history",
    description: "The same counts per UTC day for the last `days` days (1–90, default 30; 400 outside), newest first, days without use included as zeros.",
    response: { developerId: DEV, days: 2, entries: [{ date: "2026-11-24", ...counts }, { date: "2026-11-23", ...counts, totalRequests: 58_002 }] }
  },
  "GET /v1/usage/summary": {
    summary: "Usage for a month",
    description: "The metered totals of one month (`period=YYYY-MM`, default the current one; 400 otherwise): `authorizations`, `token_exchanges`, `vault_exchanges`, `offline_entries`, and the peak `active_agents` and `active_grants` — the figures an invoice is computed from.",
    response: {
      developerId: DEV, period: "2026-11", periodStart: "2026-11-01T00:00:00.000Z", periodEnd: "2026-12-01T00:00:00.000Z",
      meters: { authorizations: 4_102_330, token_exchanges: 3_118_004, vault_exchanges: 61_200, offline_entries: 98_114, active_agents: 41, active_grants: 18_220 }
    }
  }
}
