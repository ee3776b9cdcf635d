/**
 * The policies' view of the directory (decisions §11, §13): whether a principal is active and the
 * ids of their groups (Cedar's `Group::"scimgrp_…"`, a rule's `principalGroups`), read through the
 * directory's own service. A principal the directory does not know is active and in no group.
 * SSO sign-in (`ssoVerified`) is false until the SSO capability provides it.
 */
import { Effect } from "effect"
import type { DirectoryPrincipalsService } from "../directory/Principals.ts"
import type { PolicyDirectoryPort } from "./Ports.ts"

export const directoryPort = (directory: DirectoryPrincipalsService): PolicyDirectoryPort => ({
  principal: (developerId, principalId) =>
    Effect.map(directory.describe(developerId, principalId), (user) =>
      user === undefined
        ? { active: true, groups: [], ssoVerified: false }
        : { active: user.active, groups: user.groups.map((g) => g.id), ssoVerified: false })
})
