/**
 * What SSO is for (decisions §12): with an `enforce` connection, the consent page sends the person
 * to their identity provider first, and only the request's principal, signed in through SSO with
 * this developer, may approve, for at most the scopes their groups map to with the connection's
 * defaults (requested ∩ (mapped ∪ defaultScopes); a connection that maps nothing grants nothing). `gate` tells the consent routes where a request stands; the approval itself is checked
 * again inside the authorization service's transaction (SsoApproval). `PolicySsoLive` answers the
 * policies' questions (is SSO enforced; is the principal signed in: `principal.ssoVerified`).
 */
import { Context, Effect, Layer } from "effect"
import type { SsoApproval } from "../authorization/Service.ts"
import { Config } from "../Config.ts"
import type { BadRequest, DomainNotConfigured, InvalidRedirectUri, NotFound, SsoError } from "../platform/Errors.ts"
import { PolicySso } from "../policies/Ports.ts"
import { SsoConnections } from "./Connections.ts"
import { mappedScopesOf, SsoLogin } from "./Login.ts"
import { type SsoSession, SsoSessions } from "./Sessions.ts"

export type ConsentGate =
  /** the developer does not enforce SSO: the consent page works as before */
  | { readonly kind: "open" }
  /** SSO enforced and nobody signed in with this developer: send the person to their provider */
  | { readonly kind: "signIn" }
  /** signed in, as another principal */
  | { readonly kind: "mismatch"; readonly session: SsoSession }
  | { readonly kind: "signedIn"; readonly session: SsoSession; readonly connectionName: string; readonly approval: SsoApproval }

export type SignIn =
  | { readonly location: string; readonly browserCookie: string }
  | { readonly choices: ReadonlyArray<{ readonly name: string; readonly href: string }> }

export interface SsoConsentService {
  readonly gate: (developerId: string, principalId: string, sessionToken: string | undefined) => Effect.Effect<ConsentGate>
  /** where to sign in before answering this request: the one enforce connection's provider, or a choice between several */
  readonly signIn: (developerId: string, consentRequestId: string) => Effect.Effect<SignIn, BadRequest | NotFound | DomainNotConfigured | InvalidRedirectUri | SsoError>
}

export class SsoConsent extends Context.Tag("agent-auth/SsoConsent")<SsoConsent, SsoConsentService>() {}

export const SsoConsentLive = Layer.effect(
  SsoConsent,
  Effect.gen(function*() {
    const config = yield* Config
    const connections = yield* SsoConnections
    const sessions = yield* SsoSessions
    const login = yield* SsoLogin

    const gate: SsoConsentService["gate"] = (developerId, principalId, token) =>
      Effect.gen(function*() {
        if (!(yield* connections.enforced(developerId))) return { kind: "open" } as const
        const session = yield* sessions.current(token)
        if (session === undefined || session.developerId !== developerId) return { kind: "signIn" } as const
        if (session.principalId !== principalId) return { kind: "mismatch", session } as const
        const connection = yield* connections.find(developerId, session.connectionId)
        // the groups' scopes and the defaults are the ceiling, mapping or not (a removed connection grants nothing)
        return {
          kind: "signedIn",
          session,
          connectionName: connection?.name ?? "your organisation",
          approval: {
            sessionId: session.sessionId,
            developerId,
            principalId: session.principalId,
            scopeCeiling: connection === undefined ? [] : mappedScopesOf(connection, session.groups)
          }
        } as const
      })

    const signIn: SsoConsentService["signIn"] = (developerId, consentRequestId) =>
      Effect.gen(function*() {
        const enforcing = (yield* connections.list(developerId)).filter((c) => c.status === "active" && c.enforce)
        if (enforcing.length === 1) {
          const begun = yield* login.begin({ developerId, connectionId: enforcing[0]!.id, target: { kind: "consent", consentRequestId } })
          return { location: begun.authorizeUrl, browserCookie: begun.browserCookie }
        }
        return {
          choices: enforcing.map((c) => ({
            name: c.name,
            href: `${config.publicBaseUrl}/sso/login?${new URLSearchParams({ org: developerId, connection: c.id, consent: consentRequestId, mode: "redirect" })}`
          }))
        }
      })

    return { gate, signIn }
  })
)

export const PolicySsoLive = Layer.effect(
  PolicySso,
  Effect.gen(function*() {
    const connections = yield* SsoConnections
    const sessions = yield* SsoSessions
    return { enforced: connections.enforced, verified: sessions.verified }
  })
)
