/**
 * A grant as stored (decisions §3, §20): its own file, with nothing imported, so that the capabilities
 * the grants service calls (credentials) can name it without importing the service.
 */

/** How a grant was approved (decisions §12, §13, §20): recorded on every grant. */
export type ApprovalMethod = "consent" | "sso" | "passkey" | "policy" | "developer" | "sandbox"

export interface GrantRecord {
  readonly id: string
  readonly developerId: string
  readonly agentId: string
  readonly principalId: string
  readonly scopes: ReadonlyArray<string>
  readonly status: "active" | "revoked"
  readonly audience: string | null
  readonly issuedAt: Date
  readonly expiresAt: Date
  readonly revokedAt: Date | null
  readonly parentGrantId: string | null
  readonly delegationDepth: number
  readonly createdAt: Date
  readonly approvalMethod: ApprovalMethod | null
  readonly policyId: string | null
}

