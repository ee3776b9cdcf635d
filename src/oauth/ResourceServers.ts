/**
 * Resource servers (decisions §22.2): an API a developer registers with its API key. Its
 * `identifier` (canonical RFC 8707 URI, unique across the service, immutable) is the `aud` of every
 * token issued for it; its introspection credentials are `rs_…` : `rss_…` (the secret shown once,
 * stored as SHA-256). Deleting one revokes every grant made for it through the one revocation path.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { Entitlements } from "../billing/Entitlements.ts"
import { Config } from "../Config.ts"
import { Grants } from "../grants/Service.ts"
import type { Developer } from "../platform/Auth.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { BadRequest, Conflict, InvalidScopes, NotFound, type PlanLimitExceeded } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { sha256Hex } from "../platform/Hash.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { SsoConnections } from "../sso/Connections.ts"
import { InvalidResourceIdentifier, LoginMethodRequired, SsoNotConfigured } from "./Errors.ts"
import { canonicalResource, issuerOf, sameHash } from "./Rules.ts"
import { durationText, type SettingsInput, settingsOf } from "./ServerSettings.ts"

export interface ScopeDef {
  readonly name: string
  readonly description?: string | undefined
}

export interface ResourceServer {
  readonly id: string
  readonly developerId: string
  readonly identifier: string
  readonly name: string
  readonly scopes: ReadonlyArray<ScopeDef>
  readonly defaultScopes: ReadonlyArray<string>
  readonly accessTokenTtlSeconds: number
  readonly grantTtlSeconds: number
  readonly openDcr: boolean
  readonly openCimd: boolean
  readonly cimdAllowedHosts: ReadonlyArray<string> | null
  readonly login: { readonly sso: boolean; readonly passkey: boolean; readonly developerLoginUrl?: string | undefined }
  readonly secretHash: string
  readonly previousSecretHash: string | null
  readonly previousSecretUntil: Date | null
  readonly createdAt: Date
  readonly updatedAt: Date
}

export interface CreateResourceServerInput {
  readonly identifier: string
  readonly name: string
  readonly scopes: ReadonlyArray<ScopeDef>
  readonly defaultScopes?: ReadonlyArray<string> | undefined
  readonly accessTokenTtl?: string | undefined
  readonly grantTtl?: string | undefined
  readonly openRegistration?: { readonly dcr?: boolean | undefined; readonly cimd?: boolean | undefined; readonly cimdAllowedHosts?: ReadonlyArray<string> | undefined } | undefined
  readonly login: { readonly sso?: boolean | undefined; readonly passkey?: boolean | undefined; readonly developerLoginUrl?: string | undefined }
}

const COLUMNS = `id, developer_id, identifier, name, scopes, default_scopes, access_token_ttl_seconds, grant_ttl_seconds, open_dcr, open_cimd,
  cimd_allowed_hosts, login, secret_hash, previous_secret_hash, previous_secret_until, created_at, updated_at`

export interface ResourceServersService {
  readonly create: (developer: Developer, input: CreateResourceServerInput) => Effect.Effect<
    ReturnType<ReturnType<typeof makeView>> & { introspection: { clientId: string; clientSecret: string } },
    BadRequest | InvalidResourceIdentifier | InvalidScopes | LoginMethodRequired | SsoNotConfigured | Conflict | PlanLimitExceeded
  >
  readonly list: (developer: Developer) => Effect.Effect<ReadonlyArray<ReturnType<ReturnType<typeof makeView>>>>
  readonly get: (developer: Developer, id: string) => Effect.Effect<ReturnType<ReturnType<typeof makeView>>, NotFound>
  /** decisions §22.2: everything but the identifier (400 "identifier is immutable") */
  readonly update: (developer: Developer, id: string, patch: Partial<SettingsInput> & { readonly identifier?: string | undefined }) => Effect.Effect<
    ReturnType<ReturnType<typeof makeView>>,
    BadRequest | InvalidScopes | LoginMethodRequired | SsoNotConfigured | NotFound
  >
  /** a new introspection secret; the old one stays valid 24 h */
  readonly rotateSecret: (developer: Developer, id: string) => Effect.Effect<{ clientId: string; clientSecret: string }, NotFound>
  readonly remove: (developer: Developer, id: string) => Effect.Effect<void, NotFound>
  /** every resource server of a developer (the issuer's metadata, authorize) */
  readonly ofDeveloper: (developerId: string) => Effect.Effect<ReadonlyArray<ResourceServer>>
  /** an RS's introspection credentials (Basic `rs_…` : `rss_…`); the RS, or undefined */
  readonly authenticate: (developerId: string, clientId: string, secret: string) => Effect.Effect<ResourceServer | undefined>
  readonly view: (rs: ResourceServer) => ReturnType<ReturnType<typeof makeView>>
}

