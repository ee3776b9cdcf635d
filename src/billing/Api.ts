/** Billing and usage (decisions §16): plans, entitlements, subscription, invoices, usage; provider routes. */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, NotFound, PublicRouteErrors, ServiceUnavailable } from "../platform/Errors.ts"
import { documented } from "../platform/OperationDocs.ts"
import { BILLING_DOCS, BILLING_PROVIDER_DOCS } from "./Docs.ts"

const Limits = Schema.Record({ key: Schema.String, value: Schema.NullOr(Schema.Number) })

export const PlanView = Schema.Struct({
  code: Schema.String,
  name: Schema.String,
  limits: Limits,
  monthlyFee: Schema.Number,
  currency: Schema.String,
  overage: Schema.Record({ key: Schema.String, value: Schema.Number })
})

const Line = Schema.Struct({
  kind: Schema.Literal("fee", "overage"),
  meter: Schema.NullOr(Schema.String),
  quantity: Schema.Number,
  unitPrice: Schema.Number,
  amount: Schema.Number,
  /** the plan in force during the part of the period this line prices (decisions §16, revised) */
  plan: Schema.String,
  periodStart: Schema.String,
  periodEnd: Schema.String
})

export const InvoiceView = Schema.Struct({
  id: Schema.String,
  plan: Schema.String,
  periodStart: Schema.String,
  periodEnd: Schema.String,
  status: Schema.Literal("draft", "open", "paid", "void"),
  currency: Schema.String,
  lines: Schema.Array(Line),
  total: Schema.Number,
  usage: Schema.Record({ key: Schema.String, value: Schema.Number }),
  issuedAt: Schema.String,
  paidAt: Schema.NullOr(Schema.String)
})

const Counts = {
  tokenExchanges: Schema.Number,
  authorizations: Schema.Number,
  /** token checks (POST /v1/tokens/verify), counted live: an estimate (decisions §16) */
  verifications: Schema.Number,
  vaultExchanges: Schema.Number,
  offlineEntries: Schema.Number,
  totalRequests: Schema.Number
}

const HttpUrl = Schema.String.pipe(Schema.maxLength(2048))

export class BillingApi extends HttpApiGroup.make("billing")
  .add(HttpApiEndpoint.get("plans", "/v1/billing/plans").addSuccess(Schema.Struct({ plans: Schema.Array(PlanView) })))
  .add(
    HttpApiEndpoint.get("entitlements", "/v1/billing/entitlements").addSuccess(Schema.Struct({
      plan: Schema.String,
      limits: Limits,
      usage: Schema.Record({
        key: Schema.String,
        value: Schema.Struct({
          used: Schema.Number,
          limit: Schema.NullOr(Schema.Number),
          pct: Schema.NullOr(Schema.Number),
          /** true for a meter counted live (verifications), which a crash can undercount */
          estimated: Schema.optional(Schema.Boolean)
        })
      }),
      periodStart: Schema.String,
      periodEnd: Schema.String
    }))
  )
  .add(
    HttpApiEndpoint.get("subscription", "/v1/billing/subscription").addSuccess(Schema.Struct({
      plan: Schema.String,
      status: Schema.Literal("trialing", "active", "past_due", "canceled", "unpaid"),
      currentPeriodStart: Schema.String,
      currentPeriodEnd: Schema.String,
      cancelAtPeriodEnd: Schema.Boolean
    }))
  )
  .add(
    HttpApiEndpoint.post("checkout", "/v1/billing/checkout")
      .setPayload(Schema.Struct({ plan: Schema.String.pipe(Schema.maxLength(64)), successUrl: HttpUrl, cancelUrl: HttpUrl }))
      .addSuccess(Schema.Struct({ checkoutUrl: Schema.String }), { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(ServiceUnavailable)
  )
  .add(
    HttpApiEndpoint.post("portal", "/v1/billing/portal")
      .setPayload(Schema.Struct({ returnUrl: HttpUrl }))
      .addSuccess(Schema.Struct({ portalUrl: Schema.String }), { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(ServiceUnavailable)
  )
  .add(
    HttpApiEndpoint.get("invoices", "/v1/billing/invoices")
      .setUrlParams(Schema.Struct({ cursor: Schema.optional(Schema.String), limit: Schema.optional(Schema.String) }))
      .addSuccess(Schema.Struct({ invoices: Schema.Array(InvoiceView), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.get("invoice", "/v1/billing/invoices/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(InvoiceView)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("usage", "/v1/usage").addSuccess(Schema.Struct({ developerId: Schema.String, period: Schema.String, ...Counts }))
  )
  .add(
    HttpApiEndpoint.get("usageHistory", "/v1/usage/history")
      .setUrlParams(Schema.Struct({ days: Schema.optional(Schema.String) }))
      .addSuccess(Schema.Struct({
        developerId: Schema.String,
        days: Schema.Number,
        entries: Schema.Array(Schema.Struct({ date: Schema.String, ...Counts }))
      }))
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.get("usageSummary", "/v1/usage/summary")
      .setUrlParams(Schema.Struct({ period: Schema.optional(Schema.String) }))
      .addSuccess(Schema.Struct({
        developerId: Schema.String,
        period: Schema.String,
        periodStart: Schema.String,
        periodEnd: Schema.String,
        meters: Schema.Record({ key: Schema.String, value: Schema.Number })
      }))
      .addError(BadRequest)
  )
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
  .pipe(documented(BILLING_DOCS))
{}

/** The payment provider's webhook: no API key; verified by the provider adapter once there is one. */
export class BillingProviderApi extends HttpApiGroup.make("billingProvider")
  .add(
    HttpApiEndpoint.post("webhook", "/v1/billing/webhook")
      .setPayload(Schema.Struct({ id: Schema.String.pipe(Schema.maxLength(255)), type: Schema.String.pipe(Schema.maxLength(255)) }))
      .addSuccess(Schema.Struct({ received: Schema.Boolean }))
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(ServiceUnavailable)
  )
  .addError(PublicRouteErrors)
  .pipe(documented(BILLING_PROVIDER_DOCS))
{}
