/**
 * Credentials (decisions §18): issuance of `vc+jwt` and `dc+sd-jwt` credentials for a grant inside
 * the caller's transaction (the token's, the delegation's), random places in the developer's status
 * lists, and the status bits flipped inside the revocation and suspension transactions.
 *
 * Issuance never fails quietly: any failure fails the caller's transaction, so nothing is issued.
 */
import { AuditChain } from "../platform/AuditChain.ts"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Context, Data, Effect, Layer, Schedule, Stream } from "effect"
import { randomInt, randomUUID } from "node:crypto"
import { Config } from "../Config.ts"
import type { GrantRecord } from "../grants/Record.ts"
import { BadRequest, NotFound } from "../platform/Errors.ts"
import { isEmbeddedDatabase } from "../platform/Database.ts"
import { Events, nudgeDeliveryWorkers } from "../platform/Events.ts"
import { ulid } from "../platform/Ids.ts"
import { Keys } from "../platform/Keys.ts"
import type { CursorPosition } from "../platform/Pagination.ts"
import { nowMillis } from "../platform/Time.ts"
import { checkFormat, type CredentialFormat, holderJwkOf, sdJwtParts, statusListUrl, type SubjectGrant, vcJwtClaims } from "./Formats.ts"
import { makeLists, type StatusLists } from "./Lists.ts"
import { COUNTER_SHARDS, type CredentialRow, type Flipped, makeRepo } from "./Repo.ts"
import { FULL_AT, LIST_SIZE } from "./StatusList.ts"
import { VcKeys, VcKeysLive } from "./Keys.ts"

/** the grant was revoked after the caller found it active: nothing is issued (the caller's transaction rolls back) */
export class GrantNoLongerActive extends Data.TaggedError("GrantNoLongerActive")<{ readonly grantId: string }> {}

export interface IssueRequest {
  readonly format: CredentialFormat
  readonly holderJwk?: Record<string, string>
  readonly fidoVerifiedAt?: Date | null
}

export interface Issued {
  readonly verifiableCredential?: string
  readonly sdJwtCredential?: string
}

/** GET /v1/credentials(/:id) */
export const credentialView = (c: CredentialRow, nowMs: number, agentDid: string) => ({
  id: c.id,
  grantId: c.grantId,
  developerId: c.developerId,
  principalId: c.principalId,
  agentDid,
  format: c.format,
  credential: c.credential,
  status: c.status === "revoked" ? "revoked" as const : c.expiresAt.getTime() <= nowMs ? "expired" as const : c.suspended ? "suspended" as const : "active" as const,
  statusListIdx: c.statusIdx,
  revocationListId: c.revocationListId,
  suspensionListId: c.suspensionListId,
  issuedAt: c.issuedAt.toISOString(),
  expiresAt: c.expiresAt.toISOString(),
  revokedAt: c.revokedAt?.toISOString() ?? null
})

export interface CredentialsService {
  /** `credentialFormat` and `holderKey` of a token request, checked before anything is spent (400) */
  readonly parseRequest: (input: { readonly credentialFormat?: string; readonly holderKey?: unknown }) => Effect.Effect<IssueRequest, BadRequest>
  /** the credentials a token request asked for, in the caller's transaction */
  readonly issueFor: (grant: GrantRecord, request: IssueRequest) => Effect.Effect<Issued, GrantNoLongerActive>
  /** one credential for an existing grant (POST /v1/credentials/issue) */
  readonly issueOne: (grant: GrantRecord, format: "vc+jwt" | "dc+sd-jwt", holderJwk?: Record<string, string>) => Effect.Effect<CredentialRow, GrantNoLongerActive>
  /** revocation bits of the grants' credentials, in the revocation's transaction (decisions part two: one revocation path) */
  readonly revokeForGrants: (developerId: string, grantIds: ReadonlyArray<string>, at: Date) => Effect.Effect<void>
  /** suspension bits of the agent's credentials (and those delegated from its grants), in the suspension's transaction */
  readonly setAgentSuspended: (developerId: string, agentId: string, suspended: boolean, at: Date) => Effect.Effect<void>
  readonly find: (developerId: string, id: string) => Effect.Effect<CredentialRow, NotFound>
  readonly list: (
    developerId: string,
    filters: { grantId?: string; principalId?: string; status?: "active" | "revoked" },
    after: CursorPosition | undefined,
    limit: number
  ) => Effect.Effect<ReadonlyArray<CredentialRow>>
  readonly credentialByUuid: (uuid: string) => Effect.Effect<CredentialRow | undefined>
  readonly lists: StatusLists
  readonly agentDid: (agentId: string) => string
}

export class Credentials extends Context.Tag("agent-auth/Credentials")<Credentials, CredentialsService>() {}

