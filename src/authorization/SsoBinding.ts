/**
 * Consent approval when the developer enforces SSO (decisions §12): only the request's principal,
 * signed in through SSO with this developer, approves, and the grant gets the requested scopes
 * their groups allow. The consent routes find the sign-in (src/sso/Consent.ts); this is checked
 * again inside the approval's transaction.
 */
import { Effect } from "effect"
import { Forbidden, PrincipalMismatch } from "../platform/Errors.ts"

/**
 * The principal signed in through SSO (decisions §12), as the consent page found them: required to
 * approve when the developer enforces SSO. `scopeCeiling` (the scopes their groups map to, with the
 * connection's defaults) caps what the approval grants: requested ∩ (mapped ∪ defaultScopes), so a
 * connection that maps nothing grants nothing (decisions §12; "no mapping, no ceiling" widened it).
 */
export interface SsoApproval {
  readonly sessionId: string
  readonly developerId: string
  readonly principalId: string
  readonly scopeCeiling: ReadonlyArray<string>
}

export const ssoBinding = (
  request: { readonly developerId: string; readonly principalId: string; readonly scopes: ReadonlyArray<string> },
  sso: SsoApproval | undefined
) =>
  Effect.gen(function*() {
    if (sso === undefined) {
      return yield* Effect.fail(new PrincipalMismatch({ message: "This organisation requires signing in with its identity provider before approving" }))
    }
    if (sso.developerId !== request.developerId || sso.principalId !== request.principalId) {
      return yield* Effect.fail(new PrincipalMismatch({ message: "You are signed in as someone else than the person this request is for" }))
    }
    const scopes = request.scopes.filter((s) => sso.scopeCeiling.includes(s))
    if (scopes.length === 0) {
      return yield* Effect.fail(new Forbidden({ message: "None of the requested scopes is allowed for your groups" }))
    }
    return { sessionId: sso.sessionId, scopes }
  })
