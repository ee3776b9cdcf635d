/**
 * Rate limiting (interface: Limits; decisions §6).
 *
 * Each endpoint declares its policy in its own declaration with `.annotate(RatePolicy, ...)`.
 * The gate (an HTTP middleware in front of every route) finds the policy of the matched route,
 * authenticates the caller (API key or grant token) so per-developer budgets can be counted, and
 * checks every window of the request in one round trip to the counter store. It then runs the
 * handler, or answers 429 / 503 without running it.
 *
 * Windows are fixed and aligned to the clock minute (Effect Clock, so TestClock drives them).
 */
import { HttpApi, type HttpApiEndpoint, HttpApiMiddleware, HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Clock, Context, Effect, FiberRef, Option } from "effect"
import * as FindMyWay from "find-my-way-ts"
import { isIP } from "node:net"
import { Config, type RateLimitFigures, type TrustProxy } from "../Config.ts"
import { ApiKeys, Authentication, bearerOf, ScimTokenResolver, CurrentGate, type Developer, type GateState } from "./Auth.ts"
import { Counters, makeMemoryStore, type WindowCheck } from "./Counters.ts"
import { Keys } from "./Keys.ts"
import { errorResponse, newRequestId } from "./HttpEnvelope.ts"
import { Metrics } from "./Metrics.ts"

export type DeveloperBudget = "plan" | "containment" | "revocationStatus"

export interface RatePolicyValue {
  /** "exempt": never limited, never counted (JWKS, health) */
  readonly exempt?: boolean
  /** the route's own limit per window, replacing the default; a function of the configured figures */
  readonly routeLimit?: number | ((figures: RateLimitFigures) => number)
  /** whose requests the route limit counts: the source address (default), the API key, or the grant token's jti */
  readonly routeKey?: "address" | "apiKey" | "grantToken"
  /** which per-developer budget an API-key request draws on (default: the plan budget) */
  readonly developerBudget?: DeveloperBudget
  /** POST /v1/authorize: the per-developer authorization bucket */
  readonly authorizeBucket?: boolean
  /** the route authenticates with a grant token instead of an API key */
  readonly grantToken?: boolean
  /** /scim/v2: authenticates with a SCIM token, limited per token and per developer, never the plan budget */
  readonly scimToken?: boolean
  /** while the shared store is down, count in process instead of refusing (containment routes, /metrics) */
  readonly fallbackInProcess?: boolean
  /** a further limit per source address per clock hour (sign-up), a function of the configured figures */
  readonly hourlyPerAddress?: (figures: RateLimitFigures) => number
}

/** decisions §11: SCIM requests per token per minute; a developer's SCIM traffic is capped at two tokens' worth */
export const SCIM_PER_TOKEN = 600
export const SCIM_PER_DEVELOPER = 1_200

export class RatePolicy extends Context.Tag("agent-auth/RatePolicy")<RatePolicy, RatePolicyValue>() {}

const WINDOW_MS = 60_000
const HOUR_MS = 3_600_000

export interface CompiledRoute {
  readonly id: string
  readonly method: string
  readonly path: string
  readonly policy: RatePolicyValue
  readonly apiKey: boolean
  /** the endpoint itself (its schemas), for a path that answers it outside HttpApiBuilder */
  readonly endpoint: HttpApiEndpoint.HttpApiEndpoint.Any
}

/** Reads every endpoint's path, method, policy and whether it uses API-key authentication. */
export const compileRoutes = (api: HttpApi.HttpApi.Any): ReadonlyArray<CompiledRoute> => {
  const routes: Array<CompiledRoute> = []
  HttpApi.reflect(api as any, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, mergedAnnotations, middleware }) => {
      const policy = Context.getOption(mergedAnnotations, RatePolicy).pipe(
        Option.getOrElse((): RatePolicyValue => ({}))
      )
      const apiKey = [...middleware].some((m) => (m as unknown) === Authentication)
      routes.push({ id: `${endpoint.method} ${endpoint.path}`, method: endpoint.method, path: endpoint.path, policy, apiKey, endpoint })
    }
  })
  return routes
}

/**
 * Finds a request's route with the router that dispatches it (find-my-way, with the same default
 * options): every spelling the router accepts for a route (a trailing or doubled slash, another
 * case, percent-encoding, HEAD for GET) is that route here too, so none slips past the route's own
 * limit or the developer budgets.
 */
