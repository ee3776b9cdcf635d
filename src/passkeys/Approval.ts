/**
 * What passkeys need from the authorization capability: read a pending authorization request, and
 * approve it once a passkey assertion is verified. The `Authorization` service of
 * src/authorization/Service.ts provides exactly this interface; this port keeps the passkey code
 * independent of the rest of that service.
 */
import { Authorization, AuthorizationLive } from "../authorization/Service.ts"
import { Context, Effect, Layer } from "effect"
import type { SsoApproval } from "../authorization/Service.ts"
import type { AgentSuspended, FidoRequired, Forbidden, Gone, NotFound, PrincipalInactive, PrincipalMismatch } from "../platform/Errors.ts"

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
export type ApprovalError = Gone | NotFound | AgentSuspended | FidoRequired | PrincipalInactive | PrincipalMismatch | Forbidden

export interface ApprovalService {
  readonly getPendingRequest: (authRequestId: string) => Effect.Effect<PendingRequest | undefined, unknown>
  readonly approveRequest: (authRequestId: string, options: { readonly fidoVerified: true; readonly sso?: SsoApproval | undefined }) => Effect.Effect<ApprovalResult, ApprovalError>
}

export class Approval extends Context.Tag("agent-auth/PasskeyApproval")<Approval, ApprovalService>() {}

/** Delegates to the authorization capability, which owns requests, grants and codes. */
export const ApprovalLive = Layer.effect(
  Approval,
  Effect.map(Authorization, (authorization) => ({
    getPendingRequest: (authRequestId) => authorization.getPendingRequest(authRequestId),
    approveRequest: (authRequestId, options) => authorization.approveRequest(authRequestId, options)
  }))
).pipe(Layer.provide(AuthorizationLive))
