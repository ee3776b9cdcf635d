/**
 * The issuer's RFC 8414 metadata and a resource server's RFC 9728 protected-resource metadata
 * (decisions §22.2, §22.4). Only what is built and open is advertised: DCR and CIMD while some
 * resource server has them on; no DPoP, no ID tokens (§22.10).
 */
import type { ResourceServer } from "./ResourceServers.ts"
import { issuerOf } from "./Rules.ts"

export const authorizationServerMetadata = (issuerBase: string, publicBase: string, developerId: string, servers: ReadonlyArray<ResourceServer>) => {
  const issuer = issuerOf(issuerBase, developerId)
  const scopes = [...new Set(servers.flatMap((rs) => rs.scopes.map((s) => s.name)))]
  return {
    issuer,
    authorization_endpoint: `${issuer}/authorize`,
    token_endpoint: `${issuer}/token`,
    introspection_endpoint: `${issuer}/introspect`,
    revocation_endpoint: `${issuer}/revoke`,
    ...(servers.some((rs) => rs.openDcr) ? { registration_endpoint: `${issuer}/register` } : {}),
    jwks_uri: `${publicBase}/.well-known/jwks.json`,
    response_types_supported: ["code"],
    response_modes_supported: ["query"],
    grant_types_supported: ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:token-exchange"],
    token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post", "none"],
    revocation_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post", "none"],
    introspection_endpoint_auth_methods_supported: ["client_secret_basic"],
    code_challenge_methods_supported: ["S256"],
    authorization_response_iss_parameter_supported: true,
    client_id_metadata_document_supported: servers.some((rs) => rs.openCimd),
    scopes_supported: scopes,
    protected_resources: servers.map((rs) => rs.identifier)
  }
}

export const protectedResourceMetadata = (base: string, rs: ResourceServer) => ({
  resource: rs.identifier,
  authorization_servers: [issuerOf(base, rs.developerId)],
  scopes_supported: rs.scopes.map((s) => s.name),
  bearer_methods_supported: ["header"],
  resource_name: rs.name
})
