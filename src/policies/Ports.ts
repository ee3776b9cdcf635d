/**
 * What policies read from other capabilities, through small ports: the directory (decisions §11:
 * whether a principal is active, their groups) and SSO (§12: whether a developer enforces SSO,
 * whether the principal signed in through it). Both are required (§20: no default that could open
 * a gate); src/Server.ts provides the directory's (DirectoryPort.ts) and SSO's (src/sso/Live.ts),
 * tests may give stubs.
 */
import { Context, type Effect } from "effect"

export interface PrincipalInfo {
  readonly active: boolean
  readonly groups: ReadonlyArray<string>
  readonly ssoVerified: boolean
}

export interface PolicyDirectoryPort {
  readonly principal: (developerId: string, principalId: string) => Effect.Effect<PrincipalInfo>
}
export class PolicyDirectory extends Context.Tag("agent-auth/PolicyDirectory")<PolicyDirectory, PolicyDirectoryPort>() {}

export interface PolicySsoPort {
  /** the developer has an SSO connection with `enforce` (a policy allow then never skips consent) */
  readonly enforced: (developerId: string) => Effect.Effect<boolean>
  /** the principal has a live SSO session with the developer (`principal.ssoVerified`) */
  readonly verified: (developerId: string, principalId: string) => Effect.Effect<boolean>
}
export class PolicySso extends Context.Tag("agent-auth/PolicySso")<PolicySso, PolicySsoPort>() {}
