/**
 * Traces: with OTEL_EXPORTER_OTLP_ENDPOINT set, Effect's own spans (one per request from the HTTP
 * server, one per SQL statement from @effect/sql, and any Effect.withSpan) are exported over
 * OTLP/HTTP (JSON) to `<endpoint>/v1/traces` by @effect/opentelemetry's OTLP exporter, which needs
 * no OpenTelemetry SDK. Unset, tracing stays disabled: spans are then pure cost (2-8% measured).
 */
import { FetchHttpClient } from "@effect/platform"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import { Layer } from "effect"
import pkg from "../../package.json" with { type: "json" }

export const tracingLayer = (endpoint: string | undefined): Layer.Layer<never> =>
  endpoint === undefined
    ? Layer.setTracerEnabled(false)
    : OtlpTracer.layer({
      url: `${endpoint}/v1/traces`,
      resource: { serviceName: "agent-auth-service", serviceVersion: pkg.version },
      exportInterval: "2 seconds",
      shutdownTimeout: "3 seconds"
    }).pipe(Layer.provide(OtlpSerialization.layerJson), Layer.provide(FetchHttpClient.layer))
