/**
 * The credential vault: store (upsert per developer, principal and service), list, get, delete, and
 * the grant-token exchange that returns a decrypted upstream access token (interface: Credential
 * vault; decisions §9). Tokens and secrets never leave this module except in the exchange answer,
 * and are never logged. The exchange itself is Exchange.ts, decrypting and refreshing Refresh.ts,
 * the upstream token endpoint Upstream.ts; this file holds the service's shape, storage and listing.
 */
import { AnomalyCore } from "../anomalies/Core.ts"
import { Gate } from "../gate/Gate.ts"
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import { Config } from "../Config.ts"
import { AuditedEvents } from "../platform/AuditedEvents.ts"
import { BadRequest, type CredentialUnreadable, type Forbidden, type NotFound, type Unauthorized, type UpstreamRefreshFailed } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import { Metrics } from "../platform/Metrics.ts"
import type { GrantTokenClaims } from "../platform/Keys.ts"
import { decodeCursor, pageLimit, toPage } from "../platform/Pagination.ts"
import { iso, nowMillis } from "../platform/Time.ts"
import { type Keyring, sealSecrets, type Secrets, VaultKeys, VaultKeysLive } from "./Crypto.ts"
import { makeExchange } from "./Exchange.ts"
import { makeRefresh, notFound } from "./Refresh.ts"
import { makeRepo } from "./Repo.ts"
import { credentialView, type VaultService } from "./Types.ts"
import { checkTokenEndpoint } from "./Upstream.ts"

export { acceptedScopes, exchangeService, scopeAllows } from "./Exchange.ts"
export { credentialView, type CredentialView, type VaultCredentialOut, type VaultService } from "./Types.ts"
export { REFRESH_TIMEOUT_MS } from "./Upstream.ts"

export class Vault extends Context.Tag("agent-auth/Vault")<Vault, VaultService>() {}

export const VaultServiceLive = Layer.effect(
  Vault,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const metrics = yield* Metrics
    const anomalies = yield* AnomalyCore // decisions §14: inline rules
    const gate = yield* Gate
    const ring: Keyring = yield* VaultKeys
    const audited = yield* AuditedEvents
    const repo = makeRepo(sql)

    const store: VaultService["store"] = (developerId, input) =>
      Effect.gen(function*() {
        let tokenEndpoint: string | null = null
        if (input.tokenEndpoint !== undefined && input.tokenEndpoint !== null) {
          const checked = checkTokenEndpoint(input.tokenEndpoint, config.webhooks.allowPrivateHosts)
          if (typeof checked !== "string") return yield* Effect.fail(checked)
          tokenEndpoint = checked
        }
        if (input.clientSecret && !input.clientId) {
          return yield* Effect.fail(new BadRequest({ message: "clientSecret needs clientId", details: [{ path: "clientId", message: "is required with clientSecret" }] }))
        }
        const secrets: Secrets = {
          accessToken: input.accessToken,
          refreshToken: input.refreshToken ?? null,
          clientId: input.clientId ?? null,
          clientSecret: input.clientSecret ?? null
        }
        const fields = (id: string) => ({
          credentialType: input.credentialType ?? "oauth2",
          tokenExpiresAt: input.tokenExpiresAt ? new Date(input.tokenExpiresAt) : null,
          metadata: input.metadata ?? {},
          tokenEndpoint,
          hasRefreshToken: !!input.refreshToken,
          sealed: sealSecrets(ring, { id, developerId, principalId: input.principalId, service: input.service }, secrets)
        })
        const row = yield* sql.withTransaction(Effect.gen(function*() {
          // Upsert keeping the row's id (the ciphertext is bound to it): lock the existing row, or
          // insert; a concurrent insert of the same triple makes us retry as an update.
          for (let attempt = 0; attempt < 5; attempt++) {
            const ms = yield* nowMillis
            const at = new Date(ms)
            const existing = yield* repo.findByTriple(developerId, input.principalId, input.service, true)
            if (existing !== undefined) return (yield* repo.replace(existing.id, at, fields(existing.id)))!
            const id = newId("vcred", ms)
            const inserted = yield* repo.insert({ id, developerId, principalId: input.principalId, service: input.service, at, ...fields(id) })
            if (inserted !== undefined) return inserted
          }
          return yield* Effect.dieMessage("vault upsert did not settle")
        })).pipe(Effect.orDie)
        yield* Effect.logDebug("vault credential stored").pipe(
          Effect.annotateLogs({ credentialId: row.id, developerId, service: row.service })
        )
        return credentialView(row)
      })

    const list: VaultService["list"] = (developerId, query) =>
      Effect.gen(function*() {
        const limit = pageLimit(query.limit)
        if (limit === undefined) {
          return yield* Effect.fail(new BadRequest({ message: "limit must be an integer from 1 to 100", details: [{ path: "limit", message: "must be an integer from 1 to 100" }] }))
        }
        const after = decodeCursor(query.cursor)
        if (after === null) {
          return yield* Effect.fail(new BadRequest({ message: "cursor is malformed", details: [{ path: "cursor", message: "is malformed" }] }))
        }
        const rows = yield* repo.list(
          developerId,
          { principalId: query.principalId || undefined, service: query.service || undefined },
          after,
          limit + 1
        ).pipe(Effect.orDie)
        const { page, nextCursor } = toPage(rows, limit)
        return { credentials: page.map(credentialView), nextCursor }
      })

    const get: VaultService["get"] = (developerId, id) =>
      Effect.flatMap(repo.get(developerId, id).pipe(Effect.orDie), (row) =>
        row === undefined ? Effect.fail(notFound()) : Effect.succeed(credentialView(row)))

    const remove: VaultService["remove"] = (developerId, id) =>
      Effect.flatMap(repo.remove(developerId, id).pipe(Effect.orDie), (deleted) =>
        deleted
          ? Effect.logDebug("vault credential deleted").pipe(Effect.annotateLogs({ credentialId: id, developerId }))
          : Effect.fail(notFound()))

    const refresh = makeRefresh({ repo, ring, config })
    const exchange = makeExchange({ repo, metrics, anomalies, audited, gate, ...refresh })

    return { store, list, get, remove, exchange }
  })
)

/** The capability's services, provided to its handlers and to other capabilities. */
export const VaultLive = VaultServiceLive.pipe(Layer.provideMerge(VaultKeysLive))
