/**
 * Rate limiting (interface: Limits; decisions §6).
 *
 * Each endpoint declares its policy in its own declaration with `.annotate(RatePolicy, ...)`.
 * The gate (an HTTP middleware in front of every route) finds the policy of the matched route,
 * authenticates the caller (API key or grant token) so per-developer budgets can be counted, and
 * checks every window of the request in one round trip to the counter store. It then runs the
 * handler, or answers 429 / 503 without running it.
 *
 * Windows are fixed and aligned to the clock minute (Effect Clock, so TestClock drives them). This
 * file declares and matches routes; the decision itself (and the gate middleware) is Admission.ts.
 */
import { HttpApi, type HttpApiEndpoint, HttpApiMiddleware } from "@effect/platform"
import { Context, Option } from "effect"
import * as FindMyWay from "find-my-way-ts"
import { isIP } from "node:net"
import type { RateLimitFigures, TrustProxy } from "../Config.ts"
import { Authentication } from "./Auth.ts"

export type DeveloperBudget = "plan" | "containment" | "revocationStatus"

export interface RatePolicyValue {
  /** "exempt": never limited, never counted (JWKS, health) */
  readonly exempt?: boolean
  /** the route's own limit per window, replacing the default; a function of the configured figures */
  readonly routeLimit?: number | ((figures: RateLimitFigures) => number)
  /** whose requests the route limit counts: the source address (default), the API key, or the grant token's jti */
  readonly routeKey?: "address" | "apiKey" | "grantToken"
  /** which per-developer budget an API-key request draws on (default: the plan budget); "containment" on an issuer path: that developer's */
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
  /** a further limit per clock hour per issuer (`/oauth/<developerId>/…`: DCR, decisions §22.9) */
  readonly hourlyPerIssuer?: (figures: RateLimitFigures) => number
  /**
   * a further limit per minute per OAuth client the request names (decisions §22.9 `/token`; §22.8 per
   * resource server at introspection): the Basic user, else the form's `client_id`, counted before
   * the client authenticates (a public client has nothing else to count by)
   */
  readonly perOAuthClient?: (figures: RateLimitFigures) => number
}

/** The OAuth client a request names (Basic user, else the form's `client_id`), as the gate keys it. */
export const oauthClientOf = (authorization: string | undefined, form: string | undefined): string | undefined => {
  if (authorization !== undefined && /^basic /i.test(authorization)) {
    const decoded = Buffer.from(authorization.slice(6).trim(), "base64").toString("utf8")
    const colon = decoded.indexOf(":")
    // RFC 6749 §2.3.1: the id is form-encoded inside Basic, as the token endpoint reads it
    const id = (colon < 0 ? decoded : decoded.slice(0, colon)).replace(/\+/g, " ")
    try {
      return decodeURIComponent(id)
    } catch {
      return id
    }
  }
  if (form === undefined) return undefined
  // a repeated client_id is refused by the endpoint; the first one is counted here
  return new URLSearchParams(form).get("client_id") ?? undefined
}

/** the developer of an issuer path `/oauth/<developerId>/…` */
export const issuerDeveloperOf = (url: string): string | undefined => url.match(/^\/oauth\/([A-Za-z0-9_]+)\//)?.[1]

/** decisions §11: SCIM requests per token per minute; a developer's SCIM traffic is capped at two tokens' worth */
export const SCIM_PER_TOKEN = 600
export const SCIM_PER_DEVELOPER = 1_200

export class RatePolicy extends Context.Tag("agent-auth/RatePolicy")<RatePolicy, RatePolicyValue>() {}

export const WINDOW_MS = 60_000
export const HOUR_MS = 3_600_000

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

export const policies = {
  exempt: { exempt: true } satisfies RatePolicyValue,
  route: (routeLimit: number) => ({ routeLimit }) satisfies RatePolicyValue
}

export { HttpApiMiddleware }
