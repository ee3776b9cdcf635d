/**
 * The lean path (issue 27): GET /health and GET /health/live answered straight from Bun's fetch,
 * without HttpApiBuilder's per-request pipeline (router, decode/encode, middleware), which cost
 * about four fifths of a health probe. Everything a client or an operator sees is the same as the
 * API's answer (test/platform/lean-paths.test.ts compares them): the same probes (./Probes.ts),
 * body, status, content-type, x-request-id (reused when well-formed), nosniff, the request metric
 * and the access line. Both routes are rate-limit exempt, so the gate would neither count nor
 * refuse them. Anything else returns undefined and goes through the API.
 */
import { Effect, FiberRef, Option, Runtime } from "effect"
import pkg from "../../package.json" with { type: "json" }
import { recordRequest } from "../platform/AccessLog.ts"
import { newRequestId } from "../platform/HttpEnvelope.ts"
import { Log } from "../platform/Log.ts"
import { Metrics } from "../platform/Metrics.ts"
import { healthAnswer, makeProbes } from "./Probes.ts"

export type LeanPath = (request: Request) => Promise<Response> | undefined

const pathOf = (url: string): string => {
  const start = url.indexOf("/", url.indexOf("//") + 2)
  if (start === -1) return "/"
  const q = url.indexOf("?", start)
  return q === -1 ? url.slice(start) : url.slice(start, q)
}

const LIVE_BODY = JSON.stringify({ status: "ok", version: pkg.version })

/** `fallback` answers through the API when the lean path cannot (a defect in the probes). */
export const makeLeanPath = (rt: Runtime.Runtime<never>, fallback: (request: Request) => Promise<Response>) =>
  Effect.gen(function*() {
    const probes = yield* makeProbes
    const metrics = yield* Metrics
    const log = Option.getOrUndefined(yield* Effect.serviceOption(Log))
    // as the envelope does: log lines written while serving carry the request id, unless logging is off
    const annotate = (yield* FiberRef.get(FiberRef.currentMinimumLogLevel))._tag !== "None"
    const run = Runtime.runPromise(rt)
    const answer = (route: string, requestId: string, started: number, status: number, body: string) => {
      recordRequest(metrics, log, "GET", route, { requestId, route }, status, (performance.now() - started) / 1000)
      return new Response(body, {
        status,
        headers: {
          "content-type": "application/json",
          "content-length": String(Buffer.byteLength(body)),
          "x-request-id": requestId,
          "x-content-type-options": "nosniff"
        }
      })
    }
    const lean: LeanPath = (request) => {
      if (request.method !== "GET") return undefined
      const path = pathOf(request.url)
      if (path !== "/health" && path !== "/health/live") return undefined
      const started = performance.now()
      const requestId = newRequestId(request.headers.get("x-request-id") ?? undefined)
      if (path === "/health/live") return Promise.resolve(answer(path, requestId, started, 200, LIVE_BODY))
      return run(annotate ? Effect.annotateLogs(probes, "requestId", requestId) : probes).then(
        (result) => {
          const { status, body } = healthAnswer(result)
          return answer(path, requestId, started, status, JSON.stringify(body))
        },
        () => fallback(request)
      )
    }
    return lean
  })
