/**
 * The gate's decision for one request (decisions §6): authenticate the caller, check every window
 * of the request in one call to the counter store, and answer the refusal (401, 429, 503) or admit
 * it, writing what it learned (developer, grant, rate-limit headers) into the request's state.
 *
 * One decision, two forms over the same steps (which windows a caller counts, what a counter
 * result means): `admit`, an Effect, used by the HttpApi middleware (makeGate) and by the lean
 * path; and `admitNow`, a promise for the lean path's commonest request (an API key already in the
 * cache, on a route with no hourly or containment window), which needs no fiber: a fiber per request
 * was most of what a light read cost beyond its floor (issue 27). `admitNow` answers undefined where
 * it cannot decide alone (a key only the database knows, another kind of caller or route), and
 * UNDECIDED when the counter store failed, so the caller runs `admit` (which answers the 503).
 */
import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Clock, Effect, FiberRef, Option } from "effect"
import { Config } from "../Config.ts"
import { ApiKeys, bearerOf, CurrentGate, type Developer, type GateState, readKeyMayCall, readKeyRefusal, type ResolvedKey, ScimTokenResolver } from "./Auth.ts"
import { PreReadBody } from "./Body.ts"
import { Counters, type HitResult, makeMemoryStore, type WindowCheck } from "./Counters.ts"
import { sha256Hex } from "./Hash.ts"
import { errorResponse, newRequestId } from "./HttpEnvelope.ts"
import { idempotent } from "./Idempotency.ts"
import { Keys } from "./Keys.ts"
import { Metrics } from "./Metrics.ts"
import {
  clientAddress,
  type CompiledRoute,
  compileRoutes,
  HOUR_MS,
  issuerDeveloperOf,
  oauthClientOf,
  PeerAddress,
  type RatePolicyValue,
  routeMatcher,
  SCIM_PER_DEVELOPER,
  SCIM_PER_TOKEN,
  WINDOW_MS
} from "./RateLimit.ts"
import type { HttpApi } from "@effect/platform"

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
  /** the OAuth client the request names, on a route limited per client (RatePolicyValue.perOAuthClient) */
  readonly oauthClient?: string | undefined
  /** the developer of an issuer path `/oauth/<developerId>/…` */
  readonly issuerDeveloper?: string | undefined
}

type Check = WindowCheck & { readonly name: string; readonly code: "RATE_LIMITED" | "RATE_LIMIT_EXCEEDED" }

/** The windows of one request at one instant: which ones to count, and whether the caller failed to authenticate. */
interface Plan {
  readonly checks: Array<Check>
  unauthorized: boolean
  /** a `read` key on an operation it may not call (decisions §2): 403 once counted */
  readOnly: boolean
  readonly routeId: string
  readonly windowStart: number
  readonly resetSeconds: number
}

/** admitNow: the counter store failed; run `admit` */
export const UNDECIDED = Symbol("undecided")

