/**
 * The envelope around every request: the request id (reused from a well-formed X-Request-Id),
 * one error shape `{ code, message, requestId }` for every error whatever produced it (handlers,
 * schema decoding, unknown routes, defects), metrics and the access log.
 *
 * Error bodies are rewritten here rather than in every handler, and only error responses are
 * touched, so the success path pays nothing.
 */
import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, FiberRef, LogLevel, Option } from "effect"
import { Config } from "../Config.ts"
import { CurrentGate, type GateState } from "./Auth.ts"
import { type DecodeIssue, plainIssues } from "./DecodeMessages.ts"
import { type BodyVerdict, PreReadBody } from "./Body.ts"
import { corsMethod, preflight, withCors } from "./Cors.ts"
import { newId } from "./Ids.ts"
import { recordRequest } from "./AccessLog.ts"
import { Dependencies } from "./Dependencies.ts"
import { Log } from "./Log.ts"
import { Metrics, UNMATCHED } from "./Metrics.ts"
import { type IsPage, PAGE_RETRY_AFTER_SECONDS, unavailablePage } from "./Pages.ts"
import { clientAddress, PeerAddress } from "./RateLimit.ts"

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

export const newRequestId = (incoming: string | undefined): string =>
  incoming !== undefined && REQUEST_ID.test(incoming) ? incoming : newId("req")

export const errorResponse = (
  status: number,
  code: string,
  message: string,
  requestId: string,
  headers?: Record<string, string>,
  details?: ReadonlyArray<{ path: string; message: string }>
) =>
  HttpServerResponse.unsafeJson(details ? { code, message, requestId, details } : { code, message, requestId }, {
    status,
    headers: { ...headers, "x-request-id": requestId }
  })

/** Bundles and offline sync answer malformed input with INVALID_REQUEST; the rest with BAD_REQUEST. */
export const validationCode = (path: string) =>
  path.startsWith("/v1/consent-bundles") || path.startsWith("/v1/audit/offline-sync") ? "INVALID_REQUEST" : "BAD_REQUEST"

const STATUS_CODES: Record<number, string> = {
  400: "BAD_REQUEST",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  405: "METHOD_NOT_ALLOWED",
  409: "CONFLICT",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
  422: "UNPROCESSABLE",
  429: "RATE_LIMITED",
  500: "INTERNAL_ERROR",
  503: "SERVICE_UNAVAILABLE"
}

/** Rewrites an error response's body into the one error shape. */
const normaliseError = (response: HttpServerResponse.HttpServerResponse, requestId: string, path: string) => {
  const body = response.body
  let parsed: any = undefined
  if (body._tag === "Uint8Array") {
    try {
      parsed = JSON.parse(new TextDecoder().decode(body.body))
    } catch {
      parsed = undefined
    }
  }
  const headers: Record<string, string> = {}
  for (const [k, v] of Object.entries(response.headers)) {
    if (k !== "content-type" && k !== "content-length") headers[k] = v
  }
  if (parsed && typeof parsed === "object" && parsed._tag === "HttpApiDecodeError") {
    const issues: ReadonlyArray<DecodeIssue> = Array.isArray(parsed.issues) ? parsed.issues : []
    const details = plainIssues(issues).slice(0, 20)
    const first = details[0]
    const message = first ? `Invalid request: ${first.path ? first.path + ": " : ""}${first.message}` : "Invalid request"
    return errorResponse(400, validationCode(path), message, requestId, headers, details)
  }
  if (parsed && typeof parsed === "object" && typeof parsed.code === "string" && typeof parsed.message === "string") {
    return errorResponse(response.status, parsed.code, parsed.message, requestId, headers, parsed.details)
  }
  const code = response.status === 400 ? validationCode(path) : STATUS_CODES[response.status] ?? (response.status >= 500 ? "INTERNAL_ERROR" : "BAD_REQUEST")
  const message = response.status === 404
    ? "No such route"
    : response.status >= 500
    ? "Internal error"
    : response.status === 400
    ? "Malformed request body"
    : "Request could not be processed"
  return errorResponse(response.status >= 500 ? (response.status === 503 ? 503 : 500) : response.status, code, message, requestId, headers)
}

