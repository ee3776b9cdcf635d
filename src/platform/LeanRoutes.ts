/**
 * Light API-key reads answered outside HttpApiBuilder's per-request pipeline (issue 27), through
 * the same pieces the API path uses, so a client, an operator and the counters see the same thing:
 * the gate's admission (makeAdmission: authentication, every window in one counter call, the
 * 401/429/503 refusals and the rate-limit headers), the capability's own service call, the
 * endpoint's own success schema (encoded once per response, as HttpApi does), the one error shape,
 * the request id, the request metric and access line (recordRequest), and the common headers.
 *
 * What the lean path does not recognise exactly (another method or spelling of the path, a query
 * string, a body on a GET, an id with characters the router would decode) returns undefined before
 * anything is counted, and the API answers it. A POST's body is read by the API's own reader
 * (Body.ts); a body it refuses, or one the endpoint's payload schema does not decode, is handed
 * over to the API with its verdict, still uncounted, so the API answers those errors as it always
 * has. test/platform/lean-reads.test.ts compares the two paths' answers.
 */
import { type HttpApi, HttpApiSchema, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Context, Effect, Exit, FiberRef, Option, Runtime, Schema } from "effect"
import { Config } from "../Config.ts"
import { recordRequest } from "./AccessLog.ts"
import type { GateState } from "./Auth.ts"
import type { BodyVerdict } from "./Body.ts"
import { causeResponse, envelopeCauseResponse, errorResponse, newRequestId } from "./HttpEnvelope.ts"
import { Log } from "./Log.ts"
import { Metrics } from "./Metrics.ts"
import { makeAdmission, UNDECIDED } from "./Admission.ts"
import { clientAddress, compileRoutes, PeerAddress } from "./RateLimit.ts"
import { withCommonHeaders } from "./SecurityHeaders.ts"

/** A declared error of the endpoint (an ApiError): its class carries the status. */
interface DeclaredError {
  readonly code: string
  readonly message: string
  readonly details?: ReadonlyArray<{ readonly path: string; readonly message: string }>
}

export interface LeanRoute {
  /** GET (default) or POST; the endpoint must authenticate its caller (API key or grant token) */
  readonly method?: "GET" | "POST"
  /** the endpoint's path as declared, e.g. `/v1/consent-bundles/:id` */
  readonly path: string
  /** a POST's body: decoded by the endpoint's payload schema (default), or its text as the handler reads it */
  readonly body?: "payload" | "text"
  /**
   * the handler's services read the request from the context, as on the API path (the policies'
   * `context.request`, the anomaly rules' address): the request and the peer address are put in the
   * fiber's context. Not free (a copy of the runtime's whole context per request, ~30 µs measured),
   * so only where something reads them.
   */
  readonly readsRequest?: boolean
  /**
   * the handler's work (the capability's own function) for the caller as the gate found it (its
   * developer, or its grant token's claims), the path params and the payload (or body text);
   * for a route with `answer`, that answer
   */
  readonly handle?: (caller: GateState, params: Readonly<Record<string, string>>, payload: any) => Effect.Effect<unknown, DeclaredError>
  /**
   * the same answer computed without effects, where the handler's work is only the caller's own
   * record (GET /v1/me): with the gate's fiberless admission, such a request runs no fiber at all
   */
  readonly answer?: (caller: GateState) => unknown
  /**
   * the commonest answer as a promise, run without a fiber (a read straight through the pool); it
   * resolves undefined, or rejects, for anything else (not found, a database error), which `handle`
   * then answers as the API does
   */
  readonly answerNow?: (caller: GateState, params: Readonly<Record<string, string>>) => Promise<unknown>
}

/** the socket peer, asked only when a lean route is taken (Bun's requestIP is not free) */
export type PeerOf = () => string | undefined

export interface LeanRoutesOptions {
  /** the API's body reader (Body.ts makeBodyReader) */
  readonly readBody: (request: Request) => Promise<BodyVerdict | undefined>
  /** answers through the API a request whose body was already read (its verdict handed over) */
  readonly viaApi: (request: Request, peer: string | undefined, body: BodyVerdict | undefined) => Promise<Response>
}

/** an id as a client sends it: anything else (percent-encoding, dots) goes to the router */
const PLAIN_PARAM = /^[A-Za-z0-9_-]{1,200}$/

const pathAndQuery = (url: string) => {
  const start = url.indexOf("/", url.indexOf("//") + 2)
  return start === -1 ? "/" : url.slice(start)
}