export const routeMatcher = (routes: ReadonlyArray<CompiledRoute>) => {
  const router = FindMyWay.make<CompiledRoute>()
  for (const route of routes) router.on(route.method as any, route.path as any, route)
  // HEAD is answered by the GET handler (the body dropped), so it is that route here too
  return (method: string, url: string): CompiledRoute | undefined => router.find((method === "HEAD" ? "GET" : method) as any, url)?.handler
}

/** The client address: the socket peer, or X-Forwarded-For as far as TRUST_PROXY allows. */
export const clientAddress = (trust: TrustProxy, peer: string | undefined, forwardedFor: string | undefined): string => {
  const remote = peer ?? "unknown"
  if (trust._tag === "none" || forwardedFor === undefined) return remote
  const chain = [...forwardedFor.split(",").map((s) => s.trim()).filter(Boolean), remote]
  if (trust._tag === "hops") return chain[Math.max(0, chain.length - 1 - trust.hops)]!
  for (let i = chain.length - 1; i > 0; i--) {
    const addr = chain[i]!.replace(/^::ffff:/, "")
    const family = isIP(addr) === 6 ? "ipv6" : isIP(addr) === 4 ? "ipv4" : undefined
    if (family === undefined || !trust.trusted.check(addr, family)) return chain[i]!
  }
  return chain[0]!
}

/** The socket peer address, handed in by the server (Bun.serve) through the request context. */
export class PeerAddress extends Context.Tag("agent-auth/PeerAddress")<PeerAddress, string>() {}

interface Reported {
  readonly name: string
  readonly limit: number
  readonly remaining: number
  readonly resetSeconds: number
}

const rateHeaders = (r: Reported, retry: boolean, windowSeconds = 60): Record<string, string> => {
  const headers: Record<string, string> = {
    "x-ratelimit-limit": String(r.limit),
    "x-ratelimit-remaining": String(Math.max(0, r.remaining)),
    "x-ratelimit-reset": String(r.resetSeconds),
    "ratelimit-policy": `"${r.name}";q=${r.limit};w=${windowSeconds}`,
    "ratelimit": `"${r.name}";r=${Math.max(0, r.remaining)};t=${r.resetSeconds}`
  }
  if (retry) headers["retry-after"] = String(r.resetSeconds)
  return headers
}

/** In-process counters used by containment routes while the shared store is down. */
const containmentFallback = makeMemoryStore()

/** What the gate reads from a request: its credentials and where it came from. */
export interface GateInput {
  readonly authorization: string | undefined
  readonly forwardedFor: string | undefined
  /** the socket peer, when the server knows it */
  readonly peer: string | undefined
}

/**
 * The gate's decision for one request on a matched (or unmatched) route: authenticates the caller,
 * checks every window in one call to the counter store, and answers the refusal (401, 429, 503)
 * or undefined when admitted, with what it learned (developer, grant, rate-limit headers) written
 * into `state`. Shared by the HttpApi middleware (makeGate) and the lean path (system/Lean.ts),
 * so both admit, count and refuse alike. Needs Config, Counters, Keys and ApiKeys.
 */
