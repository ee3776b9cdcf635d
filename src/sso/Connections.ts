/**
 * SSO connections (decisions §12): a developer's identity providers, OIDC or SAML. This file is
 * the read side every SSO route shares (login, callbacks, the SAML ACS, consent binding): the
 * `Connection` record, lookups scoped to a developer or by id alone (the ACS has only the id in its
 * path), and the OIDC client secret, sealed with the vault keys and opened only to talk to the
 * provider. Writes are in Admin.ts.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Config } from "../Config.ts"
import { SsoError } from "../platform/Errors.ts"
import { type Keyring, openSync, seal, type Sealed, VaultKeys, VaultKeysLive } from "../vault/Crypto.ts"

export type Protocol = "oidc" | "saml"
export type TokenEndpointAuthMethod = "client_secret_basic" | "client_secret_post"
export type TenantMode = "single" | "entra-multi"

export interface OidcSettings {
  readonly issuerUrl: string
  readonly clientId: string
  readonly tokenEndpointAuthMethod: TokenEndpointAuthMethod
  /** space-separated, always containing openid */
  readonly scopes: string
  readonly tenantMode: TenantMode
  /** entra-multi: the Entra tenant ids (`tid`) whose people may sign in; empty for single */
  readonly allowedTenants: ReadonlyArray<string>
}

export interface SamlSettings {
  readonly idpEntityId: string
  readonly idpSsoUrl: string
  /** PEM certificates (several during a rollover) */
  readonly idpCertificates: ReadonlyArray<string>
}

/** What a connection is, whatever its protocol: stored (Connection), read (ConnectionRow), written (ConnectionValues). */
export interface ConnectionFields {
  readonly name: string
  readonly protocol: Protocol
  readonly status: "active" | "inactive"
  readonly domains: ReadonlyArray<string>
  readonly jitProvisioning: boolean
  readonly enforce: boolean
  readonly groupsClaim: string | null
  readonly groupMappings: Readonly<Record<string, ReadonlyArray<string>>>
  readonly defaultScopes: ReadonlyArray<string>
  readonly allowedRedirectUris: ReadonlyArray<string>
}

export interface Connection extends ConnectionFields {
  readonly id: string
  readonly developerId: string
  readonly oidc: OidcSettings | null
  readonly saml: SamlSettings | null
  readonly hasClientSecret: boolean
  readonly createdAt: Date
  readonly updatedAt: Date
}

/** The SP values an administrator pastes into their SAML provider (contract: SSO-CONTRACT.md). */
export const samlServiceProvider = (publicBaseUrl: string, connectionId: string) => {
  const spEntityId = `${publicBaseUrl}/sso/saml/metadata/${connectionId}`
  return { spEntityId, spAcsUrl: `${publicBaseUrl}/sso/saml/acs/${connectionId}`, spMetadataUrl: spEntityId }
}

/** The redirect URI registered at every OIDC provider. */
export const oidcRedirectUri = (publicBaseUrl: string) => `${publicBaseUrl}/sso/oidc/callback`

/** The AAD of a sealed client secret: bound to its connection row. */
export const ssoSecretContext = (id: string, developerId: string) => ({ id, developerId, principalId: "sso", service: "sso-client-secret" })

export const sealClientSecret = (ring: Keyring, id: string, developerId: string, secret: string) =>
  JSON.stringify(seal(ring, ssoSecretContext(id, developerId), secret))

/** a row as selected by CONNECTION_COLUMNS (JSON columns not yet parsed) */
export interface ConnectionRow extends Omit<ConnectionFields, "groupMappings"> {
  readonly id: string
  readonly developerId: string
  readonly groupMappings: unknown
  readonly issuerUrl: string | null
  readonly clientId: string | null
  readonly clientSecretCiphertext: string | null
  readonly tokenEndpointAuthMethod: string | null
  readonly scopes: string | null
  readonly tenantMode: string | null
  readonly allowedTenants: ReadonlyArray<string> | null
  readonly idpEntityId: string | null
  readonly idpSsoUrl: string | null
  readonly idpCertificates: unknown
  readonly createdAt: Date
  readonly updatedAt: Date
}

export const CONNECTION_COLUMNS = `id, developer_id, name, protocol, status, domains, jit_provisioning, enforce, groups_claim,
  group_mappings, default_scopes, allowed_redirect_uris, issuer_url, client_id, client_secret_ciphertext,
  token_endpoint_auth_method, scopes, tenant_mode, allowed_tenants, idp_entity_id, idp_sso_url, idp_certificates, created_at, updated_at`

