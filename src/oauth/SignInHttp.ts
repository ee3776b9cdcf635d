/** Handlers of the OAuth sign-in routes (decisions §22.5): thin, over OAuthSignIn. */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { htmlResponse, messagePage, seeOther } from "../authorization/ConsentPage.ts"
import { type PasskeyAnswer, OAuthSignIn, type SignInAnswer } from "./SignIn.ts"
import { SIGN_IN_PASSKEY_SCRIPT } from "./SignInPage.ts"

export const render = (answer: SignInAnswer) =>
  answer._tag === "Redirect"
    ? seeOther(answer.location, answer.cookie !== undefined ? { "set-cookie": answer.cookie } : {})
    : answer._tag === "Html"
    ? htmlResponse(answer.page, answer.status)
    : htmlResponse(messagePage(answer.title, answer.message), answer.status)

const json = (answer: PasskeyAnswer) =>
  answer.ok
    ? HttpServerResponse.unsafeJson(answer.body, { headers: { "cache-control": "no-store" } })
    : HttpServerResponse.unsafeJson(
      // the OAuth routes' envelope answers { error: code, error_description: message }
      { code: answer.error, message: answer.description },
      { status: answer.status, headers: { "cache-control": "no-store" } }
    )

const cookies = Effect.map(HttpServerRequest.HttpServerRequest, (r) => r.cookies)

export const OAuthSignInHttp = HttpApiBuilder.group(Api, "oauthSignIn", (handlers) =>
  Effect.gen(function*() {
    const signIn = yield* OAuthSignIn
    return handlers
      .handle("developer", ({ path, urlParams }) => Effect.flatMap(cookies, (c) => Effect.map(signIn.developer(path.developerId, urlParams.ix ?? "", c), render)))
      .handle("sso", ({ path, urlParams }) =>
        Effect.flatMap(cookies, (c) =>
          Effect.map(signIn.sso(path.developerId, urlParams.ix ?? "", c, { connection: urlParams.connection, done: urlParams.done, error: urlParams.error }), render)))
      .handle("passkey", ({ path, urlParams }) => Effect.flatMap(cookies, (c) => Effect.map(signIn.passkey(path.developerId, urlParams.ix ?? "", c), render)))
      .handle("passkeyOptions", ({ path, payload }) => Effect.flatMap(cookies, (c) => Effect.map(signIn.passkeyOptions(path.developerId, payload.ix, c), json)))
      .handle("passkeyVerify", ({ path, payload }) =>
        Effect.flatMap(cookies, (c) => Effect.map(signIn.passkeyVerify(path.developerId, payload.ix, c, payload), json)))
      .handle("passkeyScript", () =>
        Effect.succeed(HttpServerResponse.text(SIGN_IN_PASSKEY_SCRIPT, {
          contentType: "text/javascript; charset=utf-8",
          headers: { "cache-control": "public, max-age=300", "x-content-type-options": "nosniff" }
        })))
  }))
