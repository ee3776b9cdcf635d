/**
 * SSO handlers (decisions §12): thin, over SsoAdmin (connections), SsoSessions, SsoLogin and the
 * OIDC client. The browser callback answers 303 (consent page, permissions page or the stored
 * redirect, with the `__Host-` session cookie) or, refused, 303 with `error=access_denied`; the
 * JSON callback answers the session or 401 SSO_AUTH_FAILED / 502 SSO_ERROR.
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { htmlResponse as htmlPage, messagePage, seeOther } from "../authorization/ConsentPage.ts"
import { CurrentDeveloper, type Developer } from "../platform/Auth.ts"
import { Entitlements } from "../billing/Entitlements.ts"
import { BadRequest, SsoAuthFailed } from "../platform/Errors.ts"
import { pageParams } from "../platform/Pagination.ts"
import { SsoAdmin } from "./Admin.ts"
import { browserRefused, browserSignedIn, browserStateless, sessionAnswer } from "./Browser.ts"
import { SsoConnections } from "./Connections.ts"
import { type LoginState, SsoLogin } from "./Login.ts"
import { OidcClient } from "./Oidc.ts"
import { SsoSessions } from "./Sessions.ts"

const NO_STORE = { "cache-control": "no-store", "referrer-policy": "no-referrer" }

export const SsoConnectionsHttp = HttpApiBuilder.group(Api, "ssoConnections", (handlers) =>
  Effect.gen(function*() {
    const admin = yield* SsoAdmin
    const sessions = yield* SsoSessions
    const entitlements = yield* Entitlements
    const dev = CurrentDeveloper
    const capOf = (developer: Developer) => {
      const plan = entitlements.plan(developer)
      return { limit: plan.limits.ssoConnections, planName: plan.name }
    }
    return handlers
      .handle("create", ({ payload }) => Effect.flatMap(dev, (d) => admin.create(d.id, payload, capOf(d))))
      .handle("list", () => Effect.flatMap(dev, (d) => admin.list(d.id)))
      .handle("get", ({ path }) => Effect.flatMap(dev, (d) => admin.get(d.id, path.id)))
      .handle("update", ({ path, payload }) => Effect.flatMap(dev, (d) => admin.update(d.id, path.id, payload)))
      .handle("remove", ({ path }) => Effect.flatMap(dev, (d) => admin.remove(d.id, path.id)))
      .handle("test", ({ path }) => Effect.flatMap(dev, (d) => admin.test(d.id, path.id)))
      .handle("enforce", ({ payload }) => Effect.flatMap(dev, (d) => admin.enforce(d.id, payload.enforce)))
      .handle("sessions", ({ urlParams }) =>
        Effect.gen(function*() {
          const d = yield* dev
          return yield* sessions.list(d.id, yield* pageParams(urlParams))
        }))
      .handle("removeSession", ({ path }) => Effect.flatMap(dev, (d) => sessions.remove(d.id, path.id)))
      .handle("setConfig", ({ payload }) => Effect.flatMap(dev, (d) => admin.setLegacy(d.id, payload, capOf(d))))
      .handle("getConfig", () => Effect.flatMap(dev, (d) => admin.getLegacy(d.id)))
      .handle("removeConfig", () => Effect.flatMap(dev, (d) => admin.removeLegacy(d.id)))
  }))

export const SsoLoginHttp = HttpApiBuilder.group(Api, "ssoLogin", (handlers) =>
  Effect.gen(function*() {
    const login = yield* SsoLogin
    const oidc = yield* OidcClient
    const connections = yield* SsoConnections

    /** an OIDC login state's provider answer → the session (no cookie yet) */
    const completeOidc = (loginState: LoginState, code: string, iss: string | undefined) =>
      Effect.gen(function*() {
        if (loginState.protocol !== "oidc" || loginState.nonce === null) {
          return yield* Effect.fail(new SsoAuthFailed({ message: "The sign-in state was not made for OIDC" }))
        }
        const connection = yield* login.connectionOf(loginState)
        const identity = yield* oidc.exchange(connection, { code, iss, codeVerifier: loginState.codeVerifier, nonce: loginState.nonce })
        return yield* login.complete(loginState, { connectionId: connection.id, ...identity })
      })

    return handlers
      .handle("login", ({ urlParams }) =>
        Effect.gen(function*() {
          if (!urlParams.org) return yield* Effect.fail(new BadRequest({ message: "org (the developer id) is required" }))
          const mode = urlParams.mode ?? "json"
          if (mode !== "json" && mode !== "redirect") return yield* Effect.fail(new BadRequest({ message: "mode must be json or redirect" }))
          const begun = yield* login.begin({
            developerId: urlParams.org,
            connectionId: urlParams.connection,
            domain: urlParams.domain,
            redirectUri: urlParams.redirect_uri,
            loginHint: urlParams.login_hint,
            ...(urlParams.consent ? { target: { kind: "consent" as const, consentRequestId: urlParams.consent } } : {})
          })
          const cookie = { "set-cookie": begun.browserCookie }
          if (mode === "redirect" || urlParams.consent) {
            return HttpServerResponse.empty({ status: 302, headers: { location: begun.authorizeUrl, ...NO_STORE, ...cookie } })
          }
          const { browserCookie: _cookie, ...answer } = begun
          return yield* HttpServerResponse.json(answer, { headers: { ...NO_STORE, ...cookie } }).pipe(Effect.orDie)
        }))
      .handle("oidcCallback", ({ urlParams }) =>
        Effect.gen(function*() {
          if (!urlParams.state) return browserStateless("The sign-in answer has no state. Start again.")
          const taken = yield* Effect.either(login.takeState(urlParams.state))
          if (taken._tag === "Left") return browserStateless(taken.left.message)
          const loginState = taken.right
          // login CSRF: an answer carried by a browser that did not start this sign-in opens no session in it
          const http = yield* HttpServerRequest.HttpServerRequest
          if (!login.startedHere(loginState, http.cookies)) {
            return yield* browserRefused(login, loginState, new SsoAuthFailed({ message: "The sign-in was started in another browser" }))
          }
          if (urlParams.error !== undefined || !urlParams.code) {
            return yield* browserRefused(login, loginState, new SsoAuthFailed({ message: `The identity provider answered ${urlParams.error ?? "without a code"}` }))
          }
          return yield* completeOidc(loginState, urlParams.code, urlParams.iss).pipe(
            Effect.flatMap((result) => browserSignedIn(login, loginState, result)),
            Effect.catchAll((e) => browserRefused(login, loginState, e))
          )
        }))
      .handle("oidcCallbackJson", ({ payload }) =>
        Effect.gen(function*() {
          const loginState = yield* login.takeState(payload.state)
          return sessionAnswer(yield* completeOidc(loginState, payload.code, undefined))
        }))
      .handle("permissionsLogin", ({ urlParams }) =>
        Effect.gen(function*() {
          if (!urlParams.org) return htmlPage(messagePage("Organisation missing", "The sign-in link is missing its organisation."), 400)
          const enforcing = (yield* connections.list(urlParams.org)).filter((c) => c.status === "active" && c.enforce)
          const chosen = urlParams.connection === undefined ? (enforcing.length === 1 ? enforcing[0] : undefined) : enforcing.find((c) => c.id === urlParams.connection)
          if (enforcing.length === 0 || (urlParams.connection !== undefined && chosen === undefined)) {
            return htmlPage(messagePage("Not available", "This organisation does not sign people in to this page through SSO."), 404)
          }
          if (chosen === undefined) {
            return htmlPage(messagePage("Sign in", "Choose how to sign in.", enforcing.map((c) => ({
              text: c.name,
              href: `/permissions/login?${new URLSearchParams({ org: urlParams.org!, connection: c.id })}`
            }))))
          }
          const begun = yield* login.begin({ developerId: urlParams.org, connectionId: chosen.id, target: { kind: "permissions" } }).pipe(Effect.either)
          if (begun._tag === "Left") return htmlPage(messagePage("Sign-in unavailable", begun.left.message), 502)
          return seeOther(begun.right.authorizeUrl, { "set-cookie": begun.right.browserCookie })
        }))
  }))
