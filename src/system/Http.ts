import { HttpApiBuilder, HttpServerRequest, HttpServerResponse, OpenApi } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { Config } from "../Config.ts"
import { bearerOf } from "../platform/Auth.ts"
import { Unauthorized } from "../platform/Errors.ts"
import { Keys } from "../platform/Keys.ts"
import { Metrics } from "../platform/Metrics.ts"
import { timingSafeEqual } from "node:crypto"
import pkg from "../../package.json" with { type: "json" }
import { buildInfo } from "../platform/BuildInfo.ts"
import { Dependencies } from "../platform/Dependencies.ts"
import { healthAnswer, makeProbes } from "./Probes.ts"
import { scrapeGauges } from "./Scrape.ts"

export const SystemHttp = HttpApiBuilder.group(Api, "system", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* Keys
    const metrics = yield* Metrics
    const config = yield* Config
    // the document names this service's own address as its server (the generated one says "/")
    const spec = { ...OpenApi.fromApi(Api), servers: [{ url: config.publicBaseUrl, description: "this service" }] }
    const probes = yield* makeProbes
    const dependencies = yield* Dependencies
    const { commit, builtAt } = buildInfo()
    // ready: the database and Redis answer and every embedded migration is applied
    const ready = Effect.gen(function*() {
      const [reachable, pending] = yield* Effect.all([
        dependencies.probe,
        dependencies.pendingMigrations.pipe(Effect.option)
      ], { concurrency: 2 })
      const checks = {
        db: reachable.db ? "ok" as const : "unavailable" as const,
        redis: reachable.redis ? "ok" as const : "unavailable" as const,
        migrations: pending._tag === "None" ? "unknown" as const : pending.value.length === 0 ? "ok" as const : "pending" as const
      }
      const isReady = checks.db === "ok" && checks.redis === "ok" && checks.migrations === "ok"
      const body = {
        status: isReady ? "ready" as const : "not_ready" as const,
        version: pkg.version,
        commit,
        builtAt,
        checks,
        ...(pending._tag === "Some" && pending.value.length > 0 ? { pendingMigrations: pending.value } : {})
      }
      return isReady ? body : HttpServerResponse.unsafeJson(body, { status: 503 }) as any
    })
    return handlers
      .handle("health", () =>
        Effect.map(probes.effect, (result) => {
          const { status, body } = healthAnswer(result)
          return status === 200 ? body as { status: "ok" } : HttpServerResponse.unsafeJson(body, { status }) as any
        }))
      .handle("jwks", () =>
        Effect.succeed(HttpServerResponse.unsafeJson(keys.jwks, { headers: { "cache-control": "public, max-age=300" } }) as any))
      .handle("metrics", () =>
        Effect.gen(function*() {
          if (config.metricsToken !== undefined) {
            const request = yield* HttpServerRequest.HttpServerRequest
            const given = Buffer.from(bearerOf(request.headers["authorization"]) ?? "")
            const expected = Buffer.from(config.metricsToken)
            if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
              return yield* Effect.fail(new Unauthorized({ message: "Metrics token required" }))
            }
          }
          return HttpServerResponse.text(metrics.render(yield* scrapeGauges), { contentType: "text/plain; version=0.0.4" }) as any
        }))
      .handle("root", () =>
        Effect.succeed({ name: "agent-auth-service", version: pkg.version, docs: "/docs", openapi: "/openapi.json", health: "/health" }))
      .handle("live", () => Effect.succeed({ status: "ok" as const, version: pkg.version }))
      .handle("ready", () => ready)
      .handle("openapi", () => Effect.succeed(spec))
      .handle("favicon", () => Effect.succeed(HttpServerResponse.empty({ status: 204, headers: { "cache-control": "public, max-age=86400" } })))
  }))