/** notified with "<list id> <partner id>" when a list's bits change (the trigger of sql/0017) */
export const VC_STATUS_CHANGES = "vc_status_changes"

export const CredentialsServiceLive = Layer.scoped(
  Credentials,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const events = yield* Events
    const audit = yield* AuditChain
    const keys = yield* VcKeys
    const rsa = yield* Keys
    const repo = makeRepo(sql)
    const lists = makeLists({ repo, keys, rsaKid: rsa.kid, baseUrl: config.publicBaseUrl })
    const agentDid = (agentId: string) => `did:${config.didMethod}:${agentId}`
    // Other instances' changes, as they commit. (Not in embedded mode: a single process, and PGlite
    // serves one connection, which LISTEN would hold for good.)
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    if (pg._tag === "Some" && !isEmbeddedDatabase(config.databaseUrl)) {
      yield* pg.value.listen(VC_STATUS_CHANGES).pipe(
        Stream.runForEach((payload) => Effect.sync(() => lists.forget(payload))),
        // while the listener reconnects, cached lists fall back to being checked every 2 s
        Effect.retry({ schedule: Schedule.spaced("1 second") }),
        Effect.catchAllCause(() => Effect.void),
        Effect.forkScoped
      )
    }

    const parseRequest: CredentialsService["parseRequest"] = (input) => {
      const format = input.credentialFormat ?? "jwt"
      const problem = checkFormat(format)
      if (problem !== undefined) return Effect.fail(new BadRequest({ message: problem }))
      if (input.holderKey === undefined) return Effect.succeed({ format: format as CredentialFormat })
      if (format !== "sd-jwt") return Effect.fail(new BadRequest({ message: "holderKey is only used with credentialFormat sd-jwt" }))
      const holder = holderJwkOf(input.holderKey)
      if ("error" in holder) return Effect.fail(new BadRequest({ message: holder.error }))
      return Effect.succeed({ format: "sd-jwt", holderJwk: holder.jwk })
    }

    /**
     * The developer's open pair of lists, remembered per process: the issuing statement checks that
     * it is still open (another instance may have closed it, or the transaction that opened it rolled
     * back), and a stale guess costs one more read.
     */
    const openLists = new Map<string, { id: string; partnerId: string; size: number }>()
    const openListFor = (developerId: string, at: Date) =>
      Effect.gen(function*() {
        const known = openLists.get(developerId)
        if (known !== undefined) return known
        let list = yield* repo.openList(developerId)
        if (list === undefined) {
          yield* repo.openPair(developerId, `vcsl_${ulid(at.getTime())}`, `vcsl_${ulid(at.getTime())}`, LIST_SIZE, at)
          list = (yield* repo.openList(developerId))!
        }
        if (openLists.size >= 10_000) openLists.clear()
        openLists.set(developerId, list)
        return list
      })

    const subjectOf = (grant: GrantRecord): SubjectGrant => ({
      id: grant.id,
      agentDid: agentDid(grant.agentId),
      agentId: grant.agentId,
      principalId: grant.principalId,
      developerId: grant.developerId,
      scopes: grant.scopes,
      delegationDepth: grant.delegationDepth,
      expiresAt: grant.expiresAt
    })

    const issueOne = (grant: GrantRecord, format: "vc+jwt" | "dc+sd-jwt", holderJwk?: Record<string, string>, fidoVerifiedAt?: Date | null) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const at = new Date(ms)
        // An index drawn at random is taken with the probability the list is full (at most 90 %):
        // then another is drawn. No issuance order leaks through the indices.
        for (let attempt = 0; attempt < 40; attempt++) {
          const list = yield* openListFor(grant.developerId, at)
          const index = randomInt(list.size)
          const status = {
            revocationUrl: statusListUrl(config.publicBaseUrl, list.id),
            suspensionUrl: statusListUrl(config.publicBaseUrl, list.partnerId),
            index
          }
          const uuid = randomUUID()
          const common = { issuer: keys.did, baseUrl: config.publicBaseUrl, uuid, grant: subjectOf(grant), status, issuedAtMs: ms }
          let credential: string
          if (format === "vc+jwt") {
            credential = yield* keys.sign(vcJwtClaims({ ...common, fidoVerifiedAt }), { typ: "vc+jwt", cty: "vc" })
          } else {
            const { claims, disclosures } = sdJwtParts({ ...common, ...(holderJwk ? { holderJwk } : {}) })
            credential = `${yield* keys.sign(claims, { typ: "dc+sd-jwt" })}~${disclosures.join("~")}~`
          }
          const row = {
            id: `vc_${ulid(ms)}`,
            uuid,
            developerId: grant.developerId,
            grantId: grant.id,
            agentId: grant.agentId,
            principalId: grant.principalId,
            format,
            credential,
            kid: keys.current.kid,
            revocationListId: list.id,
            suspensionListId: list.partnerId,
            statusIdx: index,
            issuedAt: at,
            expiresAt: grant.expiresAt
          }
          const outcome = yield* repo.insertIssued(row, {
            id: `evt_${ulid(ms)}`,
            type: format === "vc+jwt" ? "vc.issued" : "sd-jwt.issued",
            data: { credentialId: row.id, grantId: grant.id, agentId: grant.agentId, format, expiresAt: grant.expiresAt.toISOString() },
            maxAttempts: config.webhooks.maxAttempts
          })
          // revoked meanwhile (the caller checked it active): nothing is issued, the caller's transaction fails
          if (outcome.grantActive !== true) return yield* Effect.fail(new GrantNoLongerActive({ grantId: grant.id }))
          if (outcome.listOpen !== true) {
            openLists.delete(grant.developerId)
            continue
          }
          if (outcome.inserted === null) continue
          if (outcome.deliveries > 0) nudgeDeliveryWorkers()
          const used = outcome.used ?? (yield* repo.countBlocking(list.id, randomInt(COUNTER_SHARDS)))
          // a shard's count is a cheap sign; the exact total is read only near the threshold
          if (used * COUNTER_SHARDS >= FULL_AT * list.size && (yield* repo.usedTotal(list.id)) >= FULL_AT * list.size) {
            yield* repo.closePair(list.id, list.partnerId)
            openLists.delete(grant.developerId)
          }
          // the issuance in the developer's chain (decisions part two: service.vc.*), in the same
          // transaction and last: the chain's head stays locked until the commit, and every issuance
          // for this developer waits on it, so nothing else runs while it is held
          yield* audit.append({
            developerId: grant.developerId,
            action: "service.vc.issued",
            agentId: grant.agentId,
            grantId: grant.id,
            principalId: grant.principalId,
            metadata: { credentialId: row.id, format, expiresAt: grant.expiresAt.toISOString() }
          })
          return { ...row, status: "active" as const, suspended: false, revokedAt: null }
        }
        return yield* Effect.dieMessage("could not place the credential in a status list")
      }).pipe(Effect.catchTag("SqlError", Effect.die))

    const issueFor: CredentialsService["issueFor"] = (grant, request) =>
      Effect.gen(function*() {
        if (request.format === "jwt") return {}
        if (request.format === "sd-jwt") return { sdJwtCredential: (yield* issueOne(grant, "dc+sd-jwt", request.holderJwk)).credential }
        return { verifiableCredential: (yield* issueOne(grant, "vc+jwt", undefined, request.fidoVerifiedAt)).credential }
      })

    const announce = (flipped: ReadonlyArray<Flipped>, purpose: "revocation" | "suspension", set: boolean) =>
      Effect.gen(function*() {
        if (flipped.length === 0) return
        lists.changed(flipped.map((f) => ({ listId: f.listId, partnerId: f.partnerId, version: f.version })))
        yield* events.emitMany(flipped.flatMap((f) =>
          f.credentialIds.map((credentialId, i) => ({
            developerId: f.developerId,
            type: "vc.revoked" as const,
            data: { credentialId, grantId: f.grantIds[i], statusPurpose: purpose, statusSet: set }
          }))
        ))
      })

    const revokeForGrants: CredentialsService["revokeForGrants"] = (_developerId, grantIds, at) =>
      grantIds.length === 0
        ? Effect.void
        : repo.revokeForGrants(grantIds, at).pipe(Effect.flatMap((f) => announce(f, "revocation", true)), Effect.orDie)

    const setAgentSuspended: CredentialsService["setAgentSuspended"] = (developerId, agentId, suspended, at) =>
      repo.setSuspended(developerId, agentId, suspended, at).pipe(Effect.flatMap((f) => announce(f, "suspension", suspended)), Effect.orDie)

    const find: CredentialsService["find"] = (developerId, id) =>
      repo.findCredential(developerId, id).pipe(
        Effect.orDie,
        Effect.flatMap((row) => row === undefined ? Effect.fail(new NotFound({ message: "Credential not found" })) : Effect.succeed(row))
      )

    return {
      parseRequest,
      issueFor,
      issueOne: (grant, format, holderJwk) => issueOne(grant, format, holderJwk),
      revokeForGrants,
      setAgentSuspended,
      find,
      list: (developerId, filters, after, limit) => repo.listCredentials(developerId, filters, after, limit).pipe(Effect.orDie),
      credentialByUuid: (uuid) => repo.credentialByUuid(uuid).pipe(Effect.orDie),
      lists,
      agentDid
    }
  })
)

export const CredentialsLive = CredentialsServiceLive.pipe(Layer.provideMerge(VcKeysLive))