/**
 * SCIM routes (decisions §11) answer RFC 7644 errors: `{ schemas, status: "<code>", scimType?,
 * detail }` as application/scim+json. A body that already has that shape (the directory's own
 * answers) is kept; anything else (the gate's 401/429, 413, decode errors, unknown routes, defects)
 * is first put in the one error shape, then translated.
 */
export const SCIM_ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error"
export const isScimPath = (path: string) => path.length >= 8 && path.slice(0, 8).toLowerCase() === "/scim/v2" && (path.length === 8 || path[8] === "/")
const scimError = (response: HttpServerResponse.HttpServerResponse, requestId: string, path: string) => {
  let parsed: any = undefined
  if (response.body._tag === "Uint8Array") {
    try {
      parsed = JSON.parse(new TextDecoder().decode(response.body.body))
    } catch {
      parsed = undefined
    }
  }
  const headers: Record<string, string> = {}
  for (const [k, v] of Object.entries(response.headers)) {
    if (k !== "content-type" && k !== "content-length") headers[k] = v
  }
  if (response.status === 401) headers["www-authenticate"] = "Bearer"
  if (!(parsed && Array.isArray(parsed.schemas))) {
    const normal = normaliseError(response, requestId, path)
    const body = normal.body._tag === "Uint8Array" ? JSON.parse(new TextDecoder().decode(normal.body.body)) : {}
    const scimType = normal.status === 400 ? "invalidSyntax" : undefined
    parsed = { schemas: [SCIM_ERROR_SCHEMA], status: String(normal.status), ...(scimType ? { scimType } : {}), detail: body.message ?? "Error" }
    return HttpServerResponse.unsafeJson(parsed, { status: normal.status, headers, contentType: "application/scim+json" })
  }
  return HttpServerResponse.unsafeJson(parsed, { status: response.status, headers, contentType: "application/scim+json" })
}

/**
 * OAuth routes (decisions §22.4) answer RFC 6749 §5.2 errors: `{ error, error_description }`, with
 * `Cache-Control: no-store`; the error is the OAuth code the handler failed with, else one from the
 * status (a 415 body is `invalid_request` at 400, so OAuth clients can parse it). A 401 to a caller
 * that tried Basic says so in `WWW-Authenticate`.
 */
export const isOAuthPath = (path: string) => path.startsWith("/oauth/") || path.startsWith("/.well-known/oauth-authorization-server")
const OAUTH_CODE = /^[a-z_]+$/
const oauthError = (response: HttpServerResponse.HttpServerResponse, requestId: string, path: string, basicTried: boolean, base = "") => {
  const normal = normaliseError(response, requestId, path)
  const body = normal.body._tag === "Uint8Array" ? JSON.parse(new TextDecoder().decode(normal.body.body)) : {}
  const status = normal.status === 415 ? 400 : normal.status
  const error = typeof body.code === "string" && OAUTH_CODE.test(body.code) ? body.code
    : status === 401 ? "invalid_client" : status === 404 ? "invalid_request" : status === 429 || status === 503 ? "temporarily_unavailable"
    : status >= 500 ? "server_error" : "invalid_request"
  const headers: Record<string, string> = { "cache-control": "no-store", pragma: "no-cache" }
  for (const [k, v] of Object.entries(normal.headers)) if (k !== "content-type" && k !== "content-length") headers[k] = v
  if (status === 401 && basicTried) {
    const developerId = path.match(/^\/oauth\/([A-Za-z0-9_]+)/)?.[1]
    headers["www-authenticate"] = `Basic realm="${base}/oauth/${developerId ?? ""}"`
  }
  return HttpServerResponse.unsafeJson(
    typeof body.message === "string" && body.message !== "" ? { error, error_description: body.message } : { error },
    { status, headers }
  )
}

