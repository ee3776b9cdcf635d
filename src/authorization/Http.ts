import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { Config } from "../Config.ts"
import { Passkeys } from "../passkeys/Service.ts"
import { fromAnotherSite } from "../platform/FormOrigin.ts"
import { nowMillis } from "../platform/Time.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import {
  type AgentSuspended, type FidoRequired, Forbidden, Gone, type NotFound, type PolicyDenied, type PrincipalInactive, type PrincipalMismatch
} from "../platform/Errors.ts"
import { SsoConsent } from "../sso/Consent.ts"
import { SESSION_COOKIE } from "../sso/Sessions.ts"
import { consentPage, htmlResponse as html, messagePage, PASSKEY_SCRIPT, seeOther } from "./ConsentPage.ts"
import { ANSWER_IN_ITS_BROWSER, interactionCookieOk, withIssuer } from "./OAuthRequests.ts"
import { Authorization, type ConsentView } from "./Service.ts"

/** where the person goes after deciding: redirectUri with code (or error) and state */
export const redirectLocation = (redirectUri: string, params: Record<string, string | null | undefined>) => {
  const url = new URL(redirectUri)
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined) url.searchParams.set(k, v)
  return url.toString()
}

const defined = <T extends Record<string, unknown>>(o: T) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined)) as { [K in keyof T]: Exclude<T[K], null> }

