import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { Passkeys } from "../passkeys/Service.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { type AgentSuspended, type FidoRequired, Gone, type NotFound, type PrincipalInactive } from "../platform/Errors.ts"
import { consentPage, messagePage, PASSKEY_SCRIPT, type Page } from "./ConsentPage.ts"
import { Authorization } from "./Service.ts"

const html = (p: Page, status = 200) =>
  HttpServerResponse.text(p.html, {
    status,
    contentType: "text/html; charset=utf-8",
    headers: {
      "content-security-policy": p.csp,
      "x-content-type-options": "nosniff",
      "x-frame-options": "DENY",
      "referrer-policy": "no-referrer",
      "cache-control": "no-store"
    }
  })

/** where the person goes after deciding: redirectUri with code (or error) and state */
export const redirectLocation = (redirectUri: string, params: Record<string, string | null | undefined>) => {
  const url = new URL(redirectUri)
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined) url.searchParams.set(k, v)
  return url.toString()
}

const seeOther = (location: string) =>
  HttpServerResponse.empty({ status: 303, headers: { location, "cache-control": "no-store", "referrer-policy": "no-referrer" } })

const defined = <T extends Record<string, unknown>>(o: T) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined)) as { [K in keyof T]: Exclude<T[K], null> }

export const AuthorizationHttp = HttpApiBuilder.group(Api, "authorization", (handlers) =>
  Effect.gen(function*() {
    const authorization = yield* Authorization
    const passkeys = yield* Passkeys

    /** the page shown when a request cannot be answered any more */
    const unavailable = (e: NotFound | Gone | AgentSuspended | FidoRequired | PrincipalInactive) =>
      e._tag === "NotFound"
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
      .handle("consentJson", ({ path }) =>
        Effect.gen(function*() {
          const view = yield* authorization.consent(path.id)
          if (view.status !== "pending") return yield* Effect.fail(new Gone({ message: `Authorization request ${view.status}` }))
          const { redirectUri: _redirect, principalId: _principal, ...rest } = view
          return rest
        }))
      .handle("approve", ({ path }) =>
        Effect.map(authorization.approveRequest(path.id, { fidoVerified: false }), (a) =>
          defined({ code: a.code, redirectUri: a.redirectUri, state: a.state })))
      .handle("deny", ({ path }) => Effect.map(authorization.denyRequest(path.id), defined))
      .handle("passkeyOptions", ({ path }) => passkeys.assertionOptionsForRequest(path.id) as any)
      .handle("passkeyVerify", ({ path, payload }) =>
        Effect.map(passkeys.verifyAssertionForRequest(path.id, payload), (outcome) => ({
          verified: true,
          grantId: outcome.grantId,
          location: outcome.redirectUri ? redirectLocation(outcome.redirectUri, { code: outcome.code, state: outcome.state }) : null
        })) as any)
      .handle("consentPage", ({ urlParams }) =>
        Effect.gen(function*() {
          if (!urlParams.req) return html(messagePage("Request not found", "The link is missing its request."), 404)
          const view = yield* authorization.consent(urlParams.req)
          if (view.status === "expired") {
            return html(messagePage("Request expired", "This authorization request has expired. Go back to the application and start again."), 410)
          }
          if (view.status !== "pending") {
            return html(messagePage("Already answered", `This authorization request was already ${view.status}.`), 410)
          }
          return html(consentPage(view))
        }).pipe(Effect.catchAll(unavailable)))
      .handle("approveForm", ({ payload }) =>
        authorization.approveRequest(payload.req, { fidoVerified: false }).pipe(
          Effect.map((a) =>
            a.redirectUri
              ? seeOther(redirectLocation(a.redirectUri, { code: a.code, state: a.state }))
              : html(messagePage("Approved", `Access approved. Your code is ${a.code}.`))
          ),
          Effect.catchAll(unavailable)
        ))
      .handle("denyForm", ({ payload }) =>
        authorization.denyRequest(payload.req).pipe(
          Effect.map((d) =>
            d.redirectUri
              ? seeOther(redirectLocation(d.redirectUri, { error: "access_denied", state: d.state }))
              : html(messagePage("Denied", "You denied the request. Nothing was shared."))
          ),
          Effect.catchAll(unavailable)
        ))
      .handle("passkeyScript", () =>
        Effect.succeed(HttpServerResponse.text(PASSKEY_SCRIPT, {
          contentType: "text/javascript; charset=utf-8",
          headers: { "cache-control": "public, max-age=300", "x-content-type-options": "nosniff" }
        })))
  }))