/** Maps a failure or defect that escaped the API to a response without internals. */
const responseForCause = (cause: Cause.Cause<unknown>, requestId: string, path: string) => {
  if (isDatabaseUnavailable(cause)) {
    return errorResponse(503, "DATABASE_UNAVAILABLE", "Database unavailable; try again shortly", requestId)
  }
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const e = failure.value as { _tag?: string; reason?: string }
    if (e?._tag === "RouteNotFound") return errorResponse(404, "NOT_FOUND", "No such route", requestId)
    if (e?._tag === "RequestError") {
      return errorResponse(400, validationCode(path), "Malformed request body", requestId)
    }
  }
  return errorResponse(500, "INTERNAL_ERROR", "Internal error", requestId)
}

/** a reason a request failed that is the client's doing (an undecodable body, an unknown route, a 4xx answer) */
const isClientMistake = (reason: unknown): boolean => {
  const tag = (reason as { _tag?: string } | null)?._tag
  if (tag === "RequestError" || tag === "RouteNotFound") return true
  return HttpServerResponse.isServerResponse(reason) && reason.status < 500
}

/**
 * How a failed request is logged: a client's mistake (a body that is not JSON, an unknown route) is
 * a debug line without a stack, a database that is away a warning, and only what the service did
 * wrong (a defect, an unexpected failure) an error with the whole cause.
 */
const logFailure = (cause: Cause.Cause<unknown>, requestId: string, path: string): Effect.Effect<void> => {
  if (Cause.isInterruptedOnly(cause)) return Effect.void
  if (isDatabaseUnavailable(cause)) {
    return Effect.logWarning("request failed: database unavailable").pipe(Effect.annotateLogs({ requestId, path }))
  }
  // (the platform raises a body it cannot decode as a defect, beside the 4xx response it answers with)
  const reasons = [...Cause.failures(cause), ...Cause.defects(cause)]
  if (reasons.length > 0 && reasons.every(isClientMistake)) {
    const reason = reasons.map((r) => (r as { _tag?: string })._tag).find((tag) => tag !== undefined) ?? "client error"
    return Effect.logDebug("request rejected").pipe(Effect.annotateLogs({ requestId, path, reason }))
  }
  return Effect.logError("request failed").pipe(
    Effect.annotateLogs({ requestId, path, cause: Cause.pretty(cause, { renderErrorCause: true }) })
  )
}

const isHtml = (response: HttpServerResponse.HttpServerResponse) =>
  (response.body._tag === "Uint8Array" && response.body.contentType.startsWith("text/html")) ||
  (response.headers["content-type"] ?? "").startsWith("text/html")

/** Connection-level database failures (server away, restarting, pool timeout) as opposed to bugs. */
export const isDatabaseUnavailable = (cause: Cause.Cause<unknown>): boolean => {
  for (const defect of [...Cause.defects(cause), ...Cause.failures(cause)]) {
    const e = defect as { _tag?: string; cause?: any; message?: string }
    if (e?._tag !== "SqlError") continue
    const inner = e.cause ?? {}
    const code = String(inner.code ?? "")
    const message = String(inner.message ?? e.message ?? "")
    if (/^(08|57P0|53300)/.test(code) || /^E(CONNREFUSED|CONNRESET|PIPE|TIMEDOUT|HOSTUNREACH)$/.test(code)) return true
    if (/connection|terminat|timeout|ECONN|closed/i.test(message)) return true
  }
  return false
}

/** PostgreSQL "data exception" (class 22): input the database cannot hold, e.g. NUL in text. */
export const isDataException = (cause: Cause.Cause<unknown>): boolean =>
  [...Cause.defects(cause), ...Cause.failures(cause)].some((d) => {
    const e = d as { _tag?: string; cause?: { code?: unknown } }
    return e?._tag === "SqlError" && /^22/.test(String(e.cause?.code ?? ""))
  })

