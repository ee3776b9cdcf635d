/**
 * What deprovisioning (decisions §11, §12) makes capabilities above the directory do, as ports the
 * directory owns and they provide (SSO and principal sessions import the directory, so the
 * directory cannot import them). Each runs in the deprovisioning's transaction.
 */
import { Context, type Effect } from "effect"

export interface DirectorySessionsService {
  /** ends every SSO session and principal session of the principal; how many of each */
  readonly endForPrincipal: (developerId: string, principalId: string) => Effect.Effect<{ readonly ssoSessions: number; readonly principalSessions: number }>
}

export class DirectorySessions extends Context.Tag("agent-auth/DirectorySessions")<DirectorySessions, DirectorySessionsService>() {}

export interface DirectoryRevocationsService {
  /**
   * `deprovision: "revoke"` (decisions §11): the principal's pending authorization requests denied
   * first (an approval racing this waits on their lock), then their grants revoked and their passkeys
   * removed; the ids of the grants that were active. In the deprovisioning's transaction.
   */
  readonly revokeForPrincipal: (developerId: string, principalId: string) => Effect.Effect<ReadonlyArray<string>>
}

/** Provided by authorization (src/authorization/DirectoryRevocations.ts): the directory sits below grants, requests and passkeys. */
export class DirectoryRevocations extends Context.Tag("agent-auth/DirectoryRevocations")<DirectoryRevocations, DirectoryRevocationsService>() {}
