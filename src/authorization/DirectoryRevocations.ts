/**
 * The directory's revocation port (decisions §11), provided here: deprovisioning a principal denies
 * their pending requests, revokes their grants and removes their passkeys, in the deprovisioning's
 * transaction. The directory sits below these capabilities and names only the port.
 */
import { Effect, Layer } from "effect"
import { DirectoryRevocations } from "../directory/Ports.ts"
import { Grants } from "../grants/Service.ts"
import { Passkeys } from "../passkeys/Service.ts"
import { Authorization } from "./Service.ts"

export const DirectoryRevocationsLive = Layer.effect(
  DirectoryRevocations,
  Effect.gen(function*() {
    const authorization = yield* Authorization
    const grants = yield* Grants
    const passkeys = yield* Passkeys
    return {
      revokeForPrincipal: (developerId: string, principalId: string) =>
        Effect.gen(function*() {
          yield* authorization.denyPendingForPrincipal(developerId, principalId)
          const revoked = yield* grants.revokePrincipal(developerId, principalId)
          yield* passkeys.removeForPrincipal(developerId, principalId)
          return revoked
        })
    }
  })
)
