/**
 * What policies read from other capabilities, through small ports so that those capabilities can be
 * wired in when they land: the directory (decisions §11: whether a principal is active, their groups)
 * and SSO (§12: whether a developer enforces SSO, whether the principal signed in through it).
 * The defaults answer "active, no groups, no SSO"; the server provides the directory's and SSO's
 * (src/sso/Consent.ts) layers. Provide a layer for a tag to replace its default (tests give stubs).
 */
import { Context, Effect } from "effect"

export interface PrincipalInfo {
  readonly active: boolean
  readonly groups: ReadonlyArray<string>
  readonly ssoVerified: boolean
}

export interface PolicyDirectoryPort {
  readonly principal: (developerId: string, principalId: string) => Effect.Effect<PrincipalInfo>
}
export class PolicyDirectory extends Context.Tag("agent-auth/PolicyDirectory")<PolicyDirectory, PolicyDirectoryPort>() {}
export const emptyDirectory: PolicyDirectoryPort = {
  principal: () => Effect.succeed({ active: true, groups: [], ssoVerified: false })
}

export interface PolicySsoPort {
  /** the developer has an SSO connection with `enforce` (a policy allow then never skips consent) */
  readonly enforced: (developerId: string) => Effect.Effect<boolean>
  /** the principal has a live SSO session with the developer (`principal.ssoVerified`) */
  readonly verified: (developerId: string, principalId: string) => Effect.Effect<boolean>
}
export class PolicySso extends Context.Tag("agent-auth/PolicySso")<PolicySso, PolicySsoPort>() {}
export const noSso: PolicySsoPort = { enforced: () => Effect.succeed(false), verified: () => Effect.succeed(false) }