export class ResourceServers extends Context.Tag("agent-auth/ResourceServers")<ResourceServers, ResourceServersService>() {}

const makeView = (base: string) => (rs: ResourceServer) => {
  const issuer = issuerOf(base, rs.developerId)
  const prm = `${issuer}/resource-servers/${rs.id}/.well-known/oauth-protected-resource`
  return {
    resourceServerId: rs.id,
    identifier: rs.identifier,
    name: rs.name,
    scopes: rs.scopes.map((s) => (s.description === undefined ? { name: s.name } : { name: s.name, description: s.description })),
    defaultScopes: [...rs.defaultScopes],
    accessTokenTtl: durationText(rs.accessTokenTtlSeconds),
    grantTtl: durationText(rs.grantTtlSeconds),
    openRegistration: { dcr: rs.openDcr, cimd: rs.openCimd, ...(rs.cimdAllowedHosts ? { cimdAllowedHosts: [...rs.cimdAllowedHosts] } : {}) },
    login: { sso: rs.login.sso, passkey: rs.login.passkey, ...(rs.login.developerLoginUrl ? { developerLoginUrl: rs.login.developerLoginUrl } : {}) },
    issuer,
    protectedResourceMetadataUrl: prm,
    wwwAuthenticate: `Bearer resource_metadata="${prm}"${rs.defaultScopes.length > 0 ? `, scope="${rs.defaultScopes.join(" ")}"` : ""}`,
    createdAt: rs.createdAt.toISOString(),
    updatedAt: rs.updatedAt.toISOString()
  }
}