const json = (value: unknown) => (typeof value === "string" ? JSON.parse(value) : value)

export const toConnection = (row: ConnectionRow): Connection => ({
  id: row.id,
  developerId: row.developerId,
  name: row.name,
  protocol: row.protocol,
  status: row.status,
  domains: [...row.domains],
  jitProvisioning: row.jitProvisioning,
  enforce: row.enforce,
  groupsClaim: row.groupsClaim,
  groupMappings: (json(row.groupMappings) ?? {}) as Record<string, ReadonlyArray<string>>,
  defaultScopes: [...row.defaultScopes],
  allowedRedirectUris: [...row.allowedRedirectUris],
  oidc: row.protocol === "oidc"
    ? {
      issuerUrl: row.issuerUrl!,
      clientId: row.clientId!,
      tokenEndpointAuthMethod: (row.tokenEndpointAuthMethod ?? "client_secret_basic") as TokenEndpointAuthMethod,
      scopes: row.scopes ?? "openid email profile",
      tenantMode: (row.tenantMode ?? "single") as TenantMode,
      allowedTenants: [...(row.allowedTenants ?? [])]
    }
    : null,
  saml: row.protocol === "saml"
    ? { idpEntityId: row.idpEntityId!, idpSsoUrl: row.idpSsoUrl!, idpCertificates: (json(row.idpCertificates) ?? []) as Array<string> }
    : null,
  hasClientSecret: row.clientSecretCiphertext !== null,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt
})

export interface SsoConnectionsService {
  /** a live (not deleted) connection of this developer */
  readonly find: (developerId: string, id: string) => Effect.Effect<Connection | undefined>
  /** a live connection by id alone (the SAML ACS and the OIDC callback know only the id) */
  readonly findById: (id: string) => Effect.Effect<Connection | undefined>
  /** the developer's live connections, oldest first */
  readonly list: (developerId: string) => Effect.Effect<ReadonlyArray<Connection>>
  /** the OIDC client secret, opened with the vault keys; SSO_ERROR when no configured key opens it */
  readonly clientSecret: (connection: Connection) => Effect.Effect<string, SsoError>
  /** the developer has an active connection with `enforce` (consent, policies, bundles ask this) */
  readonly enforced: (developerId: string) => Effect.Effect<boolean>
}

export class SsoConnections extends Context.Tag("agent-auth/SsoConnections")<SsoConnections, SsoConnectionsService>() {}

export const SsoConnectionsLive = Layer.effect(
  SsoConnections,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ring = yield* VaultKeys
    yield* Config
    const select = (where: string, params: ReadonlyArray<unknown>) =>
      sql.unsafe<ConnectionRow>(`SELECT ${CONNECTION_COLUMNS} FROM sso_connections WHERE deleted_at IS NULL AND ${where}`, params as any).pipe(
        Effect.map((rows) => rows.map(toConnection)),
        Effect.orDie
      )
    const find: SsoConnectionsService["find"] = (developerId, id) =>
      Effect.map(select("id = $1 AND developer_id = $2", [id, developerId]), (rows) => rows[0])
    const findById: SsoConnectionsService["findById"] = (id) => Effect.map(select("id = $1", [id]), (rows) => rows[0])
    const list: SsoConnectionsService["list"] = (developerId) =>
      select("developer_id = $1 ORDER BY created_at, id", [developerId])
    const clientSecret: SsoConnectionsService["clientSecret"] = (connection) =>
      Effect.gen(function*() {
        const [row] = yield* sql<{ sealed: string | null }>`
          SELECT client_secret_ciphertext AS sealed FROM sso_connections WHERE id = ${connection.id}`.pipe(Effect.orDie)
        if (row?.sealed == null) return yield* Effect.fail(new SsoError({ message: "The connection has no client secret" }))
        const opened = openSync(ring, ssoSecretContext(connection.id, connection.developerId), JSON.parse(row.sealed) as Sealed)
        if (typeof opened !== "string") {
          yield* Effect.logError("SSO client secret unreadable with the configured vault keys").pipe(Effect.annotateLogs({ connectionId: connection.id }))
          return yield* Effect.fail(new SsoError({ message: "The connection's client secret cannot be read; set it again" }))
        }
        return opened
      })
    const enforced: SsoConnectionsService["enforced"] = (developerId) =>
      sql<{ id: string }>`SELECT id FROM sso_connections WHERE developer_id = ${developerId} AND deleted_at IS NULL
                          AND status = 'active' AND enforce LIMIT 1`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)
    return { find, findById, list, clientSecret, enforced }
  })
).pipe(Layer.provide(VaultKeysLive))
