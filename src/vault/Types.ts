/**
 * The vault service's shape (decisions §9): a stored credential's public view and the service's
 * operations, apart from the service (Service.ts) and the exchange (Exchange.ts) that implement it.
 */
import type { Effect } from "effect"
import type { BadRequest, CredentialUnreadable, Forbidden, NotFound, PrincipalInactive, Unauthorized, UpstreamRefreshFailed } from "../platform/Errors.ts"
import type { GrantTokenClaims } from "../platform/Keys.ts"
import { iso } from "../platform/Time.ts"
import type { StoreCredential } from "./Api.ts"
import type { CredentialRow } from "./Repo.ts"

export const credentialView = (row: CredentialRow) => ({
  id: row.id,
  principalId: row.principalId,
  service: row.service,
  credentialType: row.credentialType,
  tokenExpiresAt: iso(row.tokenExpiresAt),
  metadata: row.metadata ?? {},
  hasRefreshToken: row.hasRefreshToken,
  tokenEndpoint: row.tokenEndpoint,
  refreshedAt: iso(row.refreshedAt),
  createdAt: iso(row.createdAt)!,
  updatedAt: iso(row.updatedAt)!
})
export type CredentialView = ReturnType<typeof credentialView>

export interface VaultCredentialOut {
  readonly accessToken: string
  readonly service: string
  readonly credentialType: string
  readonly tokenExpiresAt: string | null
  readonly metadata: Record<string, unknown>
}

export interface VaultService {
  readonly store: (developerId: string, input: StoreCredential) => Effect.Effect<CredentialView, BadRequest>
  readonly list: (
    developerId: string,
    query: { principalId?: string; service?: string; cursor?: string; limit?: string }
  ) => Effect.Effect<{ credentials: Array<CredentialView>; nextCursor: string | null }, BadRequest>
  readonly get: (developerId: string, id: string) => Effect.Effect<CredentialView, NotFound>
  readonly remove: (developerId: string, id: string) => Effect.Effect<void, NotFound>
  /** the exchange, given the claims the gate verified and the raw request body */
  readonly exchange: (
    claims: GrantTokenClaims | undefined,
    rawBody: string
  ) => Effect.Effect<VaultCredentialOut, Unauthorized | BadRequest | Forbidden | NotFound | PrincipalInactive | UpstreamRefreshFailed | CredentialUnreadable>
}

