/**
 * The answers every SSO callback gives (OIDC here, the SAML ACS in src/sso/saml/), so both
 * protocols behave alike: a completed login sets the `__Host-` session cookie and answers 303 to
 * the consent page, the permissions page or the stored redirect (a page when there is none); a
 * refused one answers 303 there with `error=access_denied` and no session; the JSON callbacks
 * answer the session without its cookie secret.
 */
import { Effect } from "effect"
import { htmlResponse, messagePage, seeOther } from "../authorization/ConsentPage.ts"
import type { SsoAuthFailed, SsoError } from "../platform/Errors.ts"
import type { LoginState, SsoLoginService, SsoSessionResult } from "./Login.ts"

/** the JSON callbacks' 200 body */
export const sessionAnswer = (r: SsoSessionResult) => ({
  sessionId: r.sessionId,
  principalId: r.principalId,
  developerId: r.developerId,
  expiresAt: r.expiresAt,
  groups: [...r.groups],
  mappedScopes: [...r.mappedScopes]
})

export const browserSignedIn = (login: SsoLoginService, loginState: LoginState, result: SsoSessionResult) =>
  Effect.map(login.sessionCookie(result), (cookie) => {
    const location = login.redirectLocation(loginState, result)
    return location !== null
      ? seeOther(location, { "set-cookie": cookie })
      : htmlResponse(messagePage("Signed in", "You are signed in with your organisation. You can close this page."), 200, { "set-cookie": cookie })
  })

export const browserRefused = (login: SsoLoginService, loginState: LoginState, e: SsoAuthFailed | SsoError) =>
  Effect.gen(function*() {
    yield* Effect.logInfo("SSO sign-in refused").pipe(Effect.annotateLogs({ connectionId: loginState.connectionId, code: e.code, reason: e.message }))
    const location = login.refusedLocation(loginState)
    if (location !== null) return seeOther(location)
    return e._tag === "SsoError"
      ? htmlResponse(messagePage("Sign-in failed", "Your organisation's identity provider could not be reached. Try again."), 502)
      : htmlResponse(messagePage("Sign-in failed", "Your organisation's sign-in was refused."), 401)
  })

/** a callback whose state is missing, unknown, used or expired: nowhere stored to go back to */
export const browserStateless = (message: string) => htmlResponse(messagePage("Sign-in expired", message), 400)
