/**
 * What passkeys need from the authorization capability: read a pending authorization request, and
 * approve it once a passkey assertion is verified: a port passkeys own and authorization provides
 * (src/authorization/PasskeyApproval.ts), so the passkey code does not import that service.
 */
import { Context, type Effect } from "effect"
import type { SsoApproval } from "../authorization/SsoBinding.ts"
import type { AgentSuspended, FidoRequired, Forbidden, Gone, NotFound, PolicyDenied, PrincipalInactive, PrincipalMismatch } from "../platform/Errors.ts"

export interface PendingRequest {
  readonly id: string
  readonly developerId: string
  readonly agentId: string
  readonly principalId: string
  readonly scopes: ReadonlyArray<string>
  readonly expiresAt: Date | string
}

export interface ApprovalResult {
  readonly code: string
  readonly grantId: string
  readonly redirectUri?: string | null | undefined
  readonly state?: string | null | undefined
}

/** what approving can fail with (a request decided meanwhile, an agent suspended meanwhile) */
export type ApprovalError = Gone | NotFound | AgentSuspended | FidoRequired | PrincipalInactive | PrincipalMismatch | Forbidden | PolicyDenied

export interface ApprovalService {
  readonly getPendingRequest: (authRequestId: string) => Effect.Effect<PendingRequest | undefined, unknown>
  readonly approveRequest: (authRequestId: string, options: { readonly fidoVerified: true; readonly sso: Effect.Effect<SsoApproval | undefined> }) => Effect.Effect<ApprovalResult, ApprovalError>
}

export class Approval extends Context.Tag("agent-auth/PasskeyApproval")<Approval, ApprovalService>() {}

