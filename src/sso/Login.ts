/**
 * The SSO login both protocols share (decisions §12, SSO-CONTRACT.md): `begin` picks the
 * connection (by id, by claimed domain, or the developer's only one), stores the single-use state
 * and asks the protocol for the provider's URL; a callback (OIDC here, the SAML ACS in
 * src/sso/saml/) `takeState`s, verifies the provider's answer into an `SsoIdentity`, and calls
 * `complete`, which maps it to the directory principal (JIT), opens the session, emits `sso.login`
 * and computes the groups' scopes. The browser answers (cookie, 303 on success, 303 with
 * `error=access_denied` on refusal) are built here too, so every protocol behaves the same.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { Config } from "../Config.ts"
import {
  BadRequest, DomainNotConfigured, InvalidRedirectUri, NotFound, type SsoError, SsoAuthFailed
} from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { nowMillis } from "../platform/Time.ts"
import { Principals } from "../principals/Service.ts"
import { type Connection, SsoConnections } from "./Connections.ts"
import { type SsoIdentity, SsoIdentities } from "./Identity.ts"
import { OidcClient } from "./Oidc.ts"
import { SamlProtocol } from "./Protocol.ts"
import { sessionCookie as cookieFor, SsoSessions } from "./Sessions.ts"
import { type LoginState, LoginStates, type LoginTarget, newState } from "./States.ts"

export type { LoginState, LoginTarget } from "./States.ts"
export type { SsoIdentity } from "./Identity.ts"

export interface BeginInput {
  readonly developerId: string
  readonly connectionId?: string | undefined
  readonly domain?: string | undefined
  readonly redirectUri?: string | undefined
  readonly loginHint?: string | undefined
  readonly target?: LoginTarget | undefined
}

export interface SsoSessionResult {
  readonly sessionId: string
  readonly principalId: string
  readonly developerId: string
  readonly expiresAt: string
  readonly groups: ReadonlyArray<string>
  readonly mappedScopes: ReadonlyArray<string>
  /** the secret the session cookie carries (never shown in JSON) */
  readonly token: string
  /** a permissions-page login: the page's URL with a fresh principal session */
  readonly dashboardUrl: string | null
}

export interface SsoLoginService {
  /** also the Set-Cookie value of the pre-login cookie every browser answer that starts the sign-in sets (login CSRF) */
  readonly begin: (input: BeginInput) => Effect.Effect<
    { authorizeUrl: string; protocol: "oidc" | "saml"; connectionId: string; browserCookie: string },
    BadRequest | NotFound | DomainNotConfigured | InvalidRedirectUri | SsoError
  >
  /** the stored state, removed (single use); SSO_AUTH_FAILED when unknown, used or older than 10 minutes */
  readonly takeState: (state: string) => Effect.Effect<LoginState, SsoAuthFailed>
  /** whether the browser's cookies carry the pre-login cookie of this state (the browser that started it) */
  readonly startedHere: (loginState: LoginState, cookies: Readonly<Record<string, string>>) => boolean
  /** the connection a state was made for (live and active), else SSO_AUTH_FAILED */
  readonly connectionOf: (loginState: LoginState) => Effect.Effect<Connection, SsoAuthFailed>
  readonly complete: (loginState: LoginState, identity: SsoIdentity) => Effect.Effect<SsoSessionResult, SsoAuthFailed>
  /** the Set-Cookie header value of the session */
  readonly sessionCookie: (result: SsoSessionResult) => Effect.Effect<string>
  /** where the browser goes after a login: the consent page, the permissions page, the stored redirect; null: nowhere (say so on a page) */
  readonly redirectLocation: (loginState: LoginState, result: SsoSessionResult) => string | null
  /** where the browser goes after a refusal, with error=access_denied; null: nowhere */
  readonly refusedLocation: (loginState: LoginState) => string | null
}

export class SsoLogin extends Context.Tag("agent-auth/SsoLogin")<SsoLogin, SsoLoginService>() {}

/** requested ∪ … : the scopes a person's groups map to, with the connection's defaults */
export const mappedScopesOf = (connection: Connection, groups: ReadonlyArray<string>): Array<string> => {
  const scopes = new Set(connection.defaultScopes)
  for (const group of groups) for (const scope of connection.groupMappings[group] ?? []) scopes.add(scope)
  return [...scopes].sort()
}

const withParams = (uri: string, params: Record<string, string>) => {
  const url = new URL(uri)
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v)
  return url.toString()
}

