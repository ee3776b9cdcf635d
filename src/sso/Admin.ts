/**
 * The connections API (decisions §12): create, list, read, change, delete, test, enforce, and the
 * legacy `/v1/sso/config` (an OIDC connection named `legacy`). Limits: 20 live connections per
 * developer (409), 50 domains each; a domain another active connection of the developer claims is
 * 409. Client secrets are sealed with the vault keys and never answered. Every change emits its
 * `sso.connection.*` event in the same transaction; a change of `enforce` is written to the audit
 * chain (it decides who may approve consent).
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Config } from "../Config.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { type BadRequest, Conflict, NotFound, PlanLimitExceeded, type ProtocolNotSupported } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { VaultKeys, VaultKeysLive } from "../vault/Crypto.ts"
import { type Connection, oidcRedirectUri, samlServiceProvider, sealClientSecret, SsoConnections } from "./Connections.ts"
import { type ConnectionInput, type ConnectionValues, connectionValues, MAX_CONNECTIONS } from "./Input.ts"
import { OidcClient } from "./Oidc.ts"
import { SamlProtocol, type TestCheck } from "./Protocol.ts"

export type ConnectionView = ReturnType<typeof viewOf>

export const viewOf = (c: Connection, publicBaseUrl: string) => ({
  id: c.id,
  connectionId: c.id,
  name: c.name,
  protocol: c.protocol,
  status: c.status,
  domains: [...c.domains],
  jitProvisioning: c.jitProvisioning,
  enforce: c.enforce,
  groupsClaim: c.groupsClaim,
  groupMappings: Object.fromEntries(Object.entries(c.groupMappings).map(([g, s]) => [g, [...s]])),
  defaultScopes: [...c.defaultScopes],
  allowedRedirectUris: [...c.allowedRedirectUris],
  ...(c.oidc !== null
    ? {
      issuerUrl: c.oidc.issuerUrl,
      clientId: c.oidc.clientId,
      tokenEndpointAuthMethod: c.oidc.tokenEndpointAuthMethod,
      scopes: c.oidc.scopes,
      tenantMode: c.oidc.tenantMode,
      ...(c.oidc.tenantMode === "entra-multi" ? { allowedTenants: [...c.oidc.allowedTenants] } : {}),
      hasClientSecret: c.hasClientSecret,
      redirectUri: oidcRedirectUri(publicBaseUrl)
    }
    : {}),
  ...(c.saml !== null
    ? { idpEntityId: c.saml.idpEntityId, idpSsoUrl: c.saml.idpSsoUrl, idpCertificates: [...c.saml.idpCertificates], ...samlServiceProvider(publicBaseUrl, c.id) }
    : {}),
  createdAt: c.createdAt.toISOString(),
  updatedAt: c.updatedAt.toISOString()
})

export interface LegacyInput {
  readonly issuerUrl: string
  readonly clientId: string
  readonly clientSecret: string
  readonly redirectUri?: string | undefined
}

type InputErrors = BadRequest | ProtocolNotSupported | Conflict

/** the developer's plan figure for SSO connections (decisions §16: `ssoConnections`, null = no cap beyond the 20) */
export interface PlanCap {
  readonly limit: number | null
  readonly planName: string
}

export interface SsoAdminService {
  readonly create: (developerId: string, input: ConnectionInput, cap: PlanCap) => Effect.Effect<ConnectionView, InputErrors | PlanLimitExceeded>
  readonly list: (developerId: string) => Effect.Effect<{ connections: Array<ConnectionView> }>
  readonly get: (developerId: string, id: string) => Effect.Effect<ConnectionView, NotFound>
  readonly update: (developerId: string, id: string, input: ConnectionInput) => Effect.Effect<ConnectionView, InputErrors | NotFound>
  readonly remove: (developerId: string, id: string) => Effect.Effect<void, NotFound>
  readonly test: (developerId: string, id: string) => Effect.Effect<{ success: boolean; protocol: string; checks: ReadonlyArray<TestCheck> }, NotFound>
  readonly enforce: (developerId: string, enforce: boolean) => Effect.Effect<{ enforce: boolean; developerId: string; connections: number }>
  readonly setLegacy: (developerId: string, input: LegacyInput, cap: PlanCap) => Effect.Effect<LegacyView, InputErrors | PlanLimitExceeded>
  readonly getLegacy: (developerId: string) => Effect.Effect<LegacyView, NotFound>
  readonly removeLegacy: (developerId: string) => Effect.Effect<void, NotFound>
}

