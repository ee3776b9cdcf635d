/**
 * Sign-in at the OAuth authorization endpoint (decisions §22.5). `/authorize` left a request in
 * `authenticating`, bound to the browser by the `__Host-oauth_ix` cookie; every step here requires
 * that cookie. `GET {issuer}/login?ix=` lists the resource server's methods (only SSO while the
 * developer has an `enforce` connection) and a single one is taken at once:
 * - SSO: section 12's login (SsoLogin) for this developer, coming back here; a live `ssosess_` of
 *   this developer in the browser is reused, its creation time the `auth_time`;
 * - passkey: a usernameless assertion (Passkeys.signInOptions/verifySignIn), the user handle names
 *   the principal;
 * - the developer login bridge (Flow.login → the developer's page → Flow.resume).
 * The request is signed in when `auth_time` is set (principal and `auth_method` with it). With
 * `fidoRequired` a passkey of that principal follows any other method (`fido_verified_at`); then
 * Flow.proceed lets the gate decide (an inactive principal → access_denied) and the consent page
 * answers the rest.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { messagePage, page, type Page } from "../authorization/ConsentPage.ts"
import type { OAuthRequestFacts } from "../authorization/Lookups.ts"
import { sha256Hex } from "../platform/Hash.ts"
import { nowMillis } from "../platform/Time.ts"
import { Passkeys } from "../passkeys/Service.ts"
import { SsoConnections } from "../sso/Connections.ts"
import { SsoLogin } from "../sso/Login.ts"
import { SESSION_COOKIE, SsoSessions } from "../sso/Sessions.ts"
import { type BrowserAnswer, errorRedirect, Flow } from "./Flow.ts"
import { ResourceServers } from "./ResourceServers.ts"
import { sameHash } from "./Rules.ts"
import { passkeyPage } from "./SignInPage.ts"

export type SignInAnswer = BrowserAnswer | { readonly _tag: "Html"; readonly status: number; readonly page: Page }

/** what a passkey call from the sign-in page answers: where to go next, or why not */
export type PasskeyAnswer =
  | { readonly ok: true; readonly body: Record<string, unknown> }
  | { readonly ok: false; readonly status: number; readonly error: string; readonly description: string }

type Cookies = Readonly<Record<string, string | undefined>>

interface SignInRow {
  readonly id: string
  readonly status: string
  readonly expiresAt: Date
  readonly principalId: string
  readonly authTime: Date | null
  readonly fidoVerifiedAt: Date | null
  readonly redirectUri: string
  readonly state: string | null
  readonly oauth: OAuthRequestFacts
  readonly interactionCookieHash: string | null
  readonly fidoRequired: boolean
}

export interface OAuthSignInService {
  readonly chooser: (developerId: string, ix: string, cookies: Cookies) => Effect.Effect<SignInAnswer>
  readonly developer: (developerId: string, ix: string, cookies: Cookies) => Effect.Effect<SignInAnswer>
  readonly sso: (
    developerId: string, ix: string, cookies: Cookies, params: { readonly connection?: string | undefined; readonly done?: string | undefined; readonly error?: string | undefined }
  ) => Effect.Effect<SignInAnswer>
  readonly passkey: (developerId: string, ix: string, cookies: Cookies) => Effect.Effect<SignInAnswer>
  readonly passkeyOptions: (developerId: string, ix: string, cookies: Cookies) => Effect.Effect<PasskeyAnswer>
  readonly passkeyVerify: (developerId: string, ix: string, cookies: Cookies, input: { readonly challengeId: string; readonly response: unknown }) => Effect.Effect<PasskeyAnswer>
}

export class OAuthSignIn extends Context.Tag("agent-auth/OAuthSignIn")<OAuthSignIn, OAuthSignInService>() {}

const html = (status: number, title: string, message: string, links: ReadonlyArray<{ text: string; href: string }> = []): SignInAnswer =>
  ({ _tag: "Html", status, page: messagePage(title, message, links) })
const STALE = html(400, "Sign-in expired", "This sign-in is no longer valid. Go back to the application and start again.")
const NOT_YOURS = html(403, "Not allowed", "This sign-in can be finished only in the browser that started it. Nothing was shared.")
const NOT_OFFERED = html(404, "Not available", "This way of signing in is not offered here.")