export const SsoLoginLive = Layer.effect(
  SsoLogin,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const connections = yield* SsoConnections
    const states = yield* LoginStates
    const oidc = yield* OidcClient
    const saml = yield* SamlProtocol
    const identities = yield* SsoIdentities
    const sessions = yield* SsoSessions
    const events = yield* Events
    const principals = yield* Principals

    const pick = (input: BeginInput) =>
      Effect.gen(function*() {
        const active = (yield* connections.list(input.developerId)).filter((c) => c.status === "active")
        if (input.connectionId !== undefined) {
          const found = active.find((c) => c.id === input.connectionId)
          if (found === undefined) return yield* Effect.fail(new NotFound({ message: "SSO connection not found" }))
          return found
        }
        const hinted = input.loginHint?.includes("@") ? input.loginHint.split("@").pop()!.toLowerCase() : undefined
        const domain = input.domain?.trim().toLowerCase() ?? hinted
        if (domain !== undefined && domain !== "") {
          const claimed = active.find((c) => c.domains.includes(domain))
          if (claimed !== undefined) return claimed
          // a domain named explicitly and claimed by no connection: no fallback to another connection
          if (input.domain !== undefined) {
            return yield* Effect.fail(new DomainNotConfigured({ message: `No SSO connection claims the domain ${domain}` }))
          }
        }
        if (active.length === 1) return active[0]!
        if (active.length === 0) return yield* Effect.fail(new NotFound({ message: "This organisation has no active SSO connection" }))
        return yield* Effect.fail(new BadRequest({ message: "This organisation has several SSO connections: name connection or domain" }))
      })

    const begin: SsoLoginService["begin"] = (input) =>
      Effect.gen(function*() {
        const connection = yield* pick(input)
        if (input.redirectUri !== undefined && !connection.allowedRedirectUris.includes(input.redirectUri)) {
          return yield* Effect.fail(new InvalidRedirectUri({ message: "redirect_uri is not one of the connection's allowedRedirectUris" }))
        }
        const common = {
          developerId: connection.developerId,
          connectionId: connection.id,
          protocol: connection.protocol,
          redirectUri: input.redirectUri ?? null,
          target: input.target ?? null
        }
        const state = newState()
        if (connection.protocol === "oidc") {
          const nonce = randomBytes(32).toString("base64url")
          const made = yield* oidc.authorizationUrl(connection, { state, nonce, loginHint: input.loginHint })
          yield* states.put({ ...common, state, nonce, codeVerifier: made.codeVerifier, requestId: null })
          return { authorizeUrl: made.url, protocol: "oidc" as const, connectionId: connection.id, browserCookie: states.browserCookie(state, "oidc") }
        }
        // SAML: RelayState = state; the AuthnRequest ID is kept with it for InResponseTo
        const request = yield* saml.authorizeUrl(connection, { state, loginHint: input.loginHint })
        yield* states.put({ ...common, state, nonce: null, codeVerifier: null, requestId: request.requestId })
        return { authorizeUrl: request.url, protocol: "saml" as const, connectionId: connection.id, browserCookie: states.browserCookie(state, "saml") }
      })

    const takeState: SsoLoginService["takeState"] = (state) =>
      Effect.flatMap(states.take(state), (found) =>
        found === undefined
          ? Effect.fail(new SsoAuthFailed({ message: "The sign-in state is unknown, already used or expired (10 minutes): start again" }))
          : Effect.succeed(found))

    const connectionOf: SsoLoginService["connectionOf"] = (loginState) =>
      Effect.flatMap(connections.findById(loginState.connectionId), (connection) =>
        connection === undefined || connection.status !== "active" || connection.developerId !== loginState.developerId
          ? Effect.fail(new SsoAuthFailed({ message: "The SSO connection was removed or deactivated" }))
          : Effect.succeed(connection))

    const complete: SsoLoginService["complete"] = (loginState, identity) =>
      Effect.gen(function*() {
        const connection = yield* connectionOf(loginState)
        if (identity.connectionId !== connection.id) {
          return yield* Effect.fail(new SsoAuthFailed({ message: "The identity was established for another connection" }))
        }
        const resolved = yield* identities.resolve(connection, identity)
        const mappedScopes = mappedScopesOf(connection, identity.groups)
        const made = yield* sql.withTransaction(Effect.gen(function*() {
          const made = yield* sessions.create({
            developerId: connection.developerId,
            connectionId: connection.id,
            principalId: resolved.principalId,
            identityId: resolved.identityId,
            groups: identity.groups,
            mappedScopes
          })
          yield* events.emit(connection.developerId, "sso.login", { connectionId: connection.id, protocol: connection.protocol, sessionId: made.session.sessionId })
          return made
        })).pipe(Effect.orDie)
        const dashboardUrl = loginState.target?.kind === "permissions"
          ? (yield* principals.createSession(connection.developerId, { principalId: resolved.principalId }).pipe(
              Effect.catchTag("PrincipalInactive", (e) => Effect.fail(new SsoAuthFailed({ message: e.message }))), Effect.catchTag("BadRequest", Effect.die))).dashboardUrl
          : null
        return {
          sessionId: made.session.sessionId,
          principalId: made.session.principalId,
          developerId: made.session.developerId,
          expiresAt: made.session.expiresAt.toISOString(),
          groups: [...made.session.groups],
          mappedScopes: [...made.session.mappedScopes],
          token: made.token,
          dashboardUrl
        }
      })

    const sessionCookie: SsoLoginService["sessionCookie"] = (result) =>
      Effect.map(nowMillis, (ms) => cookieFor(result.token, new Date(result.expiresAt), ms))

    const redirectLocation: SsoLoginService["redirectLocation"] = (loginState, result) =>
      loginState.target?.kind === "consent"
        ? `${config.publicBaseUrl}/consent?req=${encodeURIComponent(loginState.target.consentRequestId)}`
        : loginState.target?.kind === "permissions"
        ? result.dashboardUrl
        : loginState.target?.kind === "oauth"
        ? withParams(loginState.target.returnTo, { done: "1" })
        : loginState.redirectUri !== null
        ? withParams(loginState.redirectUri, { sso_session: result.sessionId })
        : null

    const refusedLocation: SsoLoginService["refusedLocation"] = (loginState) =>
      loginState.target?.kind === "consent"
        ? `${config.publicBaseUrl}/consent?req=${encodeURIComponent(loginState.target.consentRequestId)}&error=access_denied`
        : loginState.target?.kind === "oauth"
        ? withParams(loginState.target.returnTo, { error: "access_denied" })
        : loginState.redirectUri !== null
        ? withParams(loginState.redirectUri, { error: "access_denied" })
        : null

    const startedHere: SsoLoginService["startedHere"] = (loginState, cookies) => states.carriedBy(loginState.state, cookies)

    return { begin, takeState, startedHere, connectionOf, complete, sessionCookie, redirectLocation, refusedLocation }
  })
)
