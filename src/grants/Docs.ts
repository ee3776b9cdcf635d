/**
 * Summaries, descriptions and examples of grants, delegation and grant tokens; GrantsApi carries
 * them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { AGENT, DEV, DID, GRANT, JWT, LATER, PRINCIPAL, T } from "../platform/DocExamples.ts"

const grant = {
  grantId: GRANT, agentId: AGENT, principalId: PRINCIPAL, developerId: DEV, scopes: ["email:read"], status: "active",
  issuedAt: T, expiresAt: LATER, revokedAt: null, parentGrantId: null, delegationDepth: 0, approvalMethod: "consent", policyId: null
}

export const GRANTS_DOCS = {
  list: {
    summary: "List grants",
    description: "Grants of your agents, newest first; filter by `agentId`, `principalId`, `resourceServerId` (OAuth grants made for one resource server), `status` (`active`, `revoked`, `expired`); page with `cursor` / `limit`.",
    response: { grants: [grant], nextCursor: null }
  },
  get: { summary: "Read a grant", description: "One grant by `grantId` (the path's `id`).", response: grant },
  revoke: {
    summary: "Revoke a grant",
    description: "Revokes the grant and every grant delegated from it, in one transaction; their tokens stop verifying online at once (offline checks see it at the next sync). Emits `grant.revoked { grantId, cascade }`. Draws on the containment budget, so revoking stays possible when the plan's budget is spent."
  },
  delegate: {
    summary: "Delegate to a sub-agent",
    description: "Called by your backend with an agent's grant token: issues a grant token for another of your agents with a subset of the scopes (asking for more: 400 `SCOPE_ESCALATION`), expiring no later than the parent, at most `MAX_DELEGATION_DEPTH` (3) levels deep (403 `DELEGATION_DEPTH_EXCEEDED`). Revoking the parent revokes it.",
    request: { parentGrantToken: JWT, subAgentId: "ag_01JDQ9DP4Q5R6S7T8V9W0XYZAB", scopes: ["email:read"], expiresIn: "1h" },
    response: { grantToken: JWT, expiresAt: "2026-11-24T10:30:00.000Z", scopes: ["email:read"], grantId: "grnt_01JDQ9EQ5R6S7T8V9W0XYZABCD" }
  },
  verify: {
    summary: "Verify a grant token online",
    description: "Checks signature, issuer, expiry **and revocation** (which an offline JWKS check cannot see). Answers 200 either way: `{ valid: false }` for any bad token. The answer names the person `principal` and the agent `agent` (its DID) where grants say `principalId` / `agentId`: the interface fixed both. Also takes an OAuth access token (`typ: at+jwt`) of your own issuer, whose answer adds its `audience` (the resource) and `clientId`. With `audience`, a token whose `aud` does not contain it is `valid: false`.",
    request: { token: JWT },
    response: { valid: true, grantId: GRANT, scopes: ["email:read"], principal: PRINCIPAL, agent: DID, expiresAt: LATER }
  },
  revokeToken: {
    summary: "Revoke one grant token",
    description: "Revokes a single token by its `jti` (the grant and its other tokens stay valid; revoke the grant to stop them all). 204 also for an unknown jti, so the call is safe to repeat.",
    request: { jti: "tok_01JDQ9FR6S7T8V9W0XYZABCDEF" }
  }
} satisfies Record<string, OperationDoc>
