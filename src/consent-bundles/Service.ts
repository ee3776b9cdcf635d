/**
 * Consent bundles (interface: Consent bundles; decisions §4): everything an on-device agent needs
 * to act offline — a grant token, the JWKS to check it, and an Ed25519 key to sign its audit
 * trail — plus revocation the device learns of at its next sync or status check.
 *
 * Status is stored active/revoked; `expired` is derived (active and offlineExpiresAt ≤ now).
 * The audit private key is returned once and never stored.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { generateKeyPairSync } from "node:crypto"
import { Config } from "../Config.ts"
import { DpdpApproval } from "../dpdp/ApprovalConsent.ts"
import { Gate } from "../gate/Gate.ts"
import { Grants } from "../grants/Service.ts"
import {
  AgentNotFound, type AgentSuspended, AlreadyRevoked, BundleExpired, BundleNotFound, BundleRevoked, type ConsentRequired, InvalidRequest,
  InvalidScopes, InvalidTtl, type PlanLimitExceeded, type PolicyDenied, type PrincipalInactive
} from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { Keys, type PublicJwk } from "../platform/Keys.ts"
import { makeDirectRead, makeDirectReadNow } from "../platform/PgPool.ts"
import { decodeCursor, encodeCursor } from "../platform/Pagination.ts"
import { nowMillis } from "../platform/Time.ts"
import { consentRequired, consumeApproval } from "./Consent.ts"

export const MAX_TTL_SECONDS = 168 * 3600

export interface BundleRecord {
  readonly id: string
  readonly developerId: string
  readonly agentId: string
  readonly userId: string
  readonly scopes: ReadonlyArray<string>
  readonly grantId: string
  readonly offlineTtlSeconds: number
  readonly offlineExpiresAt: Date
  readonly status: "active" | "revoked"
  readonly revokedAt: Date | null
  readonly checkpointAt: string
  readonly createdAt: Date
  readonly lastSyncAt: Date | null
  readonly auditEntryCount: number
}

export const BUNDLE_COLUMNS = `id, developer_id, agent_id, user_id, scopes, grant_id, offline_ttl_seconds, offline_expires_at,
  status, revoked_at, checkpoint_at, created_at, last_sync_at, audit_entry_count`

export const derivedStatus = (b: BundleRecord, nowMs: number): "active" | "expired" | "revoked" =>
  b.status === "revoked" ? "revoked" : b.offlineExpiresAt.getTime() <= nowMs ? "expired" : "active"

export const summaryView = (b: BundleRecord, nowMs: number) => ({
  id: b.id,
  agentId: b.agentId,
  userId: b.userId,
  scopes: [...b.scopes],
  offlineExpiresAt: b.offlineExpiresAt.toISOString(),
  status: derivedStatus(b, nowMs),
  createdAt: b.createdAt.toISOString(),
  lastSyncAt: b.lastSyncAt?.toISOString() ?? null,
  auditEntryCount: Number(b.auditEntryCount)
})

/**
 * `72h`, `30m`, `7d` (decisions §4: ^[1-9][0-9]*[mhd]$) → seconds; undefined when malformed. A
 * well-formed TTL of any size parses (then over 168h → 422 INVALID_TTL, not 400).
 */
export const parseOfflineTtl = (ttl: string): number | undefined => {
  const m = /^([1-9][0-9]*)([mhd])$/.exec(ttl)
  if (m === null) return undefined
  return Number(m[1]) * (m[2] === "m" ? 60 : m[2] === "h" ? 3600 : 86400)
}

export interface CreateInput {
  readonly agentId: string
  readonly userId: string
  readonly scopes: ReadonlyArray<string>
  readonly offlineTTL?: string
  readonly offlineAuditKeyAlgorithm?: string
  /** an approved authorization request; required when the developer requires passkeys or SSO (§12) */
  readonly consentRequestId?: string
}

export type BundleResponse = ReturnType<typeof bundleResponse>

