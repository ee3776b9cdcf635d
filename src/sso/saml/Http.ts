/**
 * The SAML routes' handlers. The ACS and the JSON callback share one path through the SSO core:
 * take the state (RelayState, single use), find its connection, which must be the SAML connection
 * of the path, check the Response for the request stored with the state, then `complete` (directory
 * principal, session, `sso.login`). The ACS answers the browser as the OIDC callback does: 303 with
 * the session cookie to the consent page or the stored redirect, 303 with `error=access_denied` when
 * refused, or a page when the login has nowhere to go back to.
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../../Api.ts"
import { NotFound, SsoAuthFailed } from "../../platform/Errors.ts"
import { SsoConnections } from "../Connections.ts"
import { browserRefused, browserSignedIn, browserStateless, sessionAnswer } from "../Browser.ts"
import { type LoginState, SsoLogin } from "../Login.ts"
import { SamlService } from "./Service.ts"

export const SamlHttp = HttpApiBuilder.group(Api, "saml", (handlers) =>
  Effect.gen(function*() {
    const login = yield* SsoLogin
    const connections = yield* SsoConnections
    const saml = yield* SamlService

    /** the login of a state: its SAML connection (the path's, when the ACS names one) and identity → session */
    const signIn = (loginState: LoginState, samlResponse: string, pathConnectionId: string | undefined) =>
      Effect.gen(function*() {
        if (loginState.protocol !== "saml" || loginState.requestId === null) {
          return yield* Effect.fail(new SsoAuthFailed({ message: "The sign-in state was not made for a SAML login" }))
        }
        if (pathConnectionId !== undefined && pathConnectionId !== loginState.connectionId) {
          return yield* Effect.fail(new SsoAuthFailed({ message: "The SAML Response was posted to another connection's ACS URL" }))
        }
        const connection = yield* login.connectionOf(loginState)
        const identity = yield* saml.accept(connection, { samlResponse, requestId: loginState.requestId })
        return yield* login.complete(loginState, identity)
      })

    return handlers
      .handle("samlMetadata", ({ path }) =>
        Effect.gen(function*() {
          const connection = yield* connections.findById(path.connectionId)
          if (connection === undefined || connection.protocol !== "saml") {
            return yield* Effect.fail(new NotFound({ message: "SAML connection not found" }))
          }
          return HttpServerResponse.text(yield* saml.metadataXml(connection.id), {
            contentType: "application/samlmetadata+xml",
            headers: { "cache-control": "public, max-age=300", "x-content-type-options": "nosniff" }
          })
        }))
      .handle("samlAcs", ({ path, payload }) =>
        Effect.gen(function*() {
          if (payload.RelayState === undefined) {
            return browserStateless("Sign-in started at the identity provider (IdP-initiated) is not accepted. Start from the application and sign in from there.")
          }
          const taken = yield* Effect.either(login.takeState(payload.RelayState))
          if (taken._tag === "Left") return browserStateless(taken.left.message)
          const loginState = taken.right
          // login CSRF: a Response posted by a browser that did not start this sign-in opens no session in it
          const http = yield* HttpServerRequest.HttpServerRequest
          if (!login.startedHere(loginState, http.cookies)) {
            return yield* browserRefused(login, loginState, new SsoAuthFailed({ message: "The sign-in was started in another browser" }))
          }
          return yield* signIn(loginState, payload.SAMLResponse, path.connectionId).pipe(
            Effect.flatMap((result) => browserSignedIn(login, loginState, result)),
            Effect.catchAll((e) => browserRefused(login, loginState, e))
          )
        }))
      .handle("samlCallback", ({ payload }) =>
        Effect.gen(function*() {
          const loginState = yield* login.takeState(payload.RelayState)
          return sessionAnswer(yield* signIn(loginState, payload.SAMLResponse, undefined))
        }))
  }))