/** Needs Config, Counters, Keys and ApiKeys (and the Clock the service runs on). */
export const makeAdmission = Effect.gen(function*() {
  const config = yield* Config
  const counters = yield* Counters
  const keys = yield* Keys
  const apiKeys = yield* ApiKeys
  // required: the directory provides it (src/directory/Tokens.ts); SCIM requests authenticate here
  const scimTokens = yield* ScimTokenResolver
  const metrics = Option.getOrUndefined(yield* Effect.serviceOption(Metrics))
  // the service's clock (TestClock in tests), read without a fiber by admitNow
  const clock = yield* Effect.clock
  const figures = config.rateLimits
  const scaled = (n: number) => Math.max(1, Math.floor(n * figures.scale))
  const unavailable = (requestId: string, routeId: string) =>
    Effect.as(
      Effect.logWarning("rate limit store unavailable").pipe(Effect.annotateLogs({ requestId, route: routeId })),
      errorResponse(503, "RATE_LIMIT_UNAVAILABLE", "Rate limiter unavailable; try again shortly", requestId)
    )

  const plan = (route: CompiledRoute | undefined, now: number): Plan => {
    const windowStart = now - (now % WINDOW_MS)
    return {
      checks: [],
      unauthorized: false,
      readOnly: false,
      routeId: route?.id ?? "unmatched",
      windowStart,
      resetSeconds: Math.max(1, Math.ceil((windowStart + WINDOW_MS - now) / 1000))
    }
  }
  const addRouteCheck = (p: Plan, policy: RatePolicyValue, subject: string) => {
    const limit = scaled(typeof policy.routeLimit === "function" ? policy.routeLimit(figures) : policy.routeLimit ?? figures.routeDefault)
    p.checks.push({ key: `${counters.prefix}rl:route:${p.routeId}:${subject}:${p.windowStart}`, limit, name: "route", code: "RATE_LIMITED" })
  }
  /** An API-key route's windows: the route's (by address or by key) and the developer's budget. */
  const addApiKeyChecks = (p: Plan, policy: RatePolicyValue, developer: Developer | undefined, address: () => string) => {
    if (developer === undefined) {
      p.unauthorized = true
      return addRouteCheck(p, policy, `addr:${address()}`)
    }
    addRouteCheck(p, policy, policy.routeKey === "apiKey" ? `key:${developer.id}` : `addr:${address()}`)
    const tag = `{${developer.id}}`
    const budget = policy.developerBudget ?? "plan"
    if (policy.authorizeBucket) {
      p.checks.push({ key: `${counters.prefix}rl:${tag}:authorize:${p.windowStart}`, limit: scaled(figures.authorizePerDeveloper), name: "authorize", code: "RATE_LIMIT_EXCEEDED" })
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
    p.checks.push({
      key: `${counters.prefix}rl:${tag}:${budget}:${p.windowStart}`,
      limit: scaled(budgetLimit),
      name: budget === "plan" ? `plan-${developer.plan}` : budget,
      code: "RATE_LIMIT_EXCEEDED"
    })
  }
  /** An API-key request's caller, recorded for the handlers, and its windows. */
  const admitKey = (p: Plan, route: CompiledRoute, resolved: ResolvedKey | undefined, state: GateState, address: () => string) => {
    if (resolved !== undefined) {
      state.developer = resolved.developer
      state.apiKey = resolved.key
      p.readOnly = resolved.key.scope === "read" && !readKeyMayCall(route.method, route.path)
    }
    addApiKeyChecks(p, route.policy, resolved?.developer, address)
  }
  /** A full window: the 429 of the first window that was full. */
  const refusal = (p: Plan, hit: HitResult, requestId: string) => {
    if (hit.rejectedBy < 0) return undefined
    const check = p.checks[hit.rejectedBy]!
    metrics?.inc("rate_limit_refusals_total", { policy: check.name })
    const reported = { name: check.name, limit: check.limit, remaining: 0, resetSeconds: p.resetSeconds }
    // in words, the figure of Retry-After: clients of the published protocol read it from the message
    const wait = `retry in ${p.resetSeconds} second${p.resetSeconds === 1 ? "" : "s"}`
    const message = check.code === "RATE_LIMITED" ? `Too many requests to this route; ${wait}` : `Rate limit exceeded; ${wait}`
    return errorResponse(429, check.code, message, requestId, rateHeaders(reported, true))
  }
  /**
   * Counted and within every window: the 401 of a caller who did not authenticate, or admission with
   * the headers. The per-developer budget is reported on API-key requests, else the route limiter
   * (the only window of a request refused for its credentials: decisions §6, headers on every answer).
   */
  const settle = (p: Plan, policy: RatePolicyValue, hit: HitResult, state: GateState) => {
    const last = p.checks.length - 1
    const check = p.checks[last]!
    const headers = rateHeaders({ name: check.name, limit: check.limit, remaining: check.limit - hit.counts[last]!, resetSeconds: p.resetSeconds }, false)
    if (p.unauthorized) {
      const message = policy.grantToken
        ? "Grant token missing, invalid or expired"
        : policy.scimToken
        ? "Invalid or missing SCIM token"
        : "Invalid or missing API key"
      return errorResponse(401, "UNAUTHORIZED", message, state.requestId, headers)
    }
    if (p.readOnly) return errorResponse(403, "INSUFFICIENT_KEY_SCOPE", readKeyRefusal, state.requestId, headers)
    state.rateHeaders = headers
    return undefined
  }

  const admit = (route: CompiledRoute | undefined, input: GateInput, state: GateState): Effect.Effect<HttpServerResponse.HttpServerResponse | undefined> =>
    Effect.gen(function*() {
      const requestId = state.requestId
      const policy: RatePolicyValue = route?.policy ?? {}
      const now = yield* Clock.currentTimeMillis
      const p = plan(route, now)
      const address = clientAddress(config.trustProxy, input.peer, input.forwardedFor)
      const bearer = bearerOf(input.authorization)
      if (policy.grantToken) {
        const claims = bearer === undefined
          ? undefined
          : yield* keys.verify(bearer, Math.floor(now / 1000)).pipe(Effect.option, Effect.map(Option.getOrUndefined))
        if (claims === undefined) {
          p.unauthorized = true
          addRouteCheck(p, policy, `addr:${address}`)
        } else {
          state.grant = claims
          state.grantToken = bearer
          addRouteCheck(p, policy, `jti:${claims.jti}`)
        }
      } else if (policy.scimToken) {
        const resolved = bearer === undefined ? undefined : yield* scimTokens.resolve(bearer)
        if (resolved === undefined) {
          p.unauthorized = true
          addRouteCheck(p, policy, `addr:${address}`)
        } else {
          state.developer = resolved.developer
          state.scimTokenId = resolved.tokenId
          p.checks.push({ key: `${counters.prefix}rl:{${resolved.developer.id}}:scim:${p.windowStart}`, limit: scaled(SCIM_PER_DEVELOPER), name: "scim-developer", code: "RATE_LIMIT_EXCEEDED" })
          // last, so its figures are the ones reported in the headers
          p.checks.push({ key: `${counters.prefix}rl:scim:${resolved.tokenId}:${p.windowStart}`, limit: scaled(SCIM_PER_TOKEN), name: "scim-token", code: "RATE_LIMITED" })
        }
      } else if (route?.apiKey) {
        admitKey(p, route, bearer === undefined ? undefined : yield* apiKeys.resolve(bearer), state, () => address)
      } else {
        if (policy.perOAuthClient !== undefined && input.oauthClient !== undefined) {
          // hashed: a CIMD client id is a URL of up to 2 KiB; scoped to the issuer, as client ids are
          const client = sha256Hex(`${input.issuerDeveloper ?? ""} ${input.oauthClient}`).slice(0, 32)
          p.checks.push({ key: `${counters.prefix}rl:client:${p.routeId}:${client}:${p.windowStart}`, limit: scaled(policy.perOAuthClient(figures)), name: "client", code: "RATE_LIMITED" })
        }
        if (policy.developerBudget === "containment" && input.issuerDeveloper !== undefined) {
          // OAuth revocation gets a budget of the containment budget's size per issuer, but its own:
          // §22.8 shares the developer's, but anyone may call /revoke (it is counted before the client
          // authenticates), so sharing it let a stranger spend the developer's own emergency revocations
          p.checks.push({ key: `${counters.prefix}rl:{${input.issuerDeveloper}}:oauth-revoke:${p.windowStart}`, limit: scaled(figures.containment), name: "oauth-revoke", code: "RATE_LIMIT_EXCEEDED" })
        }
        addRouteCheck(p, policy, `addr:${address}`)
      }

      const containment = policy.developerBudget === "containment" || policy.fallbackInProcess === true
      const result = yield* counters.hit(p.checks, WINDOW_MS * 2).pipe(
        Effect.catchAll((e) => containment ? containmentFallback.hit(p.checks, WINDOW_MS * 2) : Effect.fail(e)),
        Effect.either
      )
      if (result._tag === "Left") return yield* unavailable(requestId, p.routeId)
      const refused = refusal(p, result.right, requestId)
      if (refused !== undefined) return refused
      const hourStart = now - (now % HOUR_MS)
      const hourlies: Array<WindowCheck & { readonly name: string; readonly message: string }> = []
      if (policy.hourlyPerAddress !== undefined) {
        const key = `${counters.prefix}rl:hour:${p.routeId}:addr:${address}:${hourStart}`
        hourlies.push({ key, limit: scaled(policy.hourlyPerAddress(figures)), name: "hourly", message: "Too many requests from this address this hour; try again later" })
      }
      if (policy.hourlyPerIssuer !== undefined && input.issuerDeveloper !== undefined) {
        const key = `${counters.prefix}rl:hour:${p.routeId}:{${input.issuerDeveloper}}:${hourStart}`
        hourlies.push({ key, limit: scaled(policy.hourlyPerIssuer(figures)), name: "hourly-issuer", message: "Too many requests for this issuer this hour; try again later" })
      }
      if (hourlies.length > 0) {
        // their own window (a clock hour) and expiry, so a separate round trip; only for admitted requests
        const hit = yield* counters.hit(hourlies, HOUR_MS * 2).pipe(Effect.either)
        if (hit._tag === "Left") return yield* unavailable(requestId, p.routeId)
        if (hit.right.rejectedBy >= 0) {
          const full = hourlies[hit.right.rejectedBy]!
          metrics?.inc("rate_limit_refusals_total", { policy: full.name })
          const reported = { name: full.name, limit: full.limit, remaining: 0, resetSeconds: Math.max(1, Math.ceil((hourStart + HOUR_MS - now) / 1000)) }
          return errorResponse(429, "RATE_LIMITED", full.message, requestId, rateHeaders(reported, true, 3600))
        }
      }
      return settle(p, policy, result.right, state)
    })

  /** `admit` without a fiber, for an API-key request whose key the cache knows (see the header). */
  const admitNow = (route: CompiledRoute, input: GateInput, state: GateState): Promise<HttpServerResponse.HttpServerResponse | undefined | typeof UNDECIDED> | undefined => {
    const policy = route.policy
    if (!route.apiKey || policy.grantToken || policy.scimToken || policy.hourlyPerAddress !== undefined || policy.hourlyPerIssuer !== undefined) return undefined
    if (policy.developerBudget === "containment" || policy.fallbackInProcess === true) return undefined
    const bearer = bearerOf(input.authorization)
    const known = bearer === undefined ? { resolved: undefined } : apiKeys.known(bearer)
    if (known === undefined) return undefined
    const p = plan(route, clock.unsafeCurrentTimeMillis())
    admitKey(p, route, known.resolved, state, () => clientAddress(config.trustProxy, input.peer, input.forwardedFor))
    return counters.hitNow(p.checks, WINDOW_MS * 2).then(
      (hit) => refusal(p, hit, state.requestId) ?? settle(p, policy, hit, state),
      () => UNDECIDED
    )
  }

  return { admit, admitNow }
})

export type Admission = Effect.Effect.Success<typeof makeAdmission>

/**
 * Builds the gate middleware for an API: finds the request's route, then admits it (makeAdmission)
 * or answers the refusal without running the handler. Needs what makeAdmission needs.
 */
export const makeGate = (api: HttpApi.HttpApi.Any) => {
  const match = routeMatcher(compileRoutes(api))
  // built from the runtime's services on the first request rather than on every one
  let admission: Admission | undefined
  return <E, R>(app: HttpApp.Default<E, R>) =>
    Effect.gen(function*() {
      admission ??= yield* makeAdmission
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
      const preRead = yield* Effect.serviceOption(PreReadBody)
      const input: GateInput = {
        authorization: request.headers["authorization"], forwardedFor: request.headers["x-forwarded-for"], peer,
        ...(route !== undefined && !route.apiKey && (route.policy.perOAuthClient !== undefined || route.policy.hourlyPerIssuer !== undefined || route.policy.developerBudget === "containment")
          ? {
            issuerDeveloper: issuerDeveloperOf(request.url),
            oauthClient: oauthClientOf(request.headers["authorization"], preRead._tag === "Some" && preRead.value._tag === "Text" ? preRead.value.text : undefined)
          }
          : {})
      }
      // the fiberless form where it decides alone: one async step in this fiber instead of the Effect form's many
      const decided = route === undefined ? undefined : admission.admitNow(route, input, state)
      const refusal = decided === undefined
        ? yield* admission.admit(route, input, state)
        : yield* Effect.flatMap(Effect.promise(() => decided), (verdict) => verdict === UNDECIDED ? admission!.admit(route, input, state) : Effect.succeed(verdict))
      if (refusal !== undefined) return refusal
      // a POST with an API key and an Idempotency-Key runs at most once per developer and key (decisions §2),
      // one sent without a body too (a key rotation, a bundle's revocation): the server pre-reads every
      // body it is sent, so no pre-read body on a POST is the empty body
      const key = request.headers["idempotency-key"]
      const bodyText = key === undefined ? undefined : Option.isNone(preRead) ? "" : preRead.value._tag === "Text" ? preRead.value.text : undefined
      const served = key !== undefined && request.method === "POST" && route?.apiKey === true && state.developer !== undefined && bodyText !== undefined
        ? idempotent({ developerId: state.developer.id, key, method: request.method, path: request.url, body: bodyText }, requestId, app)
        : app
      if (gate !== undefined) return yield* served
      yield* HttpApp.appendPreResponseHandler((_request, response) =>
        Effect.succeed(HttpServerResponse.setHeaders(response, state.rateHeaders!)))
      return yield* Effect.locally(served, CurrentGate, state)
    })
}
