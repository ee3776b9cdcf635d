/**
 * The policies' view of the directory (decisions §11, §13): whether a principal is active and their
 * groups, read through the directory's own service. Each group is named both by its id (stable:
 * `Group::"scimgrp_…"`) and by its display name (readable: `Group::"contractors"`), so a rule's
 * `principalGroups` or a Cedar `in Group::…` may use either; ids carry a prefix no display name
 * needs, and a renamed group keeps matching by id. A principal the directory does not know is active and in no
 * group; one whose users were all deleted is inactive.
 * SSO sign-in (`ssoVerified`) is answered by the SSO port (policies/Ports.ts PolicySso), not here.
 */
import { Effect, Layer } from "effect"
import { DirectoryPrincipals, type DirectoryPrincipalsService } from "../directory/Principals.ts"
import { PolicyDirectory, type PolicyDirectoryPort } from "./Ports.ts"

export const directoryPort = (directory: DirectoryPrincipalsService): PolicyDirectoryPort => ({
  principal: (developerId, principalId) =>
    Effect.flatMap(directory.describe(developerId, principalId), (user) =>
      user === undefined
        // no live user: unknown (active) unless the directory once had them and deleted them, which
        // leaves the principal inactive (a deleted user must not pass refresh, delegation or the vault)
        ? Effect.map(directory.isInactive(developerId, principalId), (inactive) => ({ active: !inactive, groups: [], ssoVerified: false }))
        : Effect.succeed({ active: user.active, groups: user.groups.flatMap((g) => [g.id, g.displayName]), ssoVerified: false }))
})

/** The policies' directory port from the directory's own service (composed in src/Server.ts). */
export const PolicyDirectoryFromDirectory = Layer.effect(PolicyDirectory, Effect.map(DirectoryPrincipals, directoryPort))
