/**
 * The SSO capability's layers (decisions §12), composed once for the server. Needs the platform
 * (SQL, Config, Counters, Events, AuditChain), the directory (Directory, DirectoryPrincipals) and
 * principal sessions (Principals). `SsoCoreLive` alone (connections and sessions) is what the
 * policies' SSO port needs. SAML: src/sso/saml/'s port, and its service (the SAML routes use it).
 */
import { Effect, Layer } from "effect"
import { DirectorySessions } from "../directory/Ports.ts"
import { Principals } from "../principals/Service.ts"
import { SsoAdminLive } from "./Admin.ts"
import { SsoConnectionsLive } from "./Connections.ts"
import { PolicySsoLive, SsoConsentLive } from "./Consent.ts"
import { SsoIdentitiesLive } from "./Identity.ts"
import { SsoLoginLive } from "./Login.ts"
import { OidcClientLive } from "./Oidc.ts"
import { SamlProtocolLive, SamlServiceLive } from "./saml/Service.ts"
import { SsoSessions, SsoSessionsLive } from "./Sessions.ts"
import { LoginStatesLive } from "./States.ts"

export const SsoCoreLive = Layer.mergeAll(SsoConnectionsLive, SsoSessionsLive)

/** The directory's port (decisions §11, §12): deprovisioning ends the person's SSO and principal sessions. Needs Principals. */
export const DirectorySessionsFromSso = Layer.effect(
  DirectorySessions,
  Effect.gen(function*() {
    const sessions = yield* SsoSessions
    const principals = yield* Principals
    return {
      endForPrincipal: (developerId: string, principalId: string) =>
        Effect.all({ ssoSessions: sessions.endForPrincipal(developerId, principalId), principalSessions: principals.endSessions(developerId, principalId) })
    }
  })
).pipe(Layer.provide(SsoSessionsLive))

/** PolicySso for the policy engine: is SSO enforced, is the principal signed in */
export const PolicySsoFromSso = PolicySsoLive.pipe(Layer.provide(SsoCoreLive))

const Saml = SamlProtocolLive.pipe(Layer.provideMerge(SamlServiceLive))

const Protocols = Layer.mergeAll(OidcClientLive, Saml, LoginStatesLive).pipe(Layer.provideMerge(SsoCoreLive))

const Login = SsoLoginLive.pipe(Layer.provideMerge(SsoIdentitiesLive), Layer.provideMerge(Protocols))

export const SsoLive = Layer.mergeAll(SsoAdminLive, SsoConsentLive).pipe(Layer.provideMerge(Login))