/**
 * Inside the API (before the platform turns a defect into a bare 500): a database that is away
 * answers 503 DATABASE_UNAVAILABLE, so clients know to retry; a value the database cannot store
 * (NUL bytes, out-of-range numbers) is the client's error, 400.
 */
export const databaseErrorsAsResponses = <E, R>(app: HttpApp.Default<E, R>) =>
  Effect.catchAllCause(app, (cause) => {
    const answer = databaseCauseAnswer(cause)
    if (answer === undefined) return Effect.failCause(cause)
    return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => answer(request.url.split("?")[0]!))
  })

/**
 * A database cause's answer (before the envelope puts it in the one error shape), or undefined when
 * the cause is something else: away → 503 (the dependency reported), data exception → 400.
 */
const databaseCauseAnswer = (cause: Cause.Cause<unknown>) => {
  if (isDatabaseUnavailable(cause)) {
    return (_path: string) =>
      Effect.as(
        // the dependency's state: logged once when it goes away (the probes log its return)
        Effect.flatMap(Effect.serviceOption(Dependencies), (d) => d._tag === "Some" ? d.value.report("db", false, "connection lost") : Effect.logWarning("database unavailable")),
        HttpServerResponse.unsafeJson({ code: "DATABASE_UNAVAILABLE", message: "Database unavailable; try again shortly" }, { status: 503 })
      )
  }
  if (isDataException(cause)) {
    return (path: string) =>
      Effect.succeed(HttpServerResponse.unsafeJson({
        code: validationCode(path),
        message: "A value in the request cannot be stored (for example a NUL character or an out-of-range number)"
      }, { status: 400 }))
  }
  return undefined
}

/**
 * What the API answers for a handler's failure that is not one of its declared errors (a defect, a
 * database away), in the one error shape, logged as the envelope logs it: for a path that answers
 * outside HttpApiBuilder (system/Lean.ts) and must answer alike.
 */
export const causeResponse = (cause: Cause.Cause<unknown>, requestId: string, path: string) => {
  const answer = databaseCauseAnswer(cause)
  if (answer !== undefined) return Effect.map(answer(path), (response) => normaliseError(response, requestId, path))
  return envelopeCauseResponse(cause, requestId, path)
}

/** What the envelope answers (and logs) for a failure outside the API's handlers, e.g. in the gate. */
export const envelopeCauseResponse = (cause: Cause.Cause<unknown>, requestId: string, path: string) =>
  Effect.as(logFailure(cause, requestId, path), responseForCause(cause, requestId, path))

/** The answer to a body the reader refused (too large, not JSON, nested too deep), before any work. */
const bodyRefusal = (verdict: Extract<BodyVerdict, { _tag: "Refused" }>, requestId: string, path: string) => {
  const code = verdict.status === 413 ? "PAYLOAD_TOO_LARGE" : verdict.status === 415 ? "UNSUPPORTED_MEDIA_TYPE" : validationCode(path)
  return errorResponse(verdict.status, code, verdict.message, requestId)
}

/**
 * Every log line written while serving a request carries its id. With logging off (LOG_LEVEL=none)
 * nothing is written, so the annotation (a fiber-ref update per request) is skipped.
 */
const withRequestLogs = <A, E, R>(effect: Effect.Effect<A, E, R>, requestId: string) =>
  FiberRef.getWith(FiberRef.currentMinimumLogLevel, (level) =>
    level._tag === "None" ? effect : Effect.annotateLogs(effect, "requestId", requestId))

/**
 * The platform sends a response from inside the app (before a middleware sees its result), so
 * rewriting goes through a pre-response handler registered for this request's fiber.
 */
