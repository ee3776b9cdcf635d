/** Summaries, descriptions and examples: system, developers, domains, webhooks (see Document.ts). */
import type { OperationDoc } from "./Document.ts"
import { API_KEY, DELIVERY, DEV, EVENT, T, WEBHOOK } from "./Examples.ts"

const endpoint = { id: WEBHOOK, url: "https://hooks.your-app.example/agent-auth", events: ["grant.created", "grant.revoked"], createdAt: T }
const delivery = {
  id: DELIVERY, eventId: EVENT, eventType: "grant.created", status: "failed", attempts: 5, maxAttempts: 5,
  lastError: "receiver answered 500", lastResponseStatus: 500, nextAttemptAt: null, createdAt: T, deliveredAt: null
}
const developer = { developerId: DEV, name: "Acme Assistants", email: "dev@acme.example", mode: "sandbox", plan: "free", fidoRequired: false, createdAt: T }
const domain = { id: "dom_01JDQ9AK1M2N3P4Q5R6S7T8V9W", domain: "auth.acme.example", verified: false, verifiedAt: null, createdAt: T }

export const PLATFORM_OPERATIONS: Record<string, OperationDoc> = {
  "GET /": {
    summary: "Where to start",
    description: "Points to this documentation (`/docs`), the OpenAPI document and the health check, so a newcomer who opens the base URL knows where to go. No key, no rate limit.",
    response: { name: "agent-auth-service", version: "0.1.0", docs: "/docs", openapi: "/openapi.json", health: "/health" }
  },
  "GET /health": {
    summary: "Health check",
    description: "Answers 200 `{ status: \"ok\" }` when the database and Redis answer, else 503 `{ status: \"degraded\", failing }`. For load balancers; no key, no rate limit.",
    response: { status: "ok" }
  },
  "GET /health/live": {
    summary: "Liveness probe",
    description: "Answers 200 `{ status: \"ok\", version }` whenever the process serves requests; it checks no dependency, so an orchestrator restarts the process only when it is stuck, not when the database is down. No key, no rate limit.",
    response: { status: "ok", version: "0.1.0" }
  },
  "GET /health/ready": {
    summary: "Readiness probe",
    description: "Whether this instance should receive traffic: 200 `ready` when the database and Redis answer, every migration is applied and (embedded) the data directory is still there and writable; otherwise 503 with the same body, `not_ready`, each check's state and the `pendingMigrations` (run `agent-auth migrate`). `migrations: \"unknown\"` when the database could not be asked. `commit` and `builtAt` say which build runs (`builtAt` is `source` when run from source). For a load balancer's health check or a Kubernetes readiness probe; no key, no rate limit.",
    response: { status: "ready", version: "0.1.0", commit: "54b629aa9514fe74d2efef4cec274a7d7ce32a6a", builtAt: "2026-11-27T09:00:00.000Z", checks: { db: "ok", redis: "ok", migrations: "ok" } }
  },
  "GET /.well-known/jwks.json": {
    summary: "Grant-token signing keys (JWKS)",
    description: "The RSA public keys that verify grant tokens (RS256; `kid` = RFC 7638 thumbprint): the current key and the previous ones still within their verification window, so a key rotation never breaks a token. Cache it (max-age 300). No key, no rate limit.",
    response: { keys: [{ kty: "RSA", kid: "NjU4MTA", n: "0vx7agoebGcQSuu…", e: "AQAB", alg: "RS256", use: "sig" }] }
  },
  "GET /metrics": {
    summary: "Prometheus metrics",
    description: "Request counts and latencies, webhook and worker figures in the Prometheus text format. When `METRICS_TOKEN` is configured, send it as `Authorization: Bearer <token>` (401 otherwise).",
    response: "# TYPE http_requests_total counter\nhttp_requests_total{route=\"/v1/agents\",status=\"201\"} 12\n"
  },
  "GET /openapi.json": {
    summary: "This document",
    description: "The OpenAPI 3.1 description of the interface, the one `/docs` renders.",
    response: { openapi: "3.1.0", info: { title: "agent-auth-service", version: "1.0.0" }, paths: {} }
  },
  "GET /favicon.ico": { summary: "Favicon (empty)", description: "Answers 204 so browsers on the consent page do not log a 404." },

  "POST /v1/signup": {
    summary: "Sign up a developer",
    description: "Creates your developer account and answers its API key, **shown once**: store it on your backend. No key needed. `mode: \"sandbox\"` gives an `sk_test_` key whose authorization requests skip the consent page (the code comes back at once), for trying the flow with curl. 409 when the email is taken. An operator may close sign-up (`SIGNUP_ENABLED=false`): it then answers 403 `SIGNUP_DISABLED` and accounts are created with `agent-auth developers create`.",
    request: { name: "Acme Assistants", email: "dev@acme.example", mode: "sandbox" },
    response: { ...developer, apiKey: API_KEY }
  },
  "GET /v1/me": { summary: "Read your account", description: "The developer the API key belongs to. Never shows the key.", response: developer },
  "PATCH /v1/me": {
    summary: "Update your account",
    description: "Changes the name or `fidoRequired`. With `fidoRequired: true` every consent approval needs a passkey assertion (`POST /v1/webauthn/assert/verify`); the consent page's plain Approve answers 403 `FIDO_REQUIRED`.",
    request: { fidoRequired: true },
    response: { ...developer, fidoRequired: true }
  },
  "POST /v1/keys/rotate": {
    summary: "Rotate the API key",
    description: "Issues a new key and invalidates the old one at once, on every instance (no overlap: deploy the new key right away). The new key is shown once.",
    response: { apiKey: "sk_test_9fK2LmQ7xR4tVb8nWc3yZp1dAe6Hs0Jk2Lq5Nr8Tu1W", rotatedAt: T }
  },

  "GET /v1/domains": { summary: "List your domains", description: "Every domain you added, verified or not.", response: { domains: [{ ...domain, verified: true, verifiedAt: T }] } },
  "POST /v1/domains": {
    summary: "Add a domain",
    description: "Answers the TXT record to publish: `_agent-auth.<domain>` with value `agent-auth-verify=<verificationToken>`; then call verify. 409 when you added it already or another developer verified it.",
    request: { domain: "auth.acme.example" },
    response: {
      ...domain, verificationToken: "4c1f0e9a7b2d", instructions: "Add a TXT record _agent-auth.auth.acme.example with the value agent-auth-verify=4c1f0e9a7b2d, then POST /v1/domains/{id}/verify",
      verificationRecord: { type: "TXT", name: "_agent-auth.auth.acme.example", value: "agent-auth-verify=4c1f0e9a7b2d" }
    }
  },
  "POST /v1/domains/{id}/verify": {
    summary: "Verify a domain",
    description: "Looks up the TXT record now. 422 `VERIFICATION_FAILED` when no record matches (DNS may take minutes to propagate: call again), 502 `DNS_UNAVAILABLE` when the resolver fails, 409 when another developer verified the domain first.",
    response: { ...domain, verified: true, verifiedAt: T }
  },
  "DELETE /v1/domains/{id}": { summary: "Remove a domain", description: "Removes the domain; another developer may then verify it." },

  "POST /v1/webhooks": {
    summary: "Register a webhook endpoint",
    description: "Subscribes a URL to event types (the catalogue is in this group's description; an unknown type answers 400 naming the valid ones). Answers the signing `secret` (`whsec_` + base64 of 32 bytes) **once**. In production the URL must be https and resolve to public addresses only. The number of endpoints is limited per plan (402 `PLAN_LIMIT_EXCEEDED`).",
    request: { url: "https://hooks.your-app.example/agent-auth", events: ["grant.created", "grant.revoked"] },
    response: { ...endpoint, secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw8ysrA0bwiy4=" }
  },
  "GET /v1/webhooks": { summary: "List webhook endpoints", description: "Your endpoints, newest first, without their secrets.", response: { webhooks: [endpoint] } },
  "DELETE /v1/webhooks/{id}": { summary: "Delete a webhook endpoint", description: "Stops deliveries to the endpoint: its pending deliveries become `failed` (`endpoint deleted`)." },
  "GET /v1/webhooks/{id}/deliveries": {
    summary: "Delivery history",
    description: "The endpoint's deliveries, newest first, with attempts (every send counts, the first included), the last error and answer status, and when the next attempt is due. Filter by `status`; page with `cursor` / `limit` (1–100).",
    response: { deliveries: [delivery], nextCursor: null }
  },
  "POST /v1/webhooks/{id}/deliveries/{deliveryId}/retry": {
    summary: "Retry one failed delivery",
    description: "Re-queues a `failed` delivery with a fresh set of attempts, sent at once. 409 when it is not failed. For many at once use replay.",
    response: { ...delivery, status: "pending", attempts: 0, nextAttemptAt: T }
  },
  "POST /v1/webhooks/{id}/rotate-secret": {
    summary: "Rotate the signing secret",
    description: "Answers a new secret (shown once). The replaced secret stays valid until `previousSecretExpiresAt` (24 hours): until then `webhook-signature` carries one `v1,` entry per secret and `X-Service-Signature` the new secret's, so switch your receiver within the day.",
    response: { id: WEBHOOK, secret: "whsec_pXb2kM1hT0cFf4Zt1yS7rN6qW3eA9vD5uJ8oL2iK0gE=", previousSecretExpiresAt: "2026-11-25T09:30:00.000Z" }
  },
  "POST /v1/webhooks/{id}/replay": {
    summary: "Replay deliveries in bulk",
    description: "Re-queues the endpoint's deliveries created in [`since`, `until`) (`until` defaults to now) with status `failed` (default) or `delivered`, oldest first, at most 1,000 per call; `nextSince` is where to continue, null when done. Idempotent: re-queued deliveries are pending, so calling again re-queues nothing twice. The same event id is sent again: deduplicate on `webhook-id`. Dates are ISO 8601 (a day alone means its midnight UTC); a bad date or `until` ≤ `since` answers 400.",
    request: { since: "2026-11-24T00:00:00Z", until: "2026-11-24T12:00:00Z", status: "failed" },
    response: { requeued: 42, nextSince: null }
  }
}