export const ResourceServersLive = Layer.effect(
  ResourceServers,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const grants = yield* Grants
    const events = yield* Events
    const audit = yield* AuditChain
    const entitlements = yield* Entitlements
    const view = makeView(config.oauth.issuerBase)
    const ssoConnections = yield* SsoConnections

    /** decisions §22.2: SSO sign-in needs an active SSO connection (section 12) */
    const ssoReady = (developerId: string, login: { readonly sso: boolean }) =>
      Effect.gen(function*() {
        if (!login.sso) return
        const active = (yield* ssoConnections.list(developerId)).some((c) => c.status === "active")
        if (!active) return yield* Effect.fail(new SsoNotConfigured({ message: "login.sso needs an active SSO connection" }))
      })

    const byId = (developerId: string, id: string) =>
      sql.unsafe<ResourceServer>(`SELECT ${COLUMNS} FROM resource_servers WHERE id = $1 AND developer_id = $2`, [id, developerId]).pipe(
        Effect.map((rows) => rows[0]),
        Effect.orDie
      )

    const create: ResourceServersService["create"] = (developer, input) =>
      Effect.gen(function*() {
        const canonical = canonicalResource(input.identifier, config.production)
        if ("problem" in canonical) return yield* Effect.fail(new InvalidResourceIdentifier({ message: canonical.problem }))
        const checked = settingsOf(input, config.production)
        if ("error" in checked) return yield* Effect.fail(checked.error)
        const { names: _names, defaults, accessTtl, grantTtl, open, login } = checked
        yield* ssoReady(developer.id, login)
        const ms = yield* nowMillis
        const id = newId("rs", ms)
        const secret = `rss_${randomBytes(32).toString("base64url")}`
        // decisions §22.2: the plan's resourceServers cap (402), counted in the creating transaction
        const inserted = yield* entitlements.withinCap(developer, "resourceServers", sql.withTransaction(Effect.gen(function*() {
          const rows = yield* sql.unsafe<ResourceServer>(
            `INSERT INTO resource_servers (id, developer_id, identifier, name, scopes, default_scopes, access_token_ttl_seconds, grant_ttl_seconds,
               open_dcr, open_cimd, cimd_allowed_hosts, login, secret_hash, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9, $10, $11, $12::jsonb, $13, $14, $14)
             ON CONFLICT (identifier) DO NOTHING RETURNING ${COLUMNS}`,
            [id, developer.id, canonical.ok, input.name, JSON.stringify(input.scopes.map((s) => ({ name: s.name, ...(s.description !== undefined ? { description: s.description } : {}) }))),
              [...new Set(defaults)] as any, accessTtl, grantTtl, open.dcr === true, open.cimd === true,
              open.cimdAllowedHosts === undefined ? null : [...open.cimdAllowedHosts] as any,
              JSON.stringify({ sso: login.sso, passkey: login.passkey, ...(login.developerLoginUrl ? { developerLoginUrl: login.developerLoginUrl } : {}) }),
              sha256Hex(secret), new Date(ms)]
          )
          const rs = rows[0]
          if (rs === undefined) return undefined
          yield* events.emit(developer.id, "resource_server.created", { resourceServerId: id })
          yield* audit.append({ developerId: developer.id, action: "service.resource_server.changed", metadata: { resourceServerId: id, change: "created" } })
          return rs
        })).pipe(Effect.orDie))
        if (inserted === undefined) return yield* Effect.fail(new Conflict({ message: "A resource server with this identifier is already registered" }))
        return { ...view(inserted), introspection: { clientId: id, clientSecret: secret } }
      })

    const list: ResourceServersService["list"] = (developer) =>
      sql.unsafe<ResourceServer>(`SELECT ${COLUMNS} FROM resource_servers WHERE developer_id = $1 ORDER BY created_at DESC, id DESC LIMIT 500`, [developer.id]).pipe(
        Effect.map((rows) => rows.map(view)),
        Effect.orDie
      )

    const get: ResourceServersService["get"] = (developer, id) =>
      Effect.flatMap(byId(developer.id, id), (rs) => rs === undefined ? Effect.fail(new NotFound({ message: "Resource server not found" })) : Effect.succeed(view(rs)))

    const remove: ResourceServersService["remove"] = (developer, id) =>
      sql.withTransaction(Effect.gen(function*() {
        const rows = yield* sql<{ id: string }>`DELETE FROM resource_servers WHERE id = ${id} AND developer_id = ${developer.id} RETURNING id`
        if (rows.length === 0) return false
        // decisions §22.2: every grant made for it, through the one revocation path, in this transaction
        const active = yield* sql<{ id: string }>`SELECT id FROM grants WHERE developer_id = ${developer.id} AND resource_server_id = ${id} AND status = 'active'`
        const revoked = yield* grants.revokeMany(developer.id, active.map((g) => g.id))
        yield* events.emit(developer.id, "resource_server.deleted", { resourceServerId: id, grantsRevoked: revoked.length })
        yield* audit.append({ developerId: developer.id, action: "service.resource_server.changed", metadata: { resourceServerId: id, change: "deleted" } })
        return true
      })).pipe(
        Effect.orDie,
        Effect.flatMap((found) => found ? Effect.void : Effect.fail(new NotFound({ message: "Resource server not found" })))
      )

    const update: ResourceServersService["update"] = (developer, id, patch) =>
      Effect.gen(function*() {
        if (patch.identifier !== undefined) return yield* Effect.fail(new BadRequest({ message: "identifier is immutable" }))
        const current = yield* byId(developer.id, id)
        if (current === undefined) return yield* Effect.fail(new NotFound({ message: "Resource server not found" }))
        const was = view(current)
        const merged: SettingsInput = {
          name: patch.name ?? was.name,
          scopes: patch.scopes ?? was.scopes,
          defaultScopes: patch.defaultScopes ?? was.defaultScopes,
          accessTokenTtl: patch.accessTokenTtl ?? was.accessTokenTtl,
          grantTtl: patch.grantTtl ?? was.grantTtl,
          openRegistration: { ...was.openRegistration, ...patch.openRegistration },
          login: { ...was.login, ...patch.login }
        }
        const checked = settingsOf(merged, config.production)
        if ("error" in checked) return yield* Effect.fail(checked.error)
        if (patch.login?.sso === true) yield* ssoReady(developer.id, checked.login)
        const changed = Object.keys(patch).filter((k) => JSON.stringify((patch as any)[k]) !== JSON.stringify((was as any)[k])).sort()
        const ms = yield* nowMillis
        const updated = yield* sql.withTransaction(Effect.gen(function*() {
          const rows = yield* sql.unsafe<ResourceServer>(
            `UPDATE resource_servers SET name = $3, scopes = $4::jsonb, default_scopes = $5, access_token_ttl_seconds = $6, grant_ttl_seconds = $7,
               open_dcr = $8, cimd_allowed_hosts = $9, login = $10::jsonb, updated_at = $11, open_cimd = $12
             WHERE id = $1 AND developer_id = $2 RETURNING ${COLUMNS}`,
            [id, developer.id, merged.name, JSON.stringify(merged.scopes), [...new Set(checked.defaults)] as any, checked.accessTtl, checked.grantTtl,
              checked.open.dcr === true, checked.open.cimdAllowedHosts === undefined ? null : [...checked.open.cimdAllowedHosts] as any,
              JSON.stringify({ sso: checked.login.sso, passkey: checked.login.passkey, ...(checked.login.developerLoginUrl ? { developerLoginUrl: checked.login.developerLoginUrl } : {}) }),
              new Date(ms), checked.open.cimd === true]
          )
          if (changed.length > 0) {
            yield* events.emit(developer.id, "resource_server.updated", { resourceServerId: id, changed })
            yield* audit.append({ developerId: developer.id, action: "service.resource_server.changed", metadata: { resourceServerId: id, change: "updated", fields: changed } })
          }
          return rows[0]!
        })).pipe(Effect.orDie)
        return view(updated)
      })

    const rotateSecret: ResourceServersService["rotateSecret"] = (developer, id) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const secret = `rss_${randomBytes(32).toString("base64url")}`
        const rows = yield* sql<{ id: string }>`
          UPDATE resource_servers SET previous_secret_hash = secret_hash, previous_secret_until = ${new Date(ms + 24 * 3600 * 1000)},
                 secret_hash = ${sha256Hex(secret)}, updated_at = ${new Date(ms)}
          WHERE id = ${id} AND developer_id = ${developer.id} RETURNING id`.pipe(Effect.orDie)
        if (rows.length === 0) return yield* Effect.fail(new NotFound({ message: "Resource server not found" }))
        return { clientId: id, clientSecret: secret }
      })

    const ofDeveloper: ResourceServersService["ofDeveloper"] = (developerId) =>
      sql.unsafe<ResourceServer>(`SELECT ${COLUMNS} FROM resource_servers WHERE developer_id = $1 ORDER BY created_at, id`, [developerId]).pipe(Effect.orDie)

    const authenticate: ResourceServersService["authenticate"] = (developerId, clientId, secret) =>
      Effect.gen(function*() {
        const rs = yield* byId(developerId, clientId)
        if (rs === undefined) return undefined
        const ms = yield* nowMillis
        const hash = sha256Hex(secret)
        if (sameHash(rs.secretHash, hash)) return rs
        if (rs.previousSecretUntil !== null && rs.previousSecretUntil.getTime() > ms && sameHash(rs.previousSecretHash, hash)) return rs
        return undefined
      })

    return { create, list, get, update, rotateSecret, remove, ofDeveloper, authenticate, view }
  })
)
