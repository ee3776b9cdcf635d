/**
 * What a consent bundle needs when the developer requires the person to prove who they are
 * (decisions §12): an approved authorization request (`consentRequestId`) whose approval satisfied
 * the requirement, for the same agent and principal and at least the bundle's scopes. It is
 * consumed by the bundle, so one approval makes one bundle.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { ConsentRequired } from "../platform/Errors.ts"

export interface ApprovalRequirement {
  /** the developer's `fidoRequired`: the approval was made with a verified passkey */
  readonly passkey: boolean
  /** an SSO `enforce` connection (§12): the approval was made by the principal signed in through SSO */
  readonly sso: boolean
}

export const approvalRequirement = (
  sql: SqlClient.SqlClient,
  developerId: string,
  ssoEnforced: (developerId: string) => Effect.Effect<boolean>
) =>
  Effect.gen(function*() {
    const rows = yield* sql<{ fidoRequired: boolean }>`SELECT fido_required FROM developers WHERE id = ${developerId}`
    return { passkey: rows[0]?.fidoRequired === true, sso: yield* ssoEnforced(developerId) } satisfies ApprovalRequirement
  })

export const consentRequired = (requirement: ApprovalRequirement) =>
  new ConsentRequired({ message: requirement.passkey || requirement.sso
      ? `This developer requires consentRequestId: an approval by the principal ${[requirement.passkey ? "with a passkey" : "", requirement.sso ? "signed in through SSO" : ""].filter(Boolean).join(" and ")}, for this agent and these scopes, not used before`
      : "consentRequestId must be an approval for this agent, principal and these scopes, not used before" })

/**
 * Marks the approved request used by the bundle, in the caller's transaction; false when it is not
 * one that allows this bundle (unknown, another developer's, pending or denied, used, another agent
 * or principal, fewer scopes, its grant revoked, or made without the passkey or SSO sign-in the developer requires).
 */
export const consumeApproval = (
  sql: SqlClient.SqlClient,
  input: {
    developerId: string
    consentRequestId: string
    agentId: string
    userId: string
    scopes: ReadonlyArray<string>
    bundleId: string
    requirement: ApprovalRequirement
  }
) =>
  Effect.map(
    sql`UPDATE auth_requests r SET consumed_by_bundle_id = ${input.bundleId}
        WHERE r.id = ${input.consentRequestId} AND r.developer_id = ${input.developerId} AND r.status = 'approved'
          AND r.consumed_by_bundle_id IS NULL AND r.agent_id = ${input.agentId} AND r.principal_id = ${input.userId}
          AND r.scopes @> ${[...input.scopes] as any}::text[]
          AND (${!input.requirement.passkey} OR r.fido_verified_at IS NOT NULL)
          AND (${!input.requirement.sso} OR r.sso_session_id IS NOT NULL)
          -- the approval's grant, not the request: an SSO approval may grant fewer scopes than were asked (group ceiling)
          AND EXISTS (SELECT 1 FROM grants g WHERE g.id = r.grant_id AND g.status = 'active' AND g.scopes @> ${[...input.scopes] as any}::text[])
        RETURNING r.id`,
    (rows) => rows.length > 0
  )