export const makeAdmission = Effect.gen(function*() {
  const config = yield* Config
  const counters = yield* Counters
  const keys = yield* Keys
  const apiKeys = yield* ApiKeys
  const scimTokens = yield* Effect.serviceOption(ScimTokenResolver)
  const metrics = yield* Effect.serviceOption(Metrics)
  const figures = config.rateLimits
  const scaled = (n: number) => Math.max(1, Math.floor(n * figures.scale))
  const unavailable = (requestId: string, routeId: string) =>
    Effect.as(
      Effect.logWarning("rate limit store unavailable").pipe(Effect.annotateLogs({ requestId, route: routeId })),
      errorResponse(503, "RATE_LIMIT_UNAVAILABLE", "Rate limiter unavailable; try again shortly", requestId)
    )
  return (route: CompiledRoute | undefined, input: GateInput, state: GateState): Effect.Effect<HttpServerResponse.HttpServerResponse | undefined> =>
    Effect.gen(function*() {
      const requestId = state.requestId
      const policy: RatePolicyValue = route?.policy ?? {}
      const now = yield* Clock.currentTimeMillis
      const windowStart = now - (now % WINDOW_MS)
      const resetSeconds = Math.max(1, Math.ceil((windowStart + WINDOW_MS - now) / 1000))
      const prefix = counters.prefix
      const address = clientAddress(config.trustProxy, input.peer, input.forwardedFor)

      const checks: Array<WindowCheck & { name: string; code: "RATE_LIMITED" | "RATE_LIMIT_EXCEEDED" }> = []
      const routeLimit = scaled(
        typeof policy.routeLimit === "function"
          ? policy.routeLimit(figures)
          : policy.routeLimit ?? figures.routeDefault
      )
      const routeId = route?.id ?? "unmatched"
      const addRouteCheck = (subject: string) =>
        checks.push({
          key: `${prefix}rl:route:${routeId}:${subject}:${windowStart}`,
          limit: routeLimit,
          name: "route",
          code: "RATE_LIMITED"
        })

      let developer: Developer | undefined
      let unauthorized = false
      const bearer = bearerOf(input.authorization)
      if (policy.grantToken) {
        const claims = bearer === undefined
          ? undefined
          : yield* keys.verify(bearer, Math.floor(now / 1000)).pipe(Effect.option, Effect.map(Option.getOrUndefined))
        if (claims === undefined) {
          unauthorized = true
          addRouteCheck(`addr:${address}`)
        } else {
          state.grant = claims
          state.grantToken = bearer
          addRouteCheck(`jti:${claims.jti}`)
        }
      } else if (policy.scimToken) {
        const resolved = bearer === undefined || scimTokens._tag === "None" ? undefined : yield* scimTokens.value.resolve(bearer)
        if (resolved === undefined) {
          unauthorized = true
          addRouteCheck(`addr:${address}`)
        } else {
          state.developer = resolved.developer
          state.scimTokenId = resolved.tokenId
          checks.push({
            key: `${prefix}rl:{${resolved.developer.id}}:scim:${windowStart}`,
            limit: scaled(SCIM_PER_DEVELOPER),
            name: "scim-developer",
            code: "RATE_LIMIT_EXCEEDED"
          })
          // last, so its figures are the ones reported in the headers
          checks.push({ key: `${prefix}rl:scim:${resolved.tokenId}:${windowStart}`, limit: scaled(SCIM_PER_TOKEN), name: "scim-token", code: "RATE_LIMITED" })
        }
      } else if (route?.apiKey) {
        developer = bearer === undefined ? undefined : yield* apiKeys.resolve(bearer)
        if (developer === undefined) {
          unauthorized = true
          addRouteCheck(`addr:${address}`)
        } else {
          state.developer = developer
          addRouteCheck(policy.routeKey === "apiKey" ? `key:${developer.id}` : `addr:${address}`)
          const tag = `{${developer.id}}`
          const budget = policy.developerBudget ?? "plan"
          if (policy.authorizeBucket) {
            checks.push({
              key: `${prefix}rl:${tag}:authorize:${windowStart}`,
              limit: scaled(figures.authorizePerDeveloper),
              name: "authorize",
              code: "RATE_LIMIT_EXCEEDED"
            })
          }
          const budgetLimit = budget === "containment"
            ? figures.containment
            : budget === "revocationStatus"
            ? figures.revocationStatus
            : developer.plan === "enterprise"
            ? figures.planEnterprise
            : developer.plan === "pro"
            ? figures.planPro
            : figures.planFree
          checks.push({
            key: `${prefix}rl:${tag}:${budget}:${windowStart}`,
            limit: scaled(budgetLimit),
            name: budget === "plan" ? `plan-${developer.plan}` : budget,
            code: "RATE_LIMIT_EXCEEDED"
          })
        }
      } else {
        addRouteCheck(`addr:${address}`)
      }

      const containment = policy.developerBudget === "containment" || policy.fallbackInProcess === true
      const result = yield* counters.hit(checks, WINDOW_MS * 2).pipe(
        Effect.catchAll((e) => containment ? containmentFallback.hit(checks, WINDOW_MS * 2) : Effect.fail(e)),
        Effect.either
      )
      if (result._tag === "Left") return yield* unavailable(requestId, routeId)
      const { rejectedBy, counts } = result.right
      if (rejectedBy >= 0) {
        const check = checks[rejectedBy]!
        if (metrics._tag === "Some") metrics.value.inc("rate_limit_refusals_total", { policy: check.name })
        const reported = { name: check.name, limit: check.limit, remaining: 0, resetSeconds }
        // in words, the figure of Retry-After: clients of the published protocol read it from the message
        const wait = `retry in ${resetSeconds} second${resetSeconds === 1 ? "" : "s"}`
        const message = check.code === "RATE_LIMITED"
          ? `Too many requests to this route; ${wait}`
          : `Rate limit exceeded; ${wait}`
        return errorResponse(429, check.code, message, requestId, rateHeaders(reported, true))
      }
      if (policy.hourlyPerAddress !== undefined) {
        // its own window (a clock hour) and expiry, so a separate round trip; only for admitted requests
        const hourStart = now - (now % HOUR_MS)
        const hourly = { key: `${prefix}rl:hour:${routeId}:addr:${address}:${hourStart}`, limit: scaled(policy.hourlyPerAddress(figures)) }
        const hit = yield* counters.hit([hourly], HOUR_MS * 2).pipe(Effect.either)
        if (hit._tag === "Left") return yield* unavailable(requestId, routeId)
        const reported = {
          name: "hourly",
          limit: hourly.limit,
          remaining: hourly.limit - hit.right.counts[0]!,
          resetSeconds: Math.max(1, Math.ceil((hourStart + HOUR_MS - now) / 1000))
        }
        if (hit.right.rejectedBy >= 0) {
          if (metrics._tag === "Some") metrics.value.inc("rate_limit_refusals_total", { policy: "hourly" })
          return errorResponse(429, "RATE_LIMITED", "Too many requests from this address this hour; try again later", requestId, rateHeaders({ ...reported, remaining: 0 }, true, 3600))
        }
      }
      // Report the per-developer budget on API-key requests, else the route limiter (the only
      // window of a request refused for its credentials: decisions §6, headers on every answer).
      const reportIndex = checks.length - 1
      const reportedCheck = checks[reportIndex]!
      const reported = {
        name: reportedCheck.name,
        limit: reportedCheck.limit,
        remaining: reportedCheck.limit - counts[reportIndex]!,
        resetSeconds
      }
      if (unauthorized) {
        const message = policy.grantToken
          ? "Grant token missing, invalid or expired"
          : policy.scimToken
          ? "Invalid or missing SCIM token"
          : "Invalid or missing API key"
        return errorResponse(401, "UNAUTHORIZED", message, requestId, rateHeaders(reported, false))
      }
      state.rateHeaders = rateHeaders(reported, false)
      return undefined
    })
})

