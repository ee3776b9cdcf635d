import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Redacted } from "effect"
import { Api } from "../Api.ts"
import { Passkeys } from "../passkeys/Service.ts"
import { Config } from "../Config.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { fromAnotherSite } from "../platform/FormOrigin.ts"
import { Unauthorized } from "../platform/Errors.ts"
import { pageParams } from "../platform/Pagination.ts"
import { htmlPage } from "../platform/HtmlPage.ts"
import { CurrentPrincipal, PrincipalAuthentication } from "./Api.ts"
import { bootPage, confirmPage, messagePage, type Page, PERMISSIONS_SCRIPT, permissionsPage, removePasskeyPage } from "./Page.ts"
import { type PrincipalSession, Principals } from "./Service.ts"

/** the session token, and nothing else, authenticates the principal routes */
export const PrincipalAuthenticationLive = Layer.effect(
  PrincipalAuthentication,
  Effect.map(Principals, (principals) => ({
    principalSession: (token: Redacted.Redacted<string>) =>
      Effect.flatMap(principals.resolve(Redacted.value(token)), (session) =>
        session === undefined
          ? Effect.fail(new Unauthorized({ message: "Invalid, expired or missing principal session token" }))
          : Effect.succeed(session))
  }))
)

export const PrincipalSessionsHttp = HttpApiBuilder.group(Api, "principalSessions", (handlers) =>
  Effect.gen(function*() {
    const principals = yield* Principals
    return handlers.handle("create", ({ payload }) =>
      Effect.flatMap(CurrentDeveloper, (d) => principals.createSession(d.id, payload)))
  }))

export const PrincipalHttp = HttpApiBuilder.group(Api, "principal", (handlers) =>
  Effect.gen(function*() {
    const principals = yield* Principals
    return handlers
      .handle("grants", ({ urlParams }) =>
        Effect.gen(function*() {
          const session = yield* CurrentPrincipal
          return yield* principals.grants(session, yield* pageParams(urlParams))
        }))
      .handle("audit", ({ urlParams }) =>
        Effect.gen(function*() {
          const session = yield* CurrentPrincipal
          return yield* principals.audit(session, yield* pageParams(urlParams))
        }))
      .handle("revoke", ({ path }) =>
        Effect.flatMap(CurrentPrincipal, (session) => principals.revoke(session, path.id)).pipe(
          Effect.as(HttpServerResponse.empty({ status: 204 }))
        ))
  })).pipe(Layer.provide(PrincipalAuthenticationLive))

const html = (p: Page, status = 200) => htmlPage(p, status)

const PAGE_SIZE = 100

export const PermissionsPageHttp = HttpApiBuilder.group(Api, "permissionsPage", (handlers) =>
  Effect.gen(function*() {
    const principals = yield* Principals
    const passkeys = yield* Passkeys
    const config = yield* Config

    const expired = () =>
      html(messagePage("Link expired", "This link has expired or is not valid. Ask the application for a new one."), 401)

    /** the page for a form's session token, or the expired page; a post another site sent is refused first (decisions §19) */
    const withSession = (token: string, f: (session: PrincipalSession) => Effect.Effect<HttpServerResponse.HttpServerResponse>) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        fromAnotherSite(request, config.publicBaseUrl)
          ? Effect.succeed(html(messagePage("Not allowed", "This form was sent from another site, so it was refused. Nothing was changed. (FORBIDDEN)"), 403))
          : Effect.flatMap(principals.resolve(token), (session) => session === undefined ? Effect.succeed(expired()) : f(session)))

    const listPage = (token: string, session: PrincipalSession, notice?: string) =>
      Effect.gen(function*() {
        const { grants, nextCursor } = yield* principals.grants(session, { limit: PAGE_SIZE, cursor: undefined })
        const keys = yield* passkeys.listCredentials(session.developerId, session.principalId, { limit: 20, cursor: undefined })
        const signal = yield* passkeys.signal(session.developerId, session.principalId, { create: false })
        return html(permissionsPage({
          session: token,
          principalId: session.principalId,
          sessionExpiresAt: session.expiresAt.toISOString(),
          grants,
          more: nextCursor !== null,
          passkeys: keys.credentials,
          signal,
          ...(notice === undefined ? {} : { notice })
        }))
      })

    const findGrant = principals.grantTree

    /** the session principal's own passkey, or undefined (another's is answered like an unknown one) */
    const ownPasskey = (session: PrincipalSession, id: string) =>
      passkeys.getCredential(session.developerId, id).pipe(
        Effect.map((c) => c.principalId === session.principalId ? c : undefined),
        Effect.catchTag("NotFound", () => Effect.succeed(undefined))
      )
    const passkeyGone = "That passkey was already removed."

    return handlers
      .handle("renamePasskey", ({ payload }) =>
        withSession(payload.session, (session) =>
          Effect.gen(function*() {
            const own = yield* ownPasskey(session, payload.passkeyId)
            const name = payload.deviceName.trim()
            if (own === undefined) return yield* listPage(payload.session, session, passkeyGone)
            if (name === "") return yield* listPage(payload.session, session, "A passkey needs a name.")
            yield* passkeys.renameCredential(session.developerId, own.id, name).pipe(Effect.catchTag("NotFound", () => Effect.void))
            return yield* listPage(payload.session, session, `Passkey renamed to ${name}.`)
          })))
      .handle("removeAsk", ({ payload }) =>
        withSession(payload.session, (session) =>
          Effect.flatMap(ownPasskey(session, payload.passkeyId), (own) =>
            own === undefined ? listPage(payload.session, session, passkeyGone) : Effect.succeed(html(removePasskeyPage(payload.session, own))))))
      .handle("removeConfirm", ({ payload }) =>
        withSession(payload.session, (session) =>
          Effect.gen(function*() {
            const own = yield* ownPasskey(session, payload.passkeyId)
            if (own === undefined) return yield* listPage(payload.session, session, passkeyGone)
            yield* passkeys.deleteCredential(session.developerId, own.id).pipe(Effect.catchTag("NotFound", () => Effect.void))
            const label = own.deviceName ?? own.providerName
            return yield* listPage(payload.session, session, label ? `Passkey ${label} removed.` : "Passkey removed.")
          })))
      .handle("page", () => Effect.succeed(html(bootPage())))
      .handle("script", () =>
        Effect.succeed(HttpServerResponse.text(PERMISSIONS_SCRIPT, {
          contentType: "text/javascript; charset=utf-8",
          headers: { "cache-control": "public, max-age=300", "x-content-type-options": "nosniff" }
        })))
      .handle("view", ({ payload }) => withSession(payload.session, (s) => listPage(payload.session, s)))
      .handle("revokeAsk", ({ payload }) =>
        withSession(payload.session, (session) =>
          Effect.flatMap(findGrant(session, payload.grantId), (found) =>
            found === undefined
              ? listPage(payload.session, session, "That access was already revoked or has ended.")
              : Effect.succeed(html(confirmPage(payload.session, found.grant, found.delegated))))))
      .handle("revokeConfirm", ({ payload }) =>
        withSession(payload.session, (session) =>
          Effect.gen(function*() {
            const found = yield* findGrant(session, payload.grantId)
            if (found === undefined) return yield* listPage(payload.session, session, "That access was already revoked or has ended.")
            yield* principals.revoke(session, payload.grantId).pipe(Effect.catchTag("NotFound", () => Effect.void))
            return yield* listPage(payload.session, session, `Access for ${found.grant.agentName} was revoked.`)
          })))
  }))
