/**
 * Summaries, descriptions and examples of webhook endpoints and deliveries; WebhooksApi carries
 * them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { DELIVERY, EVENT, T } from "../platform/DocExamples.ts"

const WEBHOOK = "wh_01JDQ98H9J0K1M2N3P4Q5R6S7T"
const endpoint = { id: WEBHOOK, url: "https://hooks.your-app.example/agent-auth", events: ["grant.created", "grant.revoked"], enabled: true, createdAt: T }
const delivery = {
  id: DELIVERY, eventId: EVENT, eventType: "grant.created", status: "failed", attempts: 5, maxAttempts: 5,
  lastError: "receiver answered 500", lastResponseStatus: 500, nextAttemptAt: null, createdAt: T, deliveredAt: null
}

export const WEBHOOKS_DOCS = {
  create: {
    summary: "Register a webhook endpoint",
    description: "Subscribes a URL to event types (the catalogue is in this group's description; an unknown type answers 400 naming the valid ones). Answers the signing `secret` (`whsec_` + base64 of 32 bytes) **once**. In production the URL must be https and resolve to public addresses only. The number of endpoints is limited per plan (402 `PLAN_LIMIT_EXCEEDED`).",
    request: { url: "https://hooks.your-app.example/agent-auth", events: ["grant.created", "grant.revoked"] },
    response: { ...endpoint, secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw8ysrA0bwiy4=" }
  },
  list: { summary: "List webhook endpoints", description: "Your endpoints, newest first, without their secrets.", response: { webhooks: [endpoint] } },
  remove: { summary: "Delete a webhook endpoint", description: "Stops deliveries to the endpoint: its pending deliveries become `failed` (`endpoint deleted`)." },
  update: {
    summary: "Edit, pause or resume a webhook endpoint",
    description: "Changes any of `url`, `events` and `enabled` (at least one; another field answers 400). The URL is checked as on registration and unknown event types answer 400 the same way. Deliveries already queued keep going to the endpoint even when `events` drops their type. `enabled: false` pauses the endpoint: deliveries waiting to be sent and every new one are kept as `held` (not attempted; see the history with `status=held`) for 7 days. `enabled: true` sends the held deliveries of the last 7 days, oldest first, with the usual retries; older ones are `failed` with `lastError` saying they were held too long (retry or replay sends them if you still want them). A delivery you retry or replay while the endpoint is disabled waits as `pending` until it is enabled. Answers the endpoint, without its secret.",
    request: { enabled: false },
    response: { ...endpoint, enabled: false }
  },
  test: {
    summary: "Send a test event",
    description: "Sends one signed sample event now and answers what happened (`ok`, the receiver's `responseStatus`, `error`). `eventType` defaults to the endpoint's first subscribed type; any event type may be asked for (unknown ones answer 400). The body and headers are those of a real delivery (both signatures, the previous secret too during a rotation) with sample `data` for the type (`*_sample` ids). A test is sent even while the endpoint is disabled, is not retried, and is not an event: it appears neither in the delivery history nor in a replay. A receiver that fails answers 200 here with `ok: false`. At most 30 test sends a minute per API key.",
    request: { eventType: "grant.created" },
    response: { eventId: EVENT, eventType: "grant.created", ok: true, responseStatus: 200, error: null }
  },
  deliveries: {
    summary: "Delivery history",
    description: "The endpoint's deliveries, newest first, with attempts (every send counts, the first included), the last error and answer status, and when the next attempt is due. Filter by `status` (`pending`, `held` while the endpoint is disabled, `delivered`, `failed`); page with `cursor` / `limit` (1–100).",
    response: { deliveries: [delivery], nextCursor: null }
  },
  retry: {
    summary: "Retry one failed delivery",
    description: "Re-queues a `failed` delivery with a fresh set of attempts, sent at once. 409 when it is not failed. For many at once use replay.",
    response: { ...delivery, status: "pending", attempts: 0, nextAttemptAt: T }
  },
  rotateSecret: {
    summary: "Rotate the signing secret",
    description: "Answers a new secret (shown once). The replaced secret stays valid until `previousSecretExpiresAt` (24 hours): until then `webhook-signature` carries one `v1,` entry per secret and `X-Service-Signature` the new secret's, so switch your receiver within the day.",
    response: { id: WEBHOOK, secret: "whsec_pXb2kM1hT0cFf4Zt1yS7rN6qW3eA9vD5uJ8oL2iK0gE=", previousSecretExpiresAt: "2026-11-25T09:30:00.000Z" }
  },
  replay: {
    summary: "Replay deliveries in bulk",
    description: "Re-queues the endpoint's deliveries created in [`since`, `until`) (`until` defaults to now) with status `failed` (default) or `delivered`, oldest first, at most 1,000 per call; `nextSince` is where to continue, null when done. Idempotent: re-queued deliveries are pending, so calling again re-queues nothing twice. The same event id is sent again: deduplicate on `webhook-id`. Dates are ISO 8601 (a day alone means its midnight UTC); a bad date or `until` ≤ `since` answers 400.",
    request: { since: "2026-11-24T00:00:00Z", until: "2026-11-24T12:00:00Z", status: "failed" },
    response: { requeued: 42, nextSince: null }
  }
} satisfies Record<string, OperationDoc>
