/** Summaries, descriptions and examples of the credential vault; VaultApi carries them. */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { PRINCIPAL, T } from "../platform/DocExamples.ts"

const credential = {
  id: "vcred_01JDQ9GS7T8V9W0XYZABCDEFGH", principalId: PRINCIPAL, service: "github", credentialType: "oauth2", tokenExpiresAt: "2026-11-24T17:30:00.000Z",
  metadata: { login: "octocat" }, hasRefreshToken: true, tokenEndpoint: "https://github.com/login/oauth/access_token", refreshedAt: null, createdAt: T, updatedAt: T
}

export const VAULT_DOCS = {
  store: {
    summary: "Store a credential",
    description: "Called by your backend after the person connected a third-party account: stores the tokens encrypted (AES-256-GCM), one per person (`principalId`) and service (storing again replaces it). With `refreshToken`, `tokenEndpoint` and client credentials the service refreshes an expired token at exchange. The answer never carries a token or secret.",
    request: { principalId: PRINCIPAL, service: "github", accessToken: "gho_16C7e42F292c6912E7710c838347Ae178B4a", refreshToken: "ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498", tokenExpiresAt: "2026-11-24T17:30:00Z", tokenEndpoint: "https://github.com/login/oauth/access_token", clientId: "Iv1.8a61f9b3a7aba766", clientSecret: "1a2b3c…", metadata: { login: "octocat" } },
    response: credential
  },
  list: { summary: "List credentials", description: "Stored credentials (no tokens); filter by `principalId`, `service`; page with `cursor` / `limit`.", response: { credentials: [credential], nextCursor: null } },
  exchange: {
    summary: "Exchange a grant token for a credential",
    description: "Called by the agent with its grant token as the bearer (not the API key). The grant must be active online (revoked grant or bundle: 401). Checks in this order: token (401), `service` present (400), scope (403, the message lists the accepted forms), credential stored (404). Accepted scopes for service `{service}`: `{service}:read`, `{service}:credentials:read`, `{service}:*`, `vault:{service}:read`, `vault:{service}:*`, `vault:credentials:exchange`, `*`. An expired token with a refresh token is refreshed first (502 when the provider refuses). Emits `vault.credential.exchanged`. The vault names the person `principalId`, as grants do.",
    request: { service: "github" },
    response: { accessToken: "gho_16C7e42F292c6912E7710c838347Ae178B4a", service: "github", credentialType: "oauth2", tokenExpiresAt: "2026-11-24T17:30:00.000Z", metadata: { login: "octocat" } }
  },
  get: { summary: "Read a credential", description: "One credential's metadata (no tokens).", response: credential },
  remove: { summary: "Delete a credential", description: "Deletes the stored tokens; later exchanges for that person and service answer 404." }
} satisfies Record<string, OperationDoc>