export const AuthorizationHttp = HttpApiBuilder.group(Api, "authorization", (handlers) =>
  Effect.gen(function*() {
    const authorization = yield* Authorization
    const passkeys = yield* Passkeys
    const sso = yield* SsoConsent
    const config = yield* Config

    /** decisions §19: the consent page's forms answer only posts from the page itself */
    const sameSiteForm = <E, R>(answer: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> =>
        fromAnotherSite(request, config.publicBaseUrl)
          ? Effect.succeed(html(messagePage("Not allowed", "This answer was sent from another site, so it was refused. Nothing was shared or changed. (FORBIDDEN)"), 403))
          : answer)

    /** the SSO sign-in of the person answering (decisions §12): only when the request's developer enforces SSO */
    const ssoApproval = (authRequestId: string) =>
      Effect.gen(function*() {
        const request = yield* authorization.getPendingRequest(authRequestId)
        if (request === undefined) return undefined
        const http = yield* HttpServerRequest.HttpServerRequest
        const gate = yield* sso.gate(request.developerId, request.principalId, http.cookies[SESSION_COOKIE])
        return gate.kind === "signedIn" ? gate.approval : undefined
      })

    /** the sign-in, as an effect the approval runs only when the developer requires SSO (on this request's cookies) */
    const lazySso = (authRequestId: string) =>
      Effect.map(HttpServerRequest.HttpServerRequest, (http) =>
        ssoApproval(authRequestId).pipe(Effect.provideService(HttpServerRequest.HttpServerRequest, http), Effect.orDie))

    /**
     * decisions §22.5: an OAuth request is answered only from the browser that started it (its
     * interaction cookie) once the person signed in; `answer` gets the request's view
     */
    const fromItsBrowser = <A, E, R>(id: string, answer: (view: ConsentView) => Effect.Effect<A, E, R>) =>
      Effect.gen(function*() {
        const view = yield* authorization.consent(id)
        const http = yield* HttpServerRequest.HttpServerRequest
        if (!interactionCookieOk(view, http.cookies)) {
          return yield* Effect.fail(new Forbidden({ message: ANSWER_IN_ITS_BROWSER }))
        }
        return yield* answer(view)
      })

    /** the page shown when a request cannot be answered any more */
    const unavailable = (e: NotFound | Gone | AgentSuspended | FidoRequired | PrincipalInactive | PrincipalMismatch | Forbidden | PolicyDenied) =>
      e._tag === "PolicyDenied"
        ? html(messagePage("Not allowed", `${e.message}. Nothing was shared. (POLICY_DENIED)`), 403)
        : e._tag === "PrincipalMismatch"
        ? html(messagePage("Not you", `${e.message}. Nothing was shared. (PRINCIPAL_MISMATCH)`), 403)
        : e._tag === "Forbidden"
        ? html(messagePage("Not allowed", `${e.message}. Nothing was shared.`), 403)
        : e._tag === "NotFound"
        ? html(messagePage("Request not found", "This authorization request does not exist. Check the link you followed."), 404)
        : e._tag === "FidoRequired"
        ? html(messagePage("Passkey required", e.message), 403)
        : e._tag === "AgentSuspended"
        ? html(messagePage("Agent suspended", "The application asking for access is suspended. Nothing was shared."), 403)
        : e._tag === "PrincipalInactive"
        ? html(messagePage("Not allowed", "Your account is deactivated in this organisation's directory. Nothing was shared."), 403)
        : html(messagePage("Request no longer available", e.message.includes("expired")
          ? "This authorization request has expired. Go back to the application and start again."
          : "This authorization request has already been answered."), 410)

    return handlers
      .handle("authorize", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => authorization.authorize(d, payload)))
      .handle("token", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => authorization.exchangeCode(d, payload)))
      .handle("refresh", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => authorization.refresh(d, payload)))
      .handle("consentJson", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const view = yield* authorization.consent(path.id, urlParams.lang)
          if (view.status !== "pending") return yield* Effect.fail(new Gone({ message: `Authorization request ${view.status}` }))
          const { redirectUri: _redirect, principalId: _principal, developerId: _developer, developerName: _name, grantTtlSeconds: _ttl, notice, ...rest } = view
          return notice === null ? rest : { ...rest, notice }
        }))
      .handle("approve", ({ path }) =>
        // the browser is checked on the request the approval locks (one read fewer for the person's click, issue 37)
        Effect.gen(function*() {
          const http = yield* HttpServerRequest.HttpServerRequest
          const sso = yield* lazySso(path.id)
          const a = yield* authorization.approveRequest(path.id, { fidoVerified: false, sso, browser: { cookies: http.cookies } })
          return defined({ code: a.code, redirectUri: a.redirectUri, state: a.state })
        }))
      .handle("deny", ({ path }) => fromItsBrowser(path.id, () => Effect.map(authorization.denyRequest(path.id), defined)))
      .handle("passkeyOptions", ({ path }) => passkeys.assertionOptionsForRequest(path.id) as any)
      .handle("passkeyVerify", ({ path, payload }) =>
        Effect.map(Effect.flatMap(ssoApproval(path.id), (signedIn) => passkeys.verifyAssertionForRequest(path.id, payload, signedIn)), (outcome) => ({
          verified: true,
          grantId: outcome.grantId,
          location: outcome.redirectUri ? redirectLocation(outcome.redirectUri, { code: outcome.code, state: outcome.state }) : null
        })) as any)
      .handle("consentPage", ({ urlParams }) =>
        Effect.gen(function*() {
          if (!urlParams.req) return html(messagePage("Request not found", "The link is missing its request."), 404)
          const view = yield* authorization.consent(urlParams.req, urlParams.lang)
          if (view.status === "expired") {
            return html(messagePage("Request expired", "This authorization request has expired. Go back to the application and start again."), 410)
          }
          if (view.status === "authenticating") {
            return html(messagePage("Sign in first", "Sign in before answering this request: go back to the application and start again."), 403)
          }
          if (view.status !== "pending") {
            return html(messagePage("Already answered", `This authorization request was already ${view.status}.`), 410)
          }
          const cookies = (yield* HttpServerRequest.HttpServerRequest).cookies
          if (!interactionCookieOk(view, cookies)) {
            return html(messagePage("Not allowed", "This authorization can be answered only in the browser that started it. Nothing was shared."), 403)
          }
          // decisions §12: with SSO enforced, the person signs in at their provider first, and only the principal answers
          const http = yield* HttpServerRequest.HttpServerRequest
          const gate = yield* sso.gate(view.developerId, view.principalId, http.cookies[SESSION_COOKIE])
          const nowMs = yield* nowMillis
          if (gate.kind === "open") return html(consentPage(view, { nowMs }))
          if (gate.kind === "mismatch") {
            return html(messagePage("Not you", "You are signed in as someone else than the person this request is for. Nothing was shared. (PRINCIPAL_MISMATCH)"), 403)
          }
          if (gate.kind === "signIn") {
            if (urlParams.error === "access_denied") {
              return html(messagePage("Sign-in refused", "Your organisation's sign-in did not succeed, so this request cannot be answered. Nothing was shared."), 401)
            }
            const where = yield* sso.signIn(view.developerId, view.id).pipe(
              Effect.catchAll((e) => Effect.succeed({ error: e.message } as const))
            )
            if ("error" in where) return html(messagePage("Sign-in unavailable", `Your organisation's sign-in cannot start: ${where.error}`), 502)
            if ("location" in where) return seeOther(where.location, { "set-cookie": where.browserCookie })
            return html(messagePage("Sign in", "Sign in with your organisation to answer this request.", where.choices.map((c) => ({ text: c.name, href: c.href }))))
          }
          const ceiling = gate.approval.scopeCeiling
          const approvable = view.scopes.filter((s) => ceiling.includes(s))
          if (approvable.length === 0) {
            return html(messagePage("Not allowed", "None of the requested scopes is allowed for your groups. Nothing was shared."), 403)
          }
          const dropped = view.scopes.length - approvable.length
          return html(consentPage({ ...view, scopes: approvable }, {
            nowMs,
            signedInAs: { principalId: gate.session.principalId, connectionName: gate.connectionName },
            notice: `Signed in as ${gate.session.principalId} through your organisation.${dropped > 0 ? ` ${dropped} requested scope(s) are outside what your groups allow and will not be granted.` : ""}`
          }))
        }).pipe(Effect.catchAll(unavailable)))
      .handle("approveForm", ({ payload }) =>
        sameSiteForm(fromItsBrowser(payload.req, (view) =>
          Effect.flatMap(lazySso(payload.req), (sso) => authorization.approveRequest(payload.req, { fidoVerified: false, sso, language: payload.lang, browser: "checked" })).pipe(
            Effect.map((a) =>
              a.redirectUri
                ? seeOther(redirectLocation(a.redirectUri, withIssuer(view, { code: a.code, state: a.state })))
                : html(messagePage("Approved", `Access approved. Your code is ${a.code}.`))
            )
          )).pipe(Effect.catchAll(unavailable))))
      .handle("denyForm", ({ payload }) =>
        sameSiteForm(fromItsBrowser(payload.req, (view) =>
          authorization.denyRequest(payload.req).pipe(
            Effect.map((d) =>
              d.redirectUri
                ? seeOther(redirectLocation(d.redirectUri, withIssuer(view, { error: "access_denied", state: d.state })))
                : html(messagePage("Denied", "You denied the request. Nothing was shared."))
            )
          )).pipe(Effect.catchAll(unavailable))))
      .handle("passkeyScript", () =>
        Effect.succeed(HttpServerResponse.text(PASSKEY_SCRIPT, {
          contentType: "text/javascript; charset=utf-8",
          headers: { "cache-control": "public, max-age=300", "x-content-type-options": "nosniff" }
        })))
  }))