export const OAuthSignInLive = Layer.effect(
  OAuthSignIn,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const flow = yield* Flow
    const resourceServers = yield* ResourceServers
    const connections = yield* SsoConnections
    const ssoLogin = yield* SsoLogin
    const sessions = yield* SsoSessions
    const passkeys = yield* Passkeys

    /** the request waiting for sign-in, carried by this browser; else the page to show */
    const open = (developerId: string, ix: string, cookies: Cookies) =>
      Effect.gen(function*() {
        const [row] = yield* sql<SignInRow>`
          SELECT r.id, r.status, r.expires_at, r.principal_id, r.auth_time, r.fido_verified_at, r.redirect_uri, r.state, r.oauth,
                 r.interaction_cookie_hash, d.fido_required
          FROM auth_requests r JOIN developers d ON d.id = r.developer_id
          WHERE r.id = ${ix} AND r.developer_id = ${developerId} AND r.oauth IS NOT NULL`.pipe(Effect.orDie)
        const ms = yield* nowMillis
        if (row === undefined || row.status !== "authenticating" || row.expiresAt.getTime() <= ms) return { ok: false, answer: STALE } as const
        const cookie = cookies["__Host-oauth_ix"]
        if (cookie === undefined || !sameHash(row.interactionCookieHash, sha256Hex(cookie))) return { ok: false, answer: NOT_YOURS } as const
        return { ok: true, row } as const
      })

    /** the methods offered for this request: with an SSO `enforce` connection only SSO (one entry per enforcing connection) */
    const methodsOf = (developerId: string, row: SignInRow) =>
      Effect.gen(function*() {
        const issuer = row.oauth.issuer
        const active = (yield* connections.list(developerId)).filter((c) => c.status === "active")
        const enforcing = active.filter((c) => c.enforce)
        const sso = (list: typeof active) =>
          list.map((c) => ({ kind: "sso" as const, connectionId: c.id, text: `Sign in with ${c.name}`, href: `${issuer}/login/sso?ix=${row.id}&connection=${c.id}` }))
        if (enforcing.length > 0) return sso(enforcing)
        const rs = (yield* resourceServers.ofDeveloper(developerId)).find((s) => s.id === row.oauth.resourceServerId)
        if (rs === undefined) return []
        return [
          ...(rs.login.sso ? sso(active) : []),
          ...(rs.login.passkey ? [{ kind: "passkey" as const, connectionId: undefined, text: "Sign in with a passkey", href: `${issuer}/login/passkey?ix=${row.id}` }] : []),
          ...(rs.login.developerLoginUrl !== undefined
            ? [{ kind: "developer" as const, connectionId: undefined, text: "Sign in with your account", href: `${issuer}/login/developer?ix=${row.id}` }]
            : [])
        ]
      })

    const signedIn = (row: SignInRow) => row.authTime !== null
    const toPasskeyStep = (row: SignInRow): SignInAnswer => ({ _tag: "Redirect", location: `${row.oauth.issuer}/login/passkey?ix=${row.id}` })

    /** after the first method: the passkey step when the developer requires one, else the gate */
    const next = (developerId: string, row: SignInRow, passkeyDone: boolean): Effect.Effect<SignInAnswer> =>
      row.fidoRequired && !passkeyDone ? Effect.succeed(toPasskeyStep(row)) : flow.proceed(developerId, row.id)

    /** records the first method; false when the request was signed in (or decided) meanwhile */
    const record = (row: SignInRow, principalId: string, method: "sso" | "passkey", authTime: Date, fidoAt: Date | null) =>
      sql<{ id: string }>`UPDATE auth_requests SET principal_id = ${principalId}, auth_method = ${method}, auth_time = ${authTime},
                            fido_verified_at = ${fidoAt}, interaction_token_hash = NULL
                          WHERE id = ${row.id} AND status = 'authenticating' AND auth_time IS NULL RETURNING id`.pipe(
        Effect.map((rows) => rows.length === 1),
        Effect.orDie
      )

    const take = (developerId: string, row: SignInRow, kind: "sso" | "passkey" | "developer", connectionId?: string) =>
      Effect.gen(function*() {
        const methods = yield* methodsOf(developerId, row)
        if (kind === "sso") return methods.some((m) => m.kind === "sso" && (connectionId === undefined || m.connectionId === connectionId))
        return methods.some((m) => m.kind === kind)
      })

    const chooser: OAuthSignInService["chooser"] = (developerId, ix, cookies) =>
      Effect.gen(function*() {
        const opened = yield* open(developerId, ix, cookies)
        if (!opened.ok) return opened.answer
        const row = opened.row
        if (signedIn(row)) return toPasskeyStep(row)
        const methods = yield* methodsOf(developerId, row)
        if (methods.length === 0) return html(503, "Sign-in unavailable", "This service has no way for you to sign in yet.")
        if (methods.length > 1) return html(200, "Sign in", `Sign in to continue to ${row.oauth.clientName}.`, methods.map((m) => ({ text: m.text, href: m.href })))
        // one method: straight there
        const only = methods[0]!
        return only.kind === "sso"
          ? yield* ssoStep(developerId, row, cookies, { connection: only.connectionId })
          : only.kind === "passkey"
          ? passkeyPageOf(row)
          : yield* flow.login(developerId, ix, cookies["__Host-oauth_ix"])
      })

    const developer: OAuthSignInService["developer"] = (developerId, ix, cookies) =>
      Effect.gen(function*() {
        const opened = yield* open(developerId, ix, cookies)
        if (!opened.ok) return opened.answer
        if (signedIn(opened.row)) return toPasskeyStep(opened.row)
        if (!(yield* take(developerId, opened.row, "developer"))) return NOT_OFFERED
        return yield* flow.login(developerId, ix, cookies["__Host-oauth_ix"])
      })

    const ssoStep = (developerId: string, row: SignInRow, cookies: Cookies, params: { connection?: string | undefined; done?: string | undefined }) =>
      Effect.gen(function*() {
        // a live session of this developer (from this login or an earlier one) signs the person in
        const session = yield* sessions.current(cookies[SESSION_COOKIE])
        if (session !== undefined && session.developerId === developerId && (params.connection === undefined || session.connectionId === params.connection)) {
          if (!(yield* record(row, session.principalId, "sso", session.createdAt, null))) return STALE
          return yield* next(developerId, row, false)
        }
        if (params.done !== undefined) return html(400, "Sign-in incomplete", "Your organisation signed you in, but this browser did not keep the session. Start again.")
        const begun = yield* ssoLogin.begin({
          developerId,
          connectionId: params.connection,
          loginHint: row.oauth.loginHint ?? undefined,
          target: { kind: "oauth", returnTo: `${row.oauth.issuer}/login/sso?ix=${row.id}${params.connection !== undefined ? `&connection=${params.connection}` : ""}` }
        }).pipe(Effect.either)
        if (begun._tag === "Left") return html(502, "Sign-in unavailable", begun.left.message)
        return { _tag: "Redirect", location: begun.right.authorizeUrl, cookie: begun.right.browserCookie } as const
      })

    const sso: OAuthSignInService["sso"] = (developerId, ix, cookies, params) =>
      Effect.gen(function*() {
        const opened = yield* open(developerId, ix, cookies)
        if (!opened.ok) return opened.answer
        const row = opened.row
        if (signedIn(row)) return toPasskeyStep(row)
        if (!(yield* take(developerId, row, "sso", params.connection))) return NOT_OFFERED
        if (params.error !== undefined) {
          // the organisation refused the person: the client hears access_denied, the request is over
          yield* sql`UPDATE auth_requests SET status = 'denied', decided_at = ${new Date(yield* nowMillis)} WHERE id = ${row.id} AND status = 'authenticating'`.pipe(Effect.orDie)
          return errorRedirect(row.redirectUri, { error: "access_denied", error_description: "sign-in was refused", state: row.state, iss: row.oauth.issuer })
        }
        return yield* ssoStep(developerId, row, cookies, params)
      })

    const passkeyPageOf = (row: SignInRow): SignInAnswer => ({
      _tag: "Html",
      status: 200,
      page: passkeyPage(page, { issuer: row.oauth.issuer, ix: row.id, clientName: row.oauth.clientName, secondFactor: signedIn(row) })
    })

    /** the passkey step is the first method (offered) or the second factor (signed in, fidoRequired, not yet done) */
    const passkeyMode = (developerId: string, row: SignInRow) =>
      Effect.gen(function*() {
        if (signedIn(row)) return row.fidoRequired && row.fidoVerifiedAt === null ? "second" as const : "none" as const
        return (yield* take(developerId, row, "passkey")) ? "first" as const : "none" as const
      })

    const passkey: OAuthSignInService["passkey"] = (developerId, ix, cookies) =>
      Effect.gen(function*() {
        const opened = yield* open(developerId, ix, cookies)
        if (!opened.ok) return opened.answer
        const mode = yield* passkeyMode(developerId, opened.row)
        if (mode === "none") return signedIn(opened.row) ? yield* flow.proceed(developerId, ix) : NOT_OFFERED
        return passkeyPageOf(opened.row)
      })

    const refusal = (status: number, error: string, description: string): PasskeyAnswer => ({ ok: false, status, error, description })
    const refusalOf = (answer: SignInAnswer): PasskeyAnswer =>
      refusal(answer._tag === "Html" ? answer.status : answer._tag === "Page" ? answer.status : 400, "invalid_request", "this sign-in is no longer valid")

    /** the sign-in this browser holds and the passkey it asks for, or the refusal when it asks none */
    const openForPasskey = (developerId: string, ix: string, cookies: Parameters<OAuthSignInService["passkeyOptions"]>[2]) =>
      Effect.gen(function*() {
        const opened = yield* open(developerId, ix, cookies)
        if (!opened.ok) return { asked: false, refusal: refusalOf(opened.answer) } as const
        const mode = yield* passkeyMode(developerId, opened.row)
        if (mode === "none") return { asked: false, refusal: refusal(404, "invalid_request", "a passkey is not asked for here") } as const
        return { asked: true, row: opened.row, mode } as const
      })

    const passkeyOptions: OAuthSignInService["passkeyOptions"] = (developerId, ix, cookies) =>
      Effect.gen(function*() {
        const asked = yield* openForPasskey(developerId, ix, cookies)
        if (!asked.asked) return asked.refusal
        const { row, mode } = asked
        const options = yield* passkeys.signInOptions(developerId, row.id, mode === "second" ? row.principalId : undefined).pipe(Effect.either)
        if (options._tag === "Left") return refusal(422, "invalid_request", options.left.message)
        return { ok: true, body: options.right } as const
      })

    const passkeyVerify: OAuthSignInService["passkeyVerify"] = (developerId, ix, cookies, input) =>
      Effect.gen(function*() {
        const asked = yield* openForPasskey(developerId, ix, cookies)
        if (!asked.asked) return asked.refusal
        const { row, mode } = asked
        const verified = yield* passkeys.verifySignIn(developerId, row.id, input).pipe(Effect.either)
        if (verified._tag === "Left") {
          // the passkey error's own code, in the OAuth routes' lower case (the page tells an unknown passkey to the authenticator)
          return refusal(verified.left._tag === "InvalidChallenge" ? 400 : 403, verified.left.code.toLowerCase(), verified.left.message)
        }
        const { principalId, assertedAt } = verified.right
        let answer: SignInAnswer
        if (mode === "first") {
          if (!(yield* record(row, principalId, "passkey", assertedAt, assertedAt))) return refusalOf(STALE)
          answer = yield* next(developerId, row, true)
        } else {
          const marked = yield* sql`UPDATE auth_requests SET fido_verified_at = ${assertedAt}
                                    WHERE id = ${row.id} AND status = 'authenticating' AND principal_id = ${principalId} AND fido_verified_at IS NULL
                                    RETURNING id`.pipe(Effect.orDie)
          if (marked.length === 0) return refusalOf(STALE)
          answer = yield* flow.proceed(developerId, row.id)
        }
        return answer._tag === "Redirect" ? { ok: true, body: { location: answer.location } } as const : refusalOf(answer)
      })

    return { chooser, developer, sso, passkey, passkeyOptions, passkeyVerify }
  })
)
