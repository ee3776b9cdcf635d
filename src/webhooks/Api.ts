/** Webhooks: endpoints (edit, pause, test send), delivery history, retry and secret rotation (decisions §7). */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, Conflict, NotFound, PlanLimitExceeded } from "../platform/Errors.ts"
import { documented } from "../platform/OperationDocs.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { WEBHOOKS_DOCS } from "./Docs.ts"

const Endpoint = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  /** false while paused: deliveries are then held (decisions §7) */
  enabled: Schema.Boolean,
  createdAt: Schema.String
})
const Url = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2000))
const EventTypes = Schema.Array(Schema.String).pipe(Schema.maxItems(50))
const strict = { parseOptions: { onExcessProperty: "error" as const } }

export const Delivery = Schema.Struct({
  id: Schema.String,
  eventId: Schema.String,
  eventType: Schema.String,
  status: Schema.Literal("pending", "held", "delivered", "failed"),
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
        url: Url,
        events: EventTypes
      }))
      .addSuccess(Schema.Struct({ ...Endpoint.fields, secret: Schema.String }), { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(PlanLimitExceeded)
  )
  .add(HttpApiEndpoint.get("list", "/v1/webhooks").addSuccess(Schema.Struct({ webhooks: Schema.Array(Endpoint) })))
  .add(HttpApiEndpoint.del("remove", "/v1/webhooks/:id").setPath(IdPath).addSuccess(Schema.Void, { status: 204 }).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/v1/webhooks/:id")
      .setPath(IdPath)
      .setPayload(Schema.Struct({ url: Schema.optional(Url), events: Schema.optional(EventTypes), enabled: Schema.optional(Schema.Boolean) }).annotations(strict))
      .addSuccess(Endpoint)
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("test", "/v1/webhooks/:id/test")
      .setPath(IdPath)
      .setPayload(Schema.Struct({ eventType: Schema.optional(Schema.String.pipe(Schema.maxLength(100))) }).annotations(strict))
      .addSuccess(Schema.Struct({
        eventId: Schema.String,
        eventType: Schema.String,
        ok: Schema.Boolean,
        responseStatus: Schema.NullOr(Schema.Number),
        error: Schema.NullOr(Schema.String)
      }))
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(NotFound)
      // each call makes an outbound request on the caller's behalf
      .annotate(RatePolicy, { routeLimit: 30, routeKey: "apiKey" })
  )
  .add(
    HttpApiEndpoint.get("deliveries", "/v1/webhooks/:id/deliveries")
      .setPath(IdPath)
      .setUrlParams(Schema.Struct({
        status: Schema.optional(Schema.Literal("pending", "held", "delivered", "failed")),
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
  .pipe(documented(WEBHOOKS_DOCS))
{}
