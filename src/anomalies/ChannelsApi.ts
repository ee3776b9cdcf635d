/**
 * Anomaly alert channels (decisions §14): where alerts are sent. Each `anomaly.detected` event is
 * delivered to the developer's channels by the webhook machinery (signatures, retries, SSRF rules).
 *
 * | Operation | Status | Code | Condition |
 * | - | - | - | - |
 * | create | 400 | BAD_REQUEST | malformed body, an unknown field, a type other than webhook/slack/email, a URL the outbound rules refuse |
 * | create | 409 | TOO_MANY_CHANNELS | the developer already has 20 channels |
 * | create | 422 | CHANNEL_TYPE_UNSUPPORTED | `type: "email"` |
 * | remove, deliveries | 404 | NOT_FOUND | no such channel for this developer |
 * | deliveries | 400 | BAD_REQUEST | malformed status, limit or cursor |
 * | all | 401 | UNAUTHORIZED | invalid or missing API key |
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import {
  ApiKeyRouteErrors, BadRequest, BodyErrors, ChannelTypeUnsupported, NotFound, TooManyChannels
} from "../platform/Errors.ts"
import { LimitParam } from "../platform/Pagination.ts"
import { Delivery } from "../webhooks/Api.ts"
import { documented } from "../platform/OperationDocs.ts"
import { ANOMALY_CHANNELS_DOCS } from "./ChannelsDocs.ts"

const strict = { parseOptions: { onExcessProperty: "error" as const } }
export const SEVERITIES = ["low", "medium", "high", "critical"] as const
const Url = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2000))

export const CreateChannel = Schema.Struct({
  // checked by hand: `email` is 422, any other unknown type 400
  type: Schema.String.pipe(Schema.maxLength(100)),
  url: Schema.optional(Url),
  // the published protocol's shape: the URL inside `config`
  config: Schema.optional(Schema.Struct({ url: Url }).annotations(strict)),
  name: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))),
  severities: Schema.optional(Schema.Array(Schema.Literal(...SEVERITIES)).pipe(Schema.minItems(1), Schema.maxItems(4)))
}).annotations(strict)

export const Channel = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("webhook", "slack"),
  name: Schema.NullOr(Schema.String),
  /** a Slack channel's URL is masked (it is the secret) */
  url: Schema.String,
  severities: Schema.Array(Schema.String),
  /** a webhook channel's signing secret: in full once, in the creation answer; masked afterwards; null for Slack */
  secret: Schema.NullOr(Schema.String),
  createdAt: Schema.String
})

const IdPath = Schema.Struct({ id: Schema.String })

export class AnomalyChannelsApi extends HttpApiGroup.make("anomalyChannels")
  .add(
    HttpApiEndpoint.post("create", "/v1/anomaly/channels")
      .setPayload(CreateChannel)
      .addSuccess(Channel, { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(TooManyChannels)
      .addError(ChannelTypeUnsupported)
  )
  .add(HttpApiEndpoint.get("list", "/v1/anomaly/channels").addSuccess(Schema.Struct({ channels: Schema.Array(Channel) })))
  .add(HttpApiEndpoint.del("remove", "/v1/anomaly/channels/:id").setPath(IdPath).addSuccess(Schema.Void, { status: 204 }).addError(NotFound))
  .add(
    HttpApiEndpoint.get("deliveries", "/v1/anomaly/channels/:id/deliveries")
      .setPath(IdPath)
      .setUrlParams(Schema.Struct({
        status: Schema.optional(Schema.Literal("pending", "delivered", "failed")),
        cursor: Schema.optional(Schema.String),
        limit: LimitParam
      }))
      .addSuccess(Schema.Struct({ deliveries: Schema.Array(Delivery), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
      .addError(NotFound)
  )
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
  .pipe(documented(ANOMALY_CHANNELS_DOCS))
{}