/** The status an ApiError's class is annotated with (HttpApi answers with it). */
const statusOf = (error: DeclaredError): number => {
  const schema = (error as unknown as { constructor?: Schema.Schema.Any }).constructor
  return schema?.ast === undefined ? 500 : HttpApiSchema.getStatusErrorAST(schema.ast)
}

/**
 * Serves `routes` of `api`; answers undefined for any request that is not exactly one of them.
 * Built inside the service's runtime (its services); `rt` runs each request's effect.
 */
export const makeLeanRoutes = (api: HttpApi.HttpApi.Any, routes: ReadonlyArray<LeanRoute>, rt: Runtime.Runtime<never>, options: LeanRoutesOptions) =>
  Effect.gen(function*() {
    const admission = yield* makeAdmission
    const trust = (yield* Config).trustProxy
    const metrics = yield* Metrics
    const log = Option.getOrUndefined(yield* Effect.serviceOption(Log))
    // as the envelope does: log lines written while serving carry the request id, unless logging is off
    const annotate = (yield* FiberRef.get(FiberRef.currentMinimumLogLevel))._tag !== "None"
    const compiled = compileRoutes(api)
    const table = routes.map((lean) => {
      const method = lean.method ?? "GET"
      const route = compiled.find((r) => r.method === method && r.path === lean.path && (r.apiKey || r.policy.grantToken === true))
      if (route === undefined) throw new Error(`lean route ${method} ${lean.path}: no authenticated endpoint with that path`)
      const endpoint = route.endpoint as unknown as {
        successSchema: Schema.Schema<unknown, unknown>
        payloadSchema: Option.Option<Schema.Schema<unknown, unknown>>
      }
      // per process: the payload's decoder, compiled once
      const decode = lean.body === "text"
        ? Option.some((text: string) => Option.some<unknown>(text))
        : Option.map(endpoint.payloadSchema, (schema) => {
          const decodeJson = Schema.decodeUnknownOption(schema)
          return (text: string) => decodeJson(JSON.parse(text))
        })
      const answer = lean.answer
      const handle = lean.handle ?? (answer !== undefined ? (caller: GateState) => Effect.sync(() => answer(caller)) : undefined)
      if (handle === undefined) throw new Error(`lean route ${method} ${lean.path}: neither handle nor answer`)
      return { lean, handle, route, method, segments: lean.path.split("/"), decode, status: HttpApiSchema.getStatusSuccessAST(endpoint.successSchema.ast) }
    })
    type Entry = (typeof table)[number]
    const find = (method: string, path: string) => {
      const parts = path.split("/")
      for (const entry of table) {
        if (entry.method !== method || entry.segments.length !== parts.length) continue
        let params: Record<string, string> | undefined = {}
        for (let i = 1; i < parts.length && params !== undefined; i++) {
          const want = entry.segments[i]!
          const got = parts[i]!
          if (want.startsWith(":")) {
            if (PLAIN_PARAM.test(got)) params[want.slice(1)] = got
            else params = undefined
          } else if (want !== got) params = undefined
        }
        if (params !== undefined) return { entry, params }
      }
      return undefined
    }
    const run = Runtime.runPromiseExit(rt)

    const serve = (request: Request, peerOf: PeerOf, entry: Entry, params: Record<string, string>, payload: unknown, started: number, path: string) => {
      const headers = request.headers
      const requestId = newRequestId(headers.get("x-request-id") ?? undefined)
      // the envelope's record of the request, as the gate fills it on the API path
      const peer = peerOf()
      const input = { authorization: headers.get("authorization") ?? undefined, forwardedFor: headers.get("x-forwarded-for") ?? undefined, peer }
      const state: GateState = { requestId, route: entry.route.path, client: () => clientAddress(trust, peer, input.forwardedFor) }
      // built only when a fiber runs (the fiberless admission and answer need neither), and only once
      // admitted: the handler reads the caller from `state`, which the admission fills
      const handled = () => Effect.flatMap(Effect.exit(entry.handle(state, params, payload)), (result) => {
        if (Exit.isSuccess(result)) return Effect.succeed(result.value)
        const failure = Cause.failureOption(result.cause)
        if (Option.isNone(failure)) return causeResponse(result.cause, requestId, path)
        const e = failure.value
        return Effect.succeed(errorResponse(statusOf(e), e.code, e.message, requestId, undefined, e.details))
      })
      const admitted = () => Effect.flatMap(Effect.exit(admission.admit(entry.route, input, state)), (exit) =>
        // a defect in the gate (the key's lookup with the database away) as the envelope answers it
        Exit.isFailure(exit)
          ? envelopeCauseResponse(exit.cause, requestId, path)
          : exit.value !== undefined
          ? Effect.succeed(exit.value)
          : handled())
      // the effect in the service's runtime: what services read of the request on the API path (the
      // policies' and anomaly rules' address and user agent) in its context for the routes that read it
      const runEffect = (effect: Effect.Effect<unknown>) => {
        let provided = effect
        if (entry.lean.readsRequest === true) {
          let context = Context.make(HttpServerRequest.HttpServerRequest, HttpServerRequest.fromWeb(request))
          if (peer !== undefined) context = Context.add(context, PeerAddress, peer)
          provided = Effect.provide(effect, context)
        }
        return run(annotate ? Effect.annotateLogs(provided, "requestId", requestId) : provided).then(finish)
      }
      const finish = (exit: Exit.Exit<unknown>) => {
        if (Exit.isSuccess(exit) && !HttpServerResponse.isServerResponse(exit.value)) {
          // the success: the handler's value is already the endpoint's wire shape (built by the
          // capability's view function), so it is written once, not re-encoded through the schema
          const body = JSON.stringify(exit.value)
          recordRequest(metrics, log, entry.method, path, state, entry.status, (performance.now() - started) / 1000)
          return new Response(body, {
            status: entry.status,
            headers: {
              "content-type": "application/json",
              "content-length": String(Buffer.byteLength(body)),
              "x-request-id": requestId,
              "x-content-type-options": "nosniff",
              ...state.rateHeaders
            }
          })
        }
        // a refusal or an error: through the envelope's own steps (rare; not worth a shortcut)
        let out = Exit.isSuccess(exit) ? exit.value as HttpServerResponse.HttpServerResponse : errorResponse(500, "INTERNAL_ERROR", "Internal error", requestId)
        out = HttpServerResponse.setHeader(out, "x-request-id", requestId)
        if (state.rateHeaders !== undefined) out = HttpServerResponse.setHeaders(out, state.rateHeaders)
        recordRequest(metrics, log, entry.method, path, state, out.status, (performance.now() - started) / 1000)
        return withCommonHeaders(request, HttpServerResponse.toWeb(out))
      }
      // the commonest request (a key the cache knows) is admitted without a fiber; the rest through the effect
      const decided = admission.admitNow(entry.route, input, state)
      if (decided === undefined) return runEffect(admitted())
      return decided.then((verdict): Response | Promise<Response> => {
        if (verdict === UNDECIDED) return runEffect(admitted())
        if (verdict !== undefined) return finish(Exit.succeed(verdict))
        const answerNow = entry.lean.answerNow
        if (answerNow !== undefined) {
          return answerNow(state, params).then(
            (value) => value === undefined ? runEffect(handled()) : finish(Exit.succeed(value)),
            () => runEffect(handled())
          )
        }
        const answer = entry.lean.answer
        if (answer === undefined) return runEffect(handled())
        try {
          return finish(Exit.succeed(answer(state)))
        } catch {
          // a defect: answered (and logged) by the envelope's steps, through the handler's effect
          return runEffect(handled())
        }
      })
    }

    return (request: Request, peerOf: PeerOf): Promise<Response> | undefined => {
      const method = request.method
      if (method !== "GET" && method !== "POST") return undefined
      // a keyed retry is the API path's: it keeps and replays answers (platform/Idempotency.ts)
      if (method === "POST" && request.headers.has("idempotency-key")) return undefined
      const path = pathAndQuery(request.url)
      if (path.includes("?")) return undefined
      const found = find(method, path)
      if (found === undefined) return undefined
      const started = performance.now()
      const { entry, params } = found
      if (entry.decode._tag === "None") {
        // no payload: a request that carries a body anyway is the API's to answer
        if (request.headers.has("content-length") || request.headers.has("transfer-encoding")) return undefined
        return serve(request, peerOf, entry, params, undefined, started, path)
      }
      const decode = entry.decode.value
      return options.readBody(request).then((verdict) => {
        let payload: Option.Option<unknown> = Option.none()
        if (verdict?._tag === "Text") {
          try {
            payload = decode(verdict.text)
          } catch {
            // not JSON: the API answers it
          }
        }
        return Option.isSome(payload)
          ? serve(request, peerOf, entry, params, payload.value, started, path)
          : options.viaApi(request, peerOf(), verdict)
      })
    }
  })
