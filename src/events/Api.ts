/**
 * Live events (decisions §23).
 *
 * | Operation | Status | Code | Condition |
 * | - | - | - | - |
 * | stream | 400 | BAD_REQUEST | an unknown event type in `types` |
 * | stream | 401 | UNAUTHORIZED | invalid or missing API key |
 * | stream | 429 | TOO_MANY_CONNECTIONS | the developer already has 5 streams open (counted across instances in Redis) |
 * | get | 404 | NOT_FOUND | no such event of this developer (or no longer kept) |
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiError, ApiKeyRouteErrors, BadRequest, NotFound } from "../platform/Errors.ts"
import { documented } from "../platform/OperationDocs.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { EVENTS_DOCS } from "./Docs.ts"

export class TooManyConnections extends ApiError<TooManyConnections>()("TOO_MANY_CONNECTIONS", 429) {}

export const EVENT_STREAM_PATH = "/v1/events/stream"

const EventStreamText = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/event-stream" }))

/** an event as a webhook delivery's body carries it */
export const EventView = Schema.Struct({ id: Schema.String, type: Schema.String, createdAt: Schema.String, data: Schema.Unknown })

export class EventsApi extends HttpApiGroup.make("events")
  .add(
    HttpApiEndpoint.get("stream", EVENT_STREAM_PATH)
      .setUrlParams(Schema.Struct({ types: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))) }))
      .setHeaders(Schema.Struct({ "last-event-id": Schema.optional(Schema.String.pipe(Schema.maxLength(200))) }))
      .addSuccess(EventStreamText)
      .addError(BadRequest)
      .addError(TooManyConnections)
      .annotate(RatePolicy, { routeLimit: 60, routeKey: "apiKey" })
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/events/:id")
      .setPath(Schema.Struct({ id: Schema.String.pipe(Schema.maxLength(200)) }))
      .addSuccess(EventView)
      .addError(NotFound)
  )
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
  .pipe(documented(EVENTS_DOCS))
{}