export interface LegacyView {
  readonly connectionId: string
  readonly issuerUrl: string
  readonly clientId: string
  readonly redirectUri: string | null
  readonly createdAt: string
  readonly updatedAt: string
}

export class SsoAdmin extends Context.Tag("agent-auth/SsoAdmin")<SsoAdmin, SsoAdminService>() {}

const legacyView = (c: Connection): LegacyView => ({
  connectionId: c.id,
  issuerUrl: c.oidc!.issuerUrl,
  clientId: c.oidc!.clientId,
  redirectUri: c.allowedRedirectUris[0] ?? null,
  createdAt: c.createdAt.toISOString(),
  updatedAt: c.updatedAt.toISOString()
})

/** the fields whose stored value changed (event data; never a secret's value) */
const changedFields = (before: Connection, after: Connection, secretChanged: boolean) => {
  const a = viewOf(before, "") as Record<string, unknown>
  const b = viewOf(after, "") as Record<string, unknown>
  const changed = Object.keys(b).filter((k) => k !== "updatedAt" && JSON.stringify(a[k]) !== JSON.stringify(b[k]))
  return secretChanged ? [...changed, "clientSecret"] : changed
}

export const SsoAdminLive = Layer.effect(
  SsoAdmin,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const ring = yield* VaultKeys
    const connections = yield* SsoConnections
    const oidc = yield* OidcClient
    const saml = yield* SamlProtocol
    const events = yield* Events
    const audit = yield* AuditChain
    const view = (c: Connection) => viewOf(c, config.publicBaseUrl)
    const checkOptions = { allowPrivateHosts: config.sso.allowPrivateHosts, saml }

    /** in the caller's transaction, the developer row locked: a domain another active connection claims */
    const domainTaken = (developerId: string, values: ConnectionValues, exceptId: string | null) =>
      Effect.gen(function*() {
        if (values.status !== "active" || values.domains.length === 0) return undefined
        const rows = yield* sql<{ domain: string }>`
          SELECT d AS domain FROM sso_connections, unnest(domains) AS d
          WHERE developer_id = ${developerId} AND deleted_at IS NULL AND status = 'active' AND id <> ${exceptId ?? ""}
            AND d = ANY(${[...values.domains] as any}::text[]) LIMIT 1`
        return rows[0]?.domain
      })

    const write = (developerId: string, id: string, values: ConnectionValues, ms: number, insert: boolean) => {
      const secret = values.clientSecret === undefined ? null : sealClientSecret(ring, id, developerId, values.clientSecret)
      const params = [
        id, developerId, values.name, values.protocol, values.status, [...values.domains], values.jitProvisioning, values.enforce,
        values.groupsClaim, JSON.stringify(values.groupMappings), [...values.defaultScopes], [...values.allowedRedirectUris],
        values.oidc?.issuerUrl ?? null, values.oidc?.clientId ?? null, secret, values.oidc?.tokenEndpointAuthMethod ?? null,
        values.oidc?.scopes ?? null, values.oidc?.tenantMode ?? null, values.saml?.idpEntityId ?? null, values.saml?.idpSsoUrl ?? null,
        values.saml === null ? null : JSON.stringify(values.saml.idpCertificates), new Date(ms),
        values.oidc === null ? null : [...values.oidc.allowedTenants]
      ]
      return insert
        ? sql.unsafe(
          `INSERT INTO sso_connections (id, developer_id, name, protocol, status, domains, jit_provisioning, enforce, groups_claim,
             group_mappings, default_scopes, allowed_redirect_uris, issuer_url, client_id, client_secret_ciphertext,
             token_endpoint_auth_method, scopes, tenant_mode, idp_entity_id, idp_sso_url, idp_certificates, created_at, updated_at,
             allowed_tenants)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21::jsonb, $22, $22, $23)`,
          params as any
        )
        : sql.unsafe(
          `UPDATE sso_connections SET name = $3, protocol = $4, status = $5, domains = $6, jit_provisioning = $7, enforce = $8, groups_claim = $9,
             group_mappings = $10::jsonb, default_scopes = $11, allowed_redirect_uris = $12, issuer_url = $13, client_id = $14,
             client_secret_ciphertext = COALESCE($15, client_secret_ciphertext), token_endpoint_auth_method = $16, scopes = $17,
             tenant_mode = $18, idp_entity_id = $19, idp_sso_url = $20, idp_certificates = $21::jsonb, updated_at = $22,
             allowed_tenants = $23
           WHERE id = $1 AND developer_id = $2`,
          params as any
        )
    }

    const enforceAudit = (developerId: string, enforce: boolean, connectionIds: ReadonlyArray<string>) =>
      audit.append({ developerId, action: "service.sso.enforce_changed", metadata: { enforce, connectionIds: [...connectionIds] } })

    const reread = (developerId: string, id: string) => Effect.map(connections.find(developerId, id), (c) => c!)

    const create: SsoAdminService["create"] = (developerId, input, cap) =>
      Effect.gen(function*() {
        const values = yield* connectionValues(input, undefined, checkOptions)
        const ms = yield* nowMillis
        const id = newId("sso", ms)
        yield* sql.withTransaction(Effect.gen(function*() {
          // the developer row serialises creations, so two cannot both take the 20th place or one domain
          yield* sql`SELECT id FROM developers WHERE id = ${developerId} FOR UPDATE`
          const [live] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM sso_connections WHERE developer_id = ${developerId} AND deleted_at IS NULL`
          if (cap.limit !== null && Number(live!.n) >= cap.limit) {
            return yield* Effect.fail(new PlanLimitExceeded({ message: `The ${cap.planName} plan allows ${cap.limit} SSO connections` }))
          }
          if (Number(live!.n) >= MAX_CONNECTIONS) {
            return yield* Effect.fail(new Conflict({ message: `At most ${MAX_CONNECTIONS} SSO connections; delete one first` }))
          }
          const taken = yield* domainTaken(developerId, values, null)
          if (taken !== undefined) return yield* Effect.fail(new Conflict({ message: `The domain ${taken} is claimed by another active connection` }))
          if (values.name === "legacy" && (yield* sql`SELECT 1 FROM sso_connections WHERE developer_id = ${developerId} AND name = 'legacy' AND deleted_at IS NULL`).length > 0) {
            return yield* Effect.fail(new Conflict({ message: "A connection named legacy exists (the /v1/sso/config connection)" }))
          }
          yield* write(developerId, id, values, ms, true)
          yield* events.emit(developerId, "sso.connection.created", { connectionId: id, name: values.name, protocol: values.protocol })
          if (values.enforce) yield* enforceAudit(developerId, true, [id])
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        return view(yield* reread(developerId, id))
      })

    const list: SsoAdminService["list"] = (developerId) =>
      Effect.map(connections.list(developerId), (rows) => ({ connections: rows.map(view) }))

    const found = (developerId: string, id: string) =>
      Effect.flatMap(connections.find(developerId, id), (c) =>
        c === undefined ? Effect.fail(new NotFound({ message: "SSO connection not found" })) : Effect.succeed(c))

    const get: SsoAdminService["get"] = (developerId, id) => Effect.map(found(developerId, id), view)

    const update: SsoAdminService["update"] = (developerId, id, input) =>
      Effect.gen(function*() {
        const before = yield* found(developerId, id)
        const values = yield* connectionValues(input, before, checkOptions)
        const ms = yield* nowMillis
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT id FROM developers WHERE id = ${developerId} FOR UPDATE`
          const taken = yield* domainTaken(developerId, values, id)
          if (taken !== undefined) return yield* Effect.fail(new Conflict({ message: `The domain ${taken} is claimed by another active connection` }))
          yield* write(developerId, id, values, ms, false)
          const after = yield* reread(developerId, id)
          const changed = changedFields(before, after, values.clientSecret !== undefined)
          if (changed.length > 0) yield* events.emit(developerId, "sso.connection.updated", { connectionId: id, changed })
          if (before.enforce !== after.enforce) yield* enforceAudit(developerId, after.enforce, [id])
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        return view(yield* reread(developerId, id))
      })

    const remove: SsoAdminService["remove"] = (developerId, id) =>
      sql.withTransaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        const rows = yield* sql<{ enforce: boolean }>`UPDATE sso_connections SET deleted_at = ${new Date(ms)}, updated_at = ${new Date(ms)}
                                WHERE id = ${id} AND developer_id = ${developerId} AND deleted_at IS NULL RETURNING enforce`
        if (rows.length === 0) return yield* Effect.fail(new NotFound({ message: "SSO connection not found" }))
        // its sessions end with it
        yield* sql`UPDATE sso_sessions SET revoked_at = ${new Date(ms)} WHERE connection_id = ${id} AND revoked_at IS NULL`
        yield* events.emit(developerId, "sso.connection.deleted", { connectionId: id })
        if (rows[0]!.enforce) yield* enforceAudit(developerId, false, [id])
      })).pipe(Effect.catchTag("SqlError", Effect.die))

    const test: SsoAdminService["test"] = (developerId, id) =>
      Effect.gen(function*() {
        const connection = yield* found(developerId, id)
        const outcome = connection.protocol === "oidc"
          ? yield* oidc.test(connection)
          : yield* saml.test(connection).pipe(Effect.catchAll((e) => Effect.succeed({ ok: false, checks: [{ name: "saml", ok: false, detail: e.message }] })))
        return { success: outcome.ok, protocol: connection.protocol, checks: outcome.checks }
      })

    const enforce: SsoAdminService["enforce"] = (developerId, value) =>
      sql.withTransaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        const rows = yield* sql<{ id: string }>`UPDATE sso_connections SET enforce = ${value}, updated_at = ${new Date(ms)}
                                WHERE developer_id = ${developerId} AND deleted_at IS NULL AND status = 'active' AND enforce <> ${value}
                                RETURNING id`
        if (rows.length > 0) {
          yield* events.emitMany(rows.map((r) => ({ developerId, type: "sso.connection.updated" as const, data: { connectionId: r.id, changed: ["enforce"] } })))
          yield* enforceAudit(developerId, value, rows.map((r) => r.id))
        }
        return { enforce: value, developerId, connections: rows.length }
      })).pipe(Effect.orDie)

    const legacy = (developerId: string) =>
      Effect.map(connections.list(developerId), (rows) => rows.find((c) => c.name === "legacy" && c.protocol === "oidc"))

    const setLegacy: SsoAdminService["setLegacy"] = (developerId, input, cap) =>
      Effect.gen(function*() {
        const current = yield* legacy(developerId)
        const body: ConnectionInput = {
          name: "legacy",
          protocol: "oidc",
          issuerUrl: input.issuerUrl,
          clientId: input.clientId,
          clientSecret: input.clientSecret,
          allowedRedirectUris: input.redirectUri === undefined ? [] : [input.redirectUri]
        }
        const made = current === undefined
          ? yield* create(developerId, body, cap)
          : yield* update(developerId, current.id, body).pipe(Effect.catchTag("NotFound", Effect.die))
        return legacyView(yield* reread(developerId, made.id))
      })

    const getLegacy: SsoAdminService["getLegacy"] = (developerId) =>
      Effect.flatMap(legacy(developerId), (c) =>
        c === undefined ? Effect.fail(new NotFound({ message: "No SSO configuration" })) : Effect.succeed(legacyView(c)))

    const removeLegacy: SsoAdminService["removeLegacy"] = (developerId) =>
      Effect.flatMap(legacy(developerId), (c) =>
        c === undefined ? Effect.fail(new NotFound({ message: "No SSO configuration" })) : remove(developerId, c.id))

    return { create, list, get, update, remove, test, enforce, setLegacy, getLegacy, removeLegacy }
  })
).pipe(Layer.provide(VaultKeysLive))
