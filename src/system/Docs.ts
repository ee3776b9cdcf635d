/**
 * Summaries, descriptions and examples of the system routes (health, keys, metrics, this
 * document); SystemApi carries them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"

export const SYSTEM_DOCS = {
  root: {
    summary: "Where to start",
    description: "Points to this documentation (`/docs`), the OpenAPI document and the health check, so a newcomer who opens the base URL knows where to go. No key, no rate limit.",
    response: { name: "agent-auth-service", version: "0.1.0", docs: "/docs", openapi: "/openapi.json", health: "/health" }
  },
  health: {
    summary: "Health check",
    description: "Answers 200 `{ status: \"ok\" }` when the database and Redis answer, else 503 `{ status: \"degraded\", failing }`. For load balancers; no key, no rate limit.",
    response: { status: "ok" }
  },
  live: {
    summary: "Liveness probe",
    description: "Answers 200 `{ status: \"ok\", version }` whenever the process serves requests; it checks no dependency, so an orchestrator restarts the process only when it is stuck, not when the database is down. No key, no rate limit.",
    response: { status: "ok", version: "0.1.0" }
  },
  ready: {
    summary: "Readiness probe",
    description: "Whether this instance should receive traffic: 200 `ready` when the database and Redis answer, every migration is applied and (embedded) the data directory is still there and writable; otherwise 503 with the same body, `not_ready`, each check's state and the `pendingMigrations` (run `agent-auth migrate`). `migrations: \"unknown\"` when the database could not be asked. `commit` and `builtAt` say which build runs (`builtAt` is `source` when run from source). For a load balancer's health check or a Kubernetes readiness probe; no key, no rate limit.",
    response: { status: "ready", version: "0.1.0", commit: "54b629aa9514fe74d2efef4cec274a7d7ce32a6a", builtAt: "2026-11-27T09:00:00.000Z", checks: { db: "ok", redis: "ok", migrations: "ok" } }
  },
  jwks: {
    summary: "Grant-token signing keys (JWKS)",
    description: "The RSA public keys that verify grant tokens (RS256; `kid` = RFC 7638 thumbprint): the current key and the previous ones still within their verification window, so a key rotation never breaks a token. Cache it (max-age 300). No key, no rate limit.",
    response: { keys: [{ kty: "RSA", kid: "NjU4MTA", n: "0vx7agoebGcQSuu…", e: "AQAB", alg: "RS256", use: "sig" }] }
  },
  metrics: {
    summary: "Prometheus metrics",
    description: "Request counts and latencies, webhook and worker figures in the Prometheus text format. When `METRICS_TOKEN` is configured, send it as `Authorization: Bearer <token>` (401 otherwise).",
    response: "# TYPE http_requests_total counter\nhttp_requests_total{route=\"/v1/agents\",status=\"201\"} 12\n"
  },
  openapi: {
    summary: "This document",
    description: "The OpenAPI 3.1 description of the interface, the one `/docs` renders.",
    response: { openapi: "3.1.0", info: { title: "agent-auth-service", version: "1.0.0" }, paths: {} }
  },
  favicon: { summary: "Favicon (empty)", description: "Answers 204 so browsers on the consent page do not log a 404." }
} satisfies Record<string, OperationDoc>