const bundleResponse = (input: {
  bundle: BundleRecord
  grantToken: string
  jwks: { keys: ReadonlyArray<PublicJwk> }
  fetchedAt: string
  publicKey: string
  privateKey: string
  syncEndpoint: string
}) => ({
  bundleId: input.bundle.id,
  grantToken: input.grantToken,
  jwksSnapshot: {
    keys: input.jwks.keys,
    fetchedAt: input.fetchedAt,
    validUntil: input.bundle.offlineExpiresAt.toISOString()
  },
  offlineAuditKey: { publicKey: input.publicKey, privateKey: input.privateKey, algorithm: "Ed25519" },
  checkpointAt: Number(input.bundle.checkpointAt),
  syncEndpoint: input.syncEndpoint,
  offlineExpiresAt: input.bundle.offlineExpiresAt.toISOString()
})

const newAuditKeyPair = () => {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519")
  return {
    publicKey: publicKey.export({ type: "spki", format: "pem" }).toString(),
    privateKey: privateKey.export({ type: "pkcs8", format: "pem" }).toString()
  }
}

export interface ConsentBundlesService {
  readonly create: (developerId: string, input: CreateInput) => Effect.Effect<
    BundleResponse,
    InvalidRequest | AgentNotFound | AgentSuspended | InvalidScopes | InvalidTtl | ConsentRequired | PrincipalInactive | PolicyDenied | PlanLimitExceeded
  >
  readonly list: (developerId: string, query: { agentId?: string; status?: string; cursor?: string; limit: number }) => Effect.Effect<
    { bundles: Array<ReturnType<typeof summaryView>>; nextCursor: string | null },
    InvalidRequest
  >
  readonly get: (developerId: string, id: string) => Effect.Effect<ReturnType<typeof summaryView>, BundleNotFound>
  /** the same read as a promise, on the service's clock, for the lean path's fiberless answer: undefined when not the developer's */
  readonly getNow: (developerId: string, id: string) => Promise<ReturnType<typeof summaryView> | undefined>
  readonly revoke: (developerId: string, id: string) => Effect.Effect<{ bundleId: string; status: "revoked"; revokedAt: string }, BundleNotFound | AlreadyRevoked>
  readonly revocationStatus: (developerId: string, id: string) => Effect.Effect<RevocationStatus, BundleNotFound>
  /** the same read as a promise, for the lean path's fiberless answer: undefined when the bundle is not the developer's */
  readonly revocationStatusNow: (developerId: string, id: string) => Promise<RevocationStatus | undefined>
  readonly refresh: (developerId: string, id: string) => Effect.Effect<
    BundleResponse,
    BundleNotFound | BundleRevoked | BundleExpired | AgentSuspended | PrincipalInactive | PolicyDenied
  >
}

export interface RevocationStatus {
  readonly bundleId: string
  readonly status: "active" | "revoked"
  readonly revokedAt: string | null
}

/** a bundle is revoked when it or its grant is (revoking the grant elsewhere revokes the bundle's use) */
const REVOCATION_STATUS_SQL = `SELECT b.status, b.revoked_at, g.status AS grant_status, g.revoked_at AS grant_revoked_at
  FROM consent_bundles b JOIN grants g ON g.id = b.grant_id
  WHERE b.id = $1 AND b.developer_id = $2`

interface RevocationRow {
  readonly status: string
  readonly revokedAt: Date | null
  readonly grantStatus: string
  readonly grantRevokedAt: Date | null
}

const revocationStatusOf = (id: string, row: RevocationRow): RevocationStatus => {
  const revokedAt = row.revokedAt ?? (row.grantStatus === "revoked" ? row.grantRevokedAt : null)
  return revokedAt === null
    ? { bundleId: id, status: "active", revokedAt: null }
    : { bundleId: id, status: "revoked", revokedAt: revokedAt.toISOString() }
}

export class ConsentBundles extends Context.Tag("agent-auth/ConsentBundles")<ConsentBundles, ConsentBundlesService>() {}