export const envelope = <E, R>(app: HttpApp.Default<E, R>, isPage: IsPage = () => false) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const metrics = yield* Metrics
    const log = Option.getOrUndefined(yield* Effect.serviceOption(Log))
    const started = performance.now()
    const requestId = newRequestId(request.headers["x-request-id"])
    const url = request.url
    const q = url.indexOf("?")
    const path = q === -1 ? url : url.slice(0, q)
    const config = yield* Config
    const trust = config.trustProxy
    const peer = Option.getOrUndefined(yield* Effect.serviceOption(PeerAddress)) ?? Option.getOrUndefined(request.remoteAddress)
    // the address the rate limiter counts, worked out only if the access line is written
    const client = () => clientAddress(trust, peer, request.headers["x-forwarded-for"])
    const preRead = yield* Effect.serviceOption(PreReadBody)
    if (preRead._tag === "Some") {
      const verdict = preRead.value
      if (verdict._tag === "Refused") {
        const refusal = bodyRefusal(verdict, requestId, path)
        const shaped = isScimPath(path) ? scimError(refusal, requestId, path)
          : isOAuthPath(path) ? oauthError(refusal, requestId, path, false) : refusal
        const refused = corsMethod(path) !== undefined ? withCors(shaped) : shaped
        recordRequest(metrics, log, request.method, verdict.routed ? path : UNMATCHED, { requestId, unmatched: !verdict.routed, client }, refused.status, (performance.now() - started) / 1000)
        return refused
      }
      // the web request's own body effect, already answered (field of @effect/platform's request)
      ;(request as unknown as { textEffect?: Effect.Effect<string> }).textEffect = Effect.succeed(verdict.text)
    }
    const state: GateState = { requestId, client }
    // decisions §22.4: the OAuth endpoints browser MCP clients call answer CORS, refusals included
    const cors = corsMethod(path)
    let observed = false
    const finish = (response: HttpServerResponse.HttpServerResponse) => {
      let out = response
      // Pages for people (the consent page) keep their HTML, and answer an outage (503: PostgreSQL or Redis
      // away) with an HTML page too; every other error gets the one JSON shape.
      if (out.status === 503 && !isHtml(out) && isPage(request.method, path)) {
        out = unavailablePage(requestId, out.headers["retry-after"] ?? String(PAGE_RETRY_AFTER_SECONDS))
      } else if (out.status >= 400 && path !== "/health" && path !== "/health/ready" && !isHtml(out)) {
        out = isScimPath(path) ? scimError(out, requestId, path)
          : isOAuthPath(path) ? oauthError(out, requestId, path, (request.headers["authorization"] ?? "").toLowerCase().startsWith("basic "), config.oauth.issuerBase)
          : normaliseError(out, requestId, path)
      }
      out = HttpServerResponse.setHeader(out, "x-request-id", requestId)
      // the rate-limit headers of a request the gate admitted (its refusals carry their own)
      if (state.rateHeaders !== undefined) out = HttpServerResponse.setHeaders(out, state.rateHeaders)
      if (cors !== undefined) out = withCors(out)
      if (!observed) {
        observed = true
        recordRequest(metrics, log, request.method, path, state, out.status, (performance.now() - started) / 1000)
      }
      return out
    }
    // a preflight is answered before the gate: it carries no credentials and runs nothing
    if (cors !== undefined && request.method === "OPTIONS") return finish(preflight(cors))
    yield* HttpApp.appendPreResponseHandler((_request, response) => Effect.sync(() => finish(response)))
    const response = yield* app.pipe(
      Effect.locally(CurrentGate, state),
      (effect) => withRequestLogs(effect, requestId),
      Effect.tapErrorCause((cause) => logFailure(cause, requestId, path)),
      Effect.catchAllCause((cause) => Effect.succeed(responseForCause(cause, requestId, path)))
    )
    // Responses answered by the gate itself never went through the pre-response handler.
    return observed ? response : finish(response)
  })
