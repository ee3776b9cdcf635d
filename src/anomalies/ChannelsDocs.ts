/**
 * Summaries, descriptions and examples of anomaly alert channels; AnomalyChannelsApi carries them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { DELIVERY, EVENT, T } from "../platform/DocExamples.ts"

const CHANNEL = "achan_01JDQ9VE8FGHJKMNPQRSTVWXYZ"
const SLACK = "achan_01JDQ9WF9GHJKMNPQRSTVWXYZ0"
const webhookChannel = {
  id: CHANNEL, type: "webhook", name: "On-call receiver", url: "https://alerts.acme.example/anomalies", severities: ["high", "critical"],
  secret: "whsec_********", createdAt: T
}
const slackChannel = {
  id: SLACK, type: "slack", name: "#security", url: "https://hooks.slack.com/********", severities: ["low", "medium", "high", "critical"], secret: null, createdAt: T
}
const delivery = {
  id: DELIVERY, eventId: EVENT, eventType: "anomaly.detected", status: "delivered", attempts: 1, maxAttempts: 5,
  lastError: null, lastResponseStatus: 200, nextAttemptAt: null, createdAt: T, deliveredAt: T
}

export const ANOMALY_CHANNELS_DOCS = {
  create: {
    summary: "Add an alert channel",
    description: "Where anomaly alerts go: every `anomaly.detected` event of a severity the channel takes (`severities`, default all four) is delivered to it, " +
      "unless the alert's custom rule names its own `alertChannels`. `webhook`: a POST of the event envelope `{ id, type, createdAt, data }` signed " +
      "like webhook deliveries (Standard Webhooks headers and `X-Service-Signature`) with the channel's `secret`, shown in full only in this answer. " +
      "`slack`: a Slack incoming-webhook URL, sent `{ text, blocks }` with the rule, severity, agent, occurrences and a link to the alert; the URL is " +
      "itself a secret, so it is stored sealed and answered masked. Both are sent by the webhook worker: retries 30/60/120/240 s apart, the " +
      "outbound rules checked here and again at each send (https and public addresses only in production, the connection pinned). The URL may also " +
      "be given as `config.url` (the published shape). `email` answers 422 `CHANNEL_TYPE_UNSUPPORTED`; at most 20 channels (409 `TOO_MANY_CHANNELS`).",
    request: { type: "webhook", name: "On-call receiver", url: "https://alerts.acme.example/anomalies", severities: ["high", "critical"] },
    response: { ...webhookChannel, secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw7Lr6kPTmhQQ=" }
  },
  list: {
    summary: "List alert channels",
    description: "Your channels, newest first. Secrets are masked: a webhook channel's `secret` and a Slack channel's URL path are never shown again.",
    response: { channels: [slackChannel, webhookChannel] }
  },
  remove: {
    summary: "Remove an alert channel",
    description: "Stops sending to the channel at once: its pending deliveries end `failed` with `endpoint deleted`. 404 for another developer's channel."
  },
  deliveries: {
    summary: "A channel's delivery history",
    description: "The channel's deliveries, newest first, with attempts (every send counts, the first included), the last error and answer status, " +
      "and when the next attempt is due. Filter by `status`; page with `cursor` / `limit` (1–100).",
    response: { deliveries: [delivery], nextCursor: null }
  }
} satisfies Record<string, OperationDoc>