export const ConsentBundlesServiceLive = Layer.effect(
  ConsentBundles,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const grants = yield* Grants
    const keys = yield* Keys
    const events = yield* Events
    const gate = yield* Gate
    const dpdp = yield* DpdpApproval
    const syncEndpoint = `${config.publicBaseUrl}/v1/audit/offline-sync`
    const notFound = () => new BundleNotFound({ message: "Consent bundle not found" })
    // the light reads (a bundle, its revocation status) go straight through the pool (PgPool.ts)
    const read = yield* makeDirectRead
    const readNow = yield* makeDirectReadNow
    // the service's clock (TestClock in tests), read without a fiber by getNow
    const clock = yield* Effect.clock

    const find = (developerId: string, id: string, lock = false) =>
      sql.unsafe<BundleRecord>(
        `SELECT ${BUNDLE_COLUMNS} FROM consent_bundles WHERE id = $1 AND developer_id = $2${lock ? " FOR UPDATE" : ""}`,
        [id, developerId]
      ).pipe(Effect.map((rows) => rows[0]), Effect.orDie)

    const create: ConsentBundlesService["create"] = (developerId, input) =>
      Effect.gen(function*() {
        const ttlText = input.offlineTTL ?? "72h"
        const ttl = parseOfflineTtl(ttlText)
        if (ttl === undefined) {
          return yield* Effect.fail(new InvalidRequest({ message: "offlineTTL must be a positive whole number followed by m, h or d (e.g. 72h)" }))
        }
        if (ttl > MAX_TTL_SECONDS) return yield* Effect.fail(new InvalidTtl({ message: "offlineTTL may be at most 168h (7 days)" }))
        if ((input.offlineAuditKeyAlgorithm ?? "Ed25519") !== "Ed25519") {
          return yield* Effect.fail(new InvalidRequest({ message: "offlineAuditKeyAlgorithm must be Ed25519" }))
        }
        if (input.scopes.length === 0) return yield* Effect.fail(new InvalidRequest({ message: "scopes must not be empty" }))
        const ms = yield* nowMillis
        const at = new Date(ms)
        const expiresAt = new Date(ms + ttl * 1000)
        const scopes = [...new Set(input.scopes)]
        const id = newId("bundle", ms)
        return yield* gate.transaction(Effect.gen(function*() {
          const [agent] = yield* sql<{ scopes: ReadonlyArray<string> }>`
            SELECT scopes FROM agents WHERE id = ${input.agentId} AND developer_id = ${developerId} AND deleted_at IS NULL`.pipe(Effect.orDie)
          if (agent === undefined) return yield* Effect.fail(new AgentNotFound({ message: "Agent not found" }))
          const unregistered = input.scopes.filter((s) => !agent.scopes.includes(s))
          if (unregistered.length > 0) {
            return yield* Effect.fail(new InvalidScopes({ message: `Scopes not registered for the agent: ${unregistered.join(", ")}` }))
          }
          // decisions §20: the agent (locked FOR SHARE: a suspension waits for this bundle and then revokes it, or
          // goes first and is seen), the principal under the directory row's lock, the developer's requirements
          // met by a consumed approval (403 CONSENT_REQUIRED), policies (403 POLICY_DENIED), the active-grant cap
          let consumedRequest: string | undefined
          const allowed = yield* gate.check("bundle.create", {
            developerId, agentId: input.agentId, principalId: input.userId, scopes, cap: "activeGrants",
            approval: (requirement) =>
              Effect.gen(function*() {
                if (input.consentRequestId === undefined && !requirement.passkey && !requirement.sso) return "developer" as const
                const consumed = input.consentRequestId !== undefined && (yield* consumeApproval(sql, {
                  developerId,
                  consentRequestId: input.consentRequestId,
                  agentId: input.agentId,
                  userId: input.userId,
                  scopes,
                  bundleId: id,
                  requirement
                }).pipe(Effect.orDie))
                if (!consumed) return yield* Effect.fail(consentRequired(requirement))
                consumedRequest = input.consentRequestId
                return requirement.passkey ? "passkey" as const : requirement.sso ? "sso" as const : "consent" as const
              })
          })
          const pair = newAuditKeyPair()
          const grant = yield* grants.create({
            developerId, agentId: input.agentId, principalId: input.userId, scopes, expiresAt,
            approvalMethod: allowed.approvalMethod ?? "developer", policyId: allowed.policyId
          })
          // decisions §21: the consumed approval's consent record covers this grant too
          if (consumedRequest !== undefined) yield* dpdp.coverConsumedApproval(developerId, consumedRequest, grant.id)
          const token = yield* grants.issueToken(grant)
          const [bundle] = yield* sql.unsafe<BundleRecord>(
            `INSERT INTO consent_bundles (id, developer_id, agent_id, user_id, scopes, grant_id, offline_ttl_seconds,
               offline_expires_at, status, checkpoint_at, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'active', $9, $10, $10) RETURNING ${BUNDLE_COLUMNS}`,
            [id, developerId, input.agentId, input.userId, scopes as any, grant.id, ttl, expiresAt, ms, at]
          )
          yield* sql`INSERT INTO consent_bundle_audit_keys (bundle_id, public_key_pem, created_at) VALUES (${id}, ${pair.publicKey}, ${at})`
          yield* events.emit(developerId, "consent_bundle.created", {
            bundleId: id,
            agentId: input.agentId,
            userId: input.userId,
            scopes,
            grantId: grant.id,
            offlineExpiresAt: expiresAt.toISOString()
          })
          return bundleResponse({
            bundle: bundle!,
            grantToken: token.grantToken,
            jwks: keys.jwks,
            fetchedAt: at.toISOString(),
            publicKey: pair.publicKey,
            privateKey: pair.privateKey,
            syncEndpoint
          })
        }).pipe(Effect.catchTag("SqlError", Effect.die)))
      })

    const list: ConsentBundlesService["list"] = (developerId, query) =>
      Effect.gen(function*() {
        const cursor = decodeCursor(query.cursor)
        if (cursor === null) return yield* Effect.fail(new InvalidRequest({ message: "cursor is not valid" }))
        const ms = yield* nowMillis
        const now = new Date(ms)
        const conditions = ["developer_id = $1"]
        const params: Array<unknown> = [developerId]
        if (query.agentId !== undefined) {
          params.push(query.agentId)
          conditions.push(`agent_id = $${params.length}`)
        }
        if (query.status === "revoked") conditions.push("status = 'revoked'")
        else if (query.status === "active" || query.status === "expired") {
          params.push(now)
          conditions.push(`status = 'active' AND offline_expires_at ${query.status === "active" ? ">" : "<="} $${params.length}`)
        }
        if (cursor) {
          params.push(new Date(cursor.createdAt), cursor.id)
          conditions.push(`(created_at, id) < ($${params.length - 1}, $${params.length})`)
        }
        params.push(query.limit + 1)
        const rows = yield* sql.unsafe<BundleRecord>(
          `SELECT ${BUNDLE_COLUMNS} FROM consent_bundles WHERE ${conditions.join(" AND ")}
           ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
          params as any
        ).pipe(Effect.orDie)
        const page = rows.slice(0, query.limit)
        return {
          bundles: page.map((b) => summaryView(b, ms)),
          nextCursor: rows.length > query.limit ? encodeCursor(page[page.length - 1]!) : null
        }
      })

    const BUNDLE_SQL = `SELECT ${BUNDLE_COLUMNS} FROM consent_bundles WHERE id = $1 AND developer_id = $2`
    const get: ConsentBundlesService["get"] = (developerId, id) =>
      Effect.gen(function*() {
        const rows = yield* read<BundleRecord>(BUNDLE_SQL, [id, developerId]).pipe(Effect.orDie)
        const bundle = rows[0]
        if (bundle === undefined) return yield* Effect.fail(notFound())
        return summaryView(bundle, yield* nowMillis)
      })
    const getNow: ConsentBundlesService["getNow"] = (developerId, id) =>
      readNow<BundleRecord>(BUNDLE_SQL, [id, developerId]).then((rows) => rows[0] === undefined ? undefined : summaryView(rows[0], clock.unsafeCurrentTimeMillis()))

    const revoke: ConsentBundlesService["revoke"] = (developerId, id) =>
      sql.withTransaction(Effect.gen(function*() {
        const bundle = yield* find(developerId, id, true)
        if (bundle === undefined) return yield* Effect.fail(notFound())
        if (bundle.status === "revoked") return yield* Effect.fail(new AlreadyRevoked({ message: "Consent bundle is already revoked" }))
        const ms = yield* nowMillis
        const at = new Date(ms)
        yield* sql`UPDATE consent_bundles SET status = 'revoked', revoked_at = ${at}, updated_at = ${at} WHERE id = ${id}`.pipe(Effect.orDie)
        // Online checks (vault exchange, token verify) stop accepting the bundle's token at once.
        yield* grants.revoke(developerId, bundle.grantId)
        yield* events.emit(developerId, "consent_bundle.revoked", { bundleId: id, grantId: bundle.grantId, revokedAt: at.toISOString() })
        return { bundleId: id, status: "revoked" as const, revokedAt: at.toISOString() }
      })).pipe(Effect.catchTag("SqlError", Effect.die))

    const revocationStatus: ConsentBundlesService["revocationStatus"] = (developerId, id) =>
      Effect.gen(function*() {
        const rows = yield* read<RevocationRow>(REVOCATION_STATUS_SQL, [id, developerId]).pipe(Effect.orDie)
        const row = rows[0]
        if (row === undefined) return yield* Effect.fail(notFound())
        return revocationStatusOf(id, row)
      })
    const revocationStatusNow: ConsentBundlesService["revocationStatusNow"] = (developerId, id) =>
      readNow<RevocationRow>(REVOCATION_STATUS_SQL, [id, developerId]).then((rows) => rows[0] === undefined ? undefined : revocationStatusOf(id, rows[0]))

    const refresh: ConsentBundlesService["refresh"] = (developerId, id) =>
      gate.transaction(Effect.gen(function*() {
        const bundle = yield* find(developerId, id, true)
        if (bundle === undefined) return yield* Effect.fail(notFound())
        const ms = yield* nowMillis
        const status = derivedStatus(bundle, ms)
        if (status === "revoked") return yield* Effect.fail(new BundleRevoked({ message: "Consent bundle is revoked" }))
        if (status === "expired") {
          return yield* Effect.fail(new BundleExpired({ message: "Consent bundle has expired; create a new one" }))
        }
        const grant = yield* grants.find(developerId, bundle.grantId)
        if (grant === undefined || grant.status !== "active") {
          return yield* Effect.fail(new BundleRevoked({ message: "The bundle's grant is revoked" }))
        }
        // decisions §20: a suspended or deleted agent's bundle is never refreshed (its suspension revokes it, §19),
        // nor one of an inactive principal, nor one a policy denies
        yield* gate.check("bundle.refresh", {
          developerId, agentId: bundle.agentId, principalId: bundle.userId, scopes: bundle.scopes,
          grant: { id: grant.id, delegationDepth: grant.delegationDepth, parentGrantId: grant.parentGrantId }
        })
        const at = new Date(ms)
        const expiresAt = new Date(ms + bundle.offlineTtlSeconds * 1000)
        yield* sql`UPDATE grants SET expires_at = ${expiresAt} WHERE id = ${grant.id}`.pipe(Effect.orDie)
        const token = yield* grants.issueToken({ ...grant, expiresAt })
        const pair = newAuditKeyPair()
        // The previous key stays: entries signed before the refresh still verify when they sync later.
        yield* sql`INSERT INTO consent_bundle_audit_keys (bundle_id, public_key_pem, created_at) VALUES (${id}, ${pair.publicKey}, ${at})`.pipe(Effect.orDie)
        const [updated] = yield* sql.unsafe<BundleRecord>(
          `UPDATE consent_bundles SET offline_expires_at = $2, checkpoint_at = $3, updated_at = $4 WHERE id = $1 RETURNING ${BUNDLE_COLUMNS}`,
          [id, expiresAt, ms, at]
        ).pipe(Effect.orDie)
        return bundleResponse({
          bundle: updated!,
          grantToken: token.grantToken,
          jwks: keys.jwks,
          fetchedAt: at.toISOString(),
          publicKey: pair.publicKey,
          privateKey: pair.privateKey,
          syncEndpoint
        })
      }))

    return { create, list, get, getNow, revoke, revocationStatus, revocationStatusNow, refresh }
  })
)

export const ConsentBundlesLive = ConsentBundlesServiceLive
