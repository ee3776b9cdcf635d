/**
 * Server-side SSO login states (decisions §12): what `GET /sso/login` must find again at the
 * callback (connection, nonce, PKCE verifier, SAML request id, where to go back), single use and
 * 10 minutes. With Redis they live under a Redis key taken with GETDEL; in the embedded mode
 * (REDIS_URL=memory://) in `sso_login_states`, taken with DELETE … RETURNING. Either way the
 * expiry is checked against the service's Clock (so TestClock moves it), and the stored key is an
 * HMAC of the state under SSO_STATE_SECRET, so whoever reads the store cannot replay a state.
 *
 * Browser binding (login CSRF): the answer that starts a sign-in sets a `__Host-` pre-login cookie
 * whose name and value are HMACs of the state, so only the browser that started this sign-in
 * carries it (nobody else can compute it, and `__Host-` cannot be set by another host); a browser
 * callback without it is refused. One cookie per state, so two sign-ins in two tabs both work.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import { Config } from "../Config.ts"
import { Counters } from "../platform/Counters.ts"
import { nowMillis } from "../platform/Time.ts"

export const STATE_TTL_MS = 10 * 60 * 1000
export const PRE_LOGIN_COOKIE_PREFIX = "__Host-aas_login_"

/** Where the browser goes once signed in. */
export type LoginTarget =
  | { readonly kind: "consent"; readonly consentRequestId: string }
  | { readonly kind: "permissions" }
  /** an OAuth authorization's sign-in (decisions §22.5): back to its issuer's SSO step, which reads the session */
  | { readonly kind: "oauth"; readonly returnTo: string }

export interface LoginState {
  readonly state: string
  readonly developerId: string
  readonly connectionId: string
  readonly protocol: "oidc" | "saml"
  readonly nonce: string | null
  readonly codeVerifier: string | null
  /** the SAML AuthnRequest ID (null for OIDC) */
  readonly requestId: string | null
  /** one of the connection's allowedRedirectUris, when the login named one */
  readonly redirectUri: string | null
  readonly target: LoginTarget | null
  readonly expiresAt: Date
}

export type NewLoginState = Omit<LoginState, "expiresAt">

/** a fresh state value (32 random bytes, base64url) */
export const newState = () => randomBytes(32).toString("base64url")

export interface LoginStatesService {
  /** stores a new state (made with `newState`) for 10 minutes */
  readonly put: (record: NewLoginState) => Effect.Effect<LoginState>
  /** the record, removed (single use); undefined when unknown, used or expired */
  readonly take: (state: string) => Effect.Effect<LoginState | undefined>
  /** the Set-Cookie value binding this state to the browser that receives it */
  readonly browserCookie: (state: string, protocol: "oidc" | "saml") => string
  /** whether a request's cookies carry the state's pre-login cookie */
  readonly carriedBy: (state: string, cookies: Readonly<Record<string, string>>) => boolean
}

export class LoginStates extends Context.Tag("agent-auth/SsoLoginStates")<LoginStates, LoginStatesService>() {}

interface Stored extends Omit<LoginState, "expiresAt"> {
  readonly expiresAt: number
}

export const LoginStatesLive = Layer.effect(
  LoginStates,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const counters = yield* Counters
    const redis = counters.kind === "redis" ? counters.redis : undefined
    const keyOf = (state: string) => createHmac("sha256", config.sso.stateSecret).update(state).digest("base64url")
    const redisKey = (state: string) => `${counters.prefix}sso:state:${keyOf(state)}`
    const fresh = (stored: Stored | undefined, ms: number): LoginState | undefined =>
      stored === undefined || stored.expiresAt <= ms ? undefined : { ...stored, expiresAt: new Date(stored.expiresAt) }

    const put: LoginStatesService["put"] = (record) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const state = record.state
        const stored: Stored = { ...record, expiresAt: ms + STATE_TTL_MS }
        if (redis !== undefined) {
          yield* Effect.promise(() => redis.set(redisKey(state), JSON.stringify(stored), "PX", STATE_TTL_MS))
        } else {
          // the embedded mode: expired rows go as new ones come
          yield* sql`DELETE FROM sso_login_states WHERE expires_at <= ${new Date(ms)}`
          yield* sql`INSERT INTO sso_login_states (state, developer_id, connection_id, protocol, nonce, code_verifier, request_id,
                       redirect_uri, target, expires_at, created_at)
                     VALUES (${keyOf(state)}, ${record.developerId}, ${record.connectionId}, ${record.protocol}, ${record.nonce},
                       ${record.codeVerifier}, ${record.requestId}, ${record.redirectUri},
                       ${record.target === null ? null : JSON.stringify(record.target)}::jsonb, ${new Date(stored.expiresAt)}, ${new Date(ms)})`
        }
        return { ...stored, expiresAt: new Date(stored.expiresAt) }
      }).pipe(Effect.orDie)

    const take: LoginStatesService["take"] = (state) =>
      Effect.gen(function*() {
        if (!/^[A-Za-z0-9_-]{20,100}$/.test(state)) return undefined
        const ms = yield* nowMillis
        if (redis !== undefined) {
          const raw = yield* Effect.promise(() => redis.getdel(redisKey(state)))
          return fresh(raw === null ? undefined : JSON.parse(raw) as Stored, ms)
        }
        const [row] = yield* sql<{
          developerId: string; connectionId: string; protocol: "oidc" | "saml"; nonce: string | null; codeVerifier: string | null
          requestId: string | null; redirectUri: string | null; target: unknown; expiresAt: Date
        }>`DELETE FROM sso_login_states WHERE state = ${keyOf(state)}
           RETURNING developer_id, connection_id, protocol, nonce, code_verifier, request_id, redirect_uri, target, expires_at`
        if (row === undefined) return undefined
        const target = (typeof row.target === "string" ? JSON.parse(row.target) : row.target) as LoginTarget | null
        return fresh({
          state,
          developerId: row.developerId,
          connectionId: row.connectionId,
          protocol: row.protocol,
          nonce: row.nonce,
          codeVerifier: row.codeVerifier,
          requestId: row.requestId,
          redirectUri: row.redirectUri,
          target,
          expiresAt: row.expiresAt.getTime()
        }, ms)
      }).pipe(Effect.orDie)

    const mac = (purpose: string, state: string) => createHmac("sha256", config.sso.stateSecret).update(`${purpose}|${state}`).digest("base64url")
    const cookieName = (state: string) => PRE_LOGIN_COOKIE_PREFIX + mac("name", state).slice(0, 16)

    const browserCookie: LoginStatesService["browserCookie"] = (state, protocol) =>
      // SAML answers with the IdP's cross-site form post, which never carries a SameSite=Lax cookie
      `${cookieName(state)}=${mac("browser", state)}; Path=/; Max-Age=${STATE_TTL_MS / 1000}; HttpOnly; Secure; SameSite=${protocol === "saml" ? "None" : "Lax"}`

    const carriedBy: LoginStatesService["carriedBy"] = (state, cookies) => {
      const carried = cookies[cookieName(state)]
      if (carried === undefined) return false
      const expected = Buffer.from(mac("browser", state))
      const got = Buffer.from(carried)
      return got.length === expected.length && timingSafeEqual(got, expected)
    }

    return { put, take, browserCookie, carriedBy }
  })
)