export type Admission = Effect.Effect.Success<typeof makeAdmission>

/**
 * Builds the gate middleware for an API: finds the request's route, then admits it (makeAdmission)
 * or answers the refusal without running the handler. Needs what makeAdmission needs.
 */
export const makeGate = (api: HttpApi.HttpApi.Any) => {
  const match = routeMatcher(compileRoutes(api))
  // built from the runtime's services on the first request rather than on every one
  let admit: Admission | undefined
  return <E, R>(app: HttpApp.Default<E, R>) =>
    Effect.gen(function*() {
      admit ??= yield* makeAdmission
      const request = yield* HttpServerRequest.HttpServerRequest
      const gate = yield* FiberRef.get(CurrentGate)
      const requestId = gate?.requestId ?? newRequestId(request.headers["x-request-id"])
      const route = match(request.method, request.url)
      if (gate !== undefined) gate.route = route?.path
      if (route?.policy.exempt) return yield* app
      // the envelope's record of this request, filled in place (a gate used alone makes its own)
      const state: GateState = gate ?? { requestId }
      if (route === undefined) state.unmatched = true
      const peer = Option.getOrUndefined(yield* Effect.serviceOption(PeerAddress)) ??
        Option.getOrUndefined(request.remoteAddress)
      const refusal = yield* admit(route, {
        authorization: request.headers["authorization"],
        forwardedFor: request.headers["x-forwarded-for"],
        peer
      }, state)
      if (refusal !== undefined) return refusal
      if (gate !== undefined) return yield* app
      yield* HttpApp.appendPreResponseHandler((_request, response) =>
        Effect.succeed(HttpServerResponse.setHeaders(response, state.rateHeaders!)))
      return yield* Effect.locally(app, CurrentGate, state)
    })
}

export const policies = {
  exempt: { exempt: true } satisfies RatePolicyValue,
  route: (routeLimit: number) => ({ routeLimit }) satisfies RatePolicyValue
}

export { HttpApiMiddleware }
