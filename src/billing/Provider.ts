/**
 * The payment-provider port (decisions §16). No provider is reachable from our machines, so none is
 * configured and checkout, portal and the provider webhook answer 503 SERVICE_UNAVAILABLE after
 * validating their bodies. A Stripe adapter fills this port later: it creates checkout and portal
 * sessions, verifies webhook signatures, deduplicates events by id (a table keyed by event id), and
 * applies plan changes through `developers set-plan` semantics with `billing.subscription.updated`.
 */
import { Context, Effect, Layer, Option } from "effect"

export interface ProviderEvent {
  readonly id: string
  readonly type: string
  readonly developerId: string | undefined
  readonly plan: string | undefined
  readonly status: "trialing" | "active" | "past_due" | "canceled" | "unpaid" | undefined
}

export interface PaymentProvider {
  readonly name: string
  readonly checkout: (developerId: string, input: { plan: string; successUrl: string; cancelUrl: string }) => Effect.Effect<{ checkoutUrl: string }, Error>
  readonly portal: (developerId: string, input: { returnUrl: string }) => Effect.Effect<{ portalUrl: string }, Error>
  /** verifies the signature over the raw body; undefined when it does not verify */
  readonly verifyWebhook: (rawBody: string, headers: Record<string, string | undefined>) => Effect.Effect<ProviderEvent | undefined>
}

export class Provider extends Context.Tag("agent-auth/billing/Provider")<Provider, Option.Option<PaymentProvider>>() {}

/** What runs today: no provider. */
export const NoProviderLive = Layer.succeed(Provider, Option.none())
