/**
 * Traces: with OTEL_EXPORTER_OTLP_ENDPOINT set, Effect's own spans (one per request from the HTTP
 * server, one per SQL statement from @effect/sql, and any Effect.withSpan) are exported over
 * OTLP/HTTP (JSON) to `<endpoint>/v1/traces` by @effect/opentelemetry's OTLP exporter, which needs
 * no OpenTelemetry SDK. Unset, tracing stays disabled: spans are then pure cost (2-8% measured).
 *
 * Telemetry carries no capability (decisions §19, revised): whoever reads the traces must not be
 * able to act as a caller. The platform's request span records the full URL (a consent request id
 * in the path, an OIDC `code` and `state` in the query) and every header; so the tracer is wrapped:
 * a request span keeps only an allow-list (method, route template, status, user agent, request id)
 * and is named by its route template (`GET /v1/grants/:id`); every other span, event and error
 * message is scrubbed of consent request ids and of anything shaped like a code, state, token or key.
 */
import { FetchHttpClient } from "@effect/platform"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import { Cause, Effect, Exit, Layer, Tracer } from "effect"
import pkg from "../../package.json" with { type: "json" }

const REQUEST_ATTRIBUTES: Readonly<Record<string, string>> = {
  "http.request.method": "http.request.method",
  "http.route": "http.route",
  "http.response.status_code": "http.response.status_code",
  "user_agent.original": "user_agent.original",
  "http.response.header.x-request-id": "request.id"
}
/** what no span keeps, whoever set it */
const NEVER = /^(url\.|http\.request\.header\.|http\.response\.header\.|http\.request\.body|client\.address)/

/**
 * Consent request ids (`areq_` + ULID), and any run of 32+ base64/base64url characters: our codes,
 * `state`s, session tokens, API and SCIM keys, webhook secrets and JWT segments are all such runs.
 */
const SECRETS = /\bareq_[0-9A-Za-z]+|[A-Za-z0-9+/_-]{32,}={0,2}/g
export const scrub = (text: string): string => text.replace(SECRETS, "[redacted]")
const scrubValue = (value: unknown): unknown => typeof value === "string" ? scrub(value) : value

/** A failure's name and scrubbed message, without the rendered cause (it prints every field). */
const scrubExit = (exit: Exit.Exit<unknown, unknown>): Exit.Exit<unknown, unknown> => {
  if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return exit
  const first = Cause.prettyErrors(exit.cause)[0]
  const error = new Error(scrub(first?.message ?? "failed"))
  error.name = first?.name ?? "Error"
  error.stack = ""
  return Exit.die(error)
}

const guardSpan = (span: Tracer.Span): Tracer.Span => {
  const server = span.kind === "server"
  const set = span.attribute.bind(span)
  const end = span.end.bind(span)
  const event = span.event.bind(span)
  const attributes = span.attributes as Map<string, unknown>
  Object.assign(span, {
    attribute: (key: string, value: unknown) => {
      if (server) {
        const kept = REQUEST_ATTRIBUTES[key]
        if (kept !== undefined) set(kept, value)
      } else if (!NEVER.test(key)) set(key, scrubValue(value))
    },
    event: (name: string, startTime: bigint, eventAttributes?: Record<string, unknown>) =>
      event(scrub(name), startTime, eventAttributes === undefined ? undefined : Object.fromEntries(
        Object.entries(eventAttributes).filter(([key]) => !NEVER.test(key)).map(([key, value]) => [key, scrubValue(value)])
      )),
    end: (endTime: bigint, exit: Exit.Exit<unknown, unknown>) => {
      if (server) {
        // the span is exported at its end: named then by the route the router matched
        const route = attributes.get("http.route")
        ;(span as { name: string }).name = `${attributes.get("http.request.method") ?? "HTTP"} ${typeof route === "string" ? route : "unmatched"}`
      }
      end(endTime, scrubExit(exit))
    }
  })
  return span
}

/** The tracer with every span guarded as above. */
export const guardTracer = (inner: Tracer.Tracer): Tracer.Tracer =>
  Tracer.make({
    span: (name, parent, context, links, startTime, kind, options) =>
      guardSpan(inner.span(scrub(name), parent, context, links, startTime, kind, options)),
    context: (f, fiber) => inner.context(f, fiber)
  })

export const tracingLayer = (endpoint: string | undefined): Layer.Layer<never> =>
  endpoint === undefined
    ? Layer.setTracerEnabled(false)
    : Layer.unwrapScoped(Effect.map(
      OtlpTracer.make({
        url: `${endpoint}/v1/traces`,
        resource: { serviceName: "agent-auth-service", serviceVersion: pkg.version },
        exportInterval: "2 seconds",
        shutdownTimeout: "3 seconds"
      }),
      (tracer) => Layer.setTracer(guardTracer(tracer))
    )).pipe(Layer.provide(OtlpSerialization.layerJson), Layer.provide(FetchHttpClient.layer))
