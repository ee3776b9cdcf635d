/** Webhooks: endpoints, delivery history, retry and secret rotation (decisions §7). */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, Conflict, NotFound, PlanLimitExceeded } from "../platform/Errors.ts"

const Endpoint = Schema.Struct({ id: Schema.String, url: Schema.String, events: Schema.Array(Schema.String), createdAt: Schema.String })

export const Delivery = Schema.Struct({
  id: Schema.String,
  eventId: Schema.String,
  eventType: Schema.String,
  status: Schema.Literal("pending", "delivered", "failed"),
  attempts: Schema.Number,
  maxAttempts: Schema.Number,
  lastError: Schema.NullOr(Schema.String),
  lastResponseStatus: Schema.NullOr(Schema.Number),
  nextAttemptAt: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  deliveredAt: Schema.NullOr(Schema.String)
})

const IdPath = Schema.Struct({ id: Schema.String })

export class WebhooksApi extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.post("create", "/v1/webhooks")
      .setPayload(Schema.Struct({
        url: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2000)),
        events: Schema.Array(Schema.String).pipe(Schema.maxItems(50))
      }))
      .addSuccess(Schema.Struct({ ...Endpoint.fields, secret: Schema.String }), { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(PlanLimitExceeded)
  )
  .add(HttpApiEndpoint.get("list", "/v1/webhooks").addSuccess(Schema.Struct({ webhooks: Schema.Array(Endpoint) })))
  .add(HttpApiEndpoint.del("remove", "/v1/webhooks/:id").setPath(IdPath).addSuccess(Schema.Void, { status: 204 }).addError(NotFound))
  .add(
    HttpApiEndpoint.get("deliveries", "/v1/webhooks/:id/deliveries")
      .setPath(IdPath)
      .setUrlParams(Schema.Struct({
        status: Schema.optional(Schema.Literal("pending", "delivered", "failed")),
        cursor: Schema.optional(Schema.String),
        limit: Schema.optional(Schema.String)
      }))
      .addSuccess(Schema.Struct({ deliveries: Schema.Array(Delivery), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("retry", "/v1/webhooks/:id/deliveries/:deliveryId/retry")
      .setPath(Schema.Struct({ id: Schema.String, deliveryId: Schema.String }))
      .addSuccess(Delivery)
      .addError(NotFound)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.post("rotateSecret", "/v1/webhooks/:id/rotate-secret")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ id: Schema.String, secret: Schema.String, previousSecretExpiresAt: Schema.String }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("replay", "/v1/webhooks/:id/replay")
      .setPath(IdPath)
      .setPayload(Schema.Struct({
        since: Schema.String.pipe(Schema.maxLength(40)),
        until: Schema.optional(Schema.String.pipe(Schema.maxLength(40))),
        status: Schema.optional(Schema.Literal("failed", "delivered"))
      }))
      .addSuccess(Schema.Struct({ requeued: Schema.Number, nextSince: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(NotFound)
  )
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
{}
