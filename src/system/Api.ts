/** Health, JWKS, metrics and the OpenAPI document. */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { InternalError, RateLimitUnavailable, RateLimited, Unauthorized } from "../platform/Errors.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { documented } from "../platform/OperationDocs.ts"
import { SYSTEM_DOCS } from "./Docs.ts"

export const Health = Schema.Struct({
  status: Schema.Literal("ok", "degraded"),
  failing: Schema.optional(Schema.Array(Schema.Literal("db", "redis")))
})

/** GET /health/live and /health/ready (ours): for a load balancer or an orchestrator */
export const Liveness = Schema.Struct({ status: Schema.Literal("ok"), version: Schema.String })
export const Readiness = Schema.Struct({
  status: Schema.Literal("ready", "not_ready"),
  version: Schema.String,
  /** what runs (decisions §10, revised): the git commit and the build time ("source" when not compiled) */
  commit: Schema.String,
  builtAt: Schema.String,
  checks: Schema.Struct({
    db: Schema.Literal("ok", "unavailable"),
    redis: Schema.Literal("ok", "unavailable"),
    migrations: Schema.Literal("ok", "pending", "unknown")
  }),
  pendingMigrations: Schema.optional(Schema.Array(Schema.String))
})

export const Jwks = Schema.Struct({
  keys: Schema.Array(Schema.Struct({
    kty: Schema.String,
    kid: Schema.String,
    n: Schema.String,
    e: Schema.String,
    alg: Schema.String,
    use: Schema.String
  }))
})

/** GET / (ours): where to go from the root */
export const Root = Schema.Struct({
  name: Schema.String,
  version: Schema.String,
  docs: Schema.String,
  openapi: Schema.String,
  health: Schema.String
})

export class SystemApi extends HttpApiGroup.make("system", { topLevel: true })
  .add(HttpApiEndpoint.get("root", "/").addSuccess(Root).annotate(RatePolicy, { exempt: true }))
  .add(
    HttpApiEndpoint.get("health", "/health")
      .addSuccess(Health)
      .addError(Health.pipe(HttpApiSchema.asEmpty({ status: 503, decode: () => ({ status: "degraded" as const }) })), { status: 503 })
      .annotate(RatePolicy, { exempt: true })
  )
  .add(HttpApiEndpoint.get("live", "/health/live").addSuccess(Liveness).annotate(RatePolicy, { exempt: true }))
  .add(
    HttpApiEndpoint.get("ready", "/health/ready")
      .addSuccess(Readiness)
      .addError(Readiness, { status: 503 })
      .annotate(RatePolicy, { exempt: true })
  )
  .add(
    HttpApiEndpoint.get("jwks", "/.well-known/jwks.json")
      .addSuccess(Jwks)
      .annotate(RatePolicy, { exempt: true })
  )
  .add(
    HttpApiEndpoint.get("metrics", "/metrics")
      .addSuccess(Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/plain; version=0.0.4" })))
      .addError(Unauthorized)
      .addError(RateLimited)
      .addError(RateLimitUnavailable)
      .addError(InternalError)
      // a scrape must answer while Redis is away (that is when the dashboard is needed): counted in process then
      .annotate(RatePolicy, { fallbackInProcess: true })
  )
  .add(
    HttpApiEndpoint.get("openapi", "/openapi.json")
      .addSuccess(Schema.Unknown)
      .addError(RateLimited)
      .addError(RateLimitUnavailable)
      .addError(InternalError)
  )
  // browsers ask for it on every page (the consent page): answered empty rather than 404
  .add(HttpApiEndpoint.get("favicon", "/favicon.ico").addSuccess(Schema.Void, { status: 204 }).annotate(RatePolicy, { exempt: true }))
  .pipe(documented(SYSTEM_DOCS))
{}
