/**
 * Consent records made by the developer's POST (decisions §21): tied to an active grant of the
 * developer, bound to one notice version, and signed: the proof is an EdDSA JWS by the §18
 * credential key (the `kid` published in did.json), never `type: "none"`. The record, its covered
 * grant, its event and its audit entry commit together.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { VcKeys } from "../credentials/Keys.ts"
import { Grants } from "../grants/Service.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { BadRequest, GrantNotActive, InvalidGrant, NotFound } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { type CursorPosition, toPage } from "../platform/Pagination.ts"
import { nowMillis } from "../platform/Time.ts"
import { VaultKeys } from "../vault/Crypto.ts"
import { accessSummary } from "./AccessSummary.ts"
import { pseudonymOf } from "./Pseudonyms.ts"
import { VerifiableConsentRequired } from "./Errors.ts"
import type { NoticesService } from "./Notices.ts"
import { parseRecordBody, retentionUntil } from "./RecordInput.ts"
import { RECORD_SELECT, type RecordRow, recordView } from "./RecordView.ts"
import { writeRecord } from "./RecordWrite.ts"
import { retentionDays } from "./SettingsRead.ts"
import { validated } from "./Validate.ts"

/** at most this many records per grant (decisions §21) */
export const MAX_RECORDS_PER_GRANT = 1000
/** the page of the record lists (published default and maximum) */
export const RECORD_PAGE = 100

export interface RecordFilters {
  readonly dataPrincipalId?: string | undefined
  readonly grantId?: string | undefined
  readonly status?: "active" | "withdrawn" | "erased" | "expired" | undefined
}

export const makeRecords = (notices: NoticesService) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const audit = yield* AuditChain
    const events = yield* Events
    const keys = yield* VcKeys
    const grants = yield* Grants
    const ring = yield* VaultKeys

    const load = (developerId: string, recordId: string) =>
      sql.unsafe<RecordRow>(`${RECORD_SELECT} WHERE r.id = $1 AND r.developer_id = $2`, [recordId, developerId]).pipe(
        Effect.map((rows) => rows[0]),
        Effect.orDie
      )

    const create = (developerId: string, body: unknown) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const input = yield* validated(() => parseRecordBody(body, ms))
        if (input.principalType !== "adult" && input.guardianVerification === null) {
          return yield* Effect.fail(new VerifiableConsentRequired({
            message: `A ${input.principalType} principal needs guardianVerification { method, reference, verifiedAt } (DPDP Rules 10 and 11)`
          }))
        }
        const recordId = newId("crec", ms)
        const row = yield* sql.withTransaction(Effect.gen(function*() {
          // FOR SHARE: a revocation waits for this record, so a record never binds a grant revoked meanwhile
          const [grant] = yield* sql<{ id: string; principalId: string; scopes: ReadonlyArray<string>; status: string; expiresAt: Date }>`
            SELECT id, principal_id, scopes, status, expires_at FROM grants
            WHERE id = ${input.grantId} AND developer_id = ${developerId} FOR SHARE`
          if (grant === undefined) return yield* Effect.fail(new InvalidGrant({ message: "grantId is not one of your grants" }))
          if (grant.status !== "active" || grant.expiresAt.getTime() <= ms) {
            return yield* Effect.fail(new GrantNotActive({ message: "The grant is revoked or expired" }))
          }
          const notice = yield* notices.choose(developerId, {
            noticeId: input.consentNoticeId,
            version: input.consentNoticeVersion,
            language: input.language,
            contentHash: input.consentNoticeHash
          })
          const known = new Set(notice.purposes.map((p) => p.code))
          const unknown = input.purposes.filter((p) => !known.has(p.code)).map((p) => p.code)
          if (unknown.length > 0) {
            return yield* Effect.fail(new BadRequest({
              message: `purposes not in notice ${notice.noticeId} version ${notice.version}: ${unknown.join(", ")}`,
              details: [{ path: "purposes", message: `unknown codes: ${unknown.join(", ")}` }]
            }))
          }
          const count = (yield* sql<{ count: number }>`
            SELECT count(*)::int AS count FROM dpdp_consent_record_grants WHERE grant_id = ${grant.id}`)[0]!.count
          if (count >= MAX_RECORDS_PER_GRANT) {
            return yield* Effect.fail(new BadRequest({ message: `A grant may have at most ${MAX_RECORDS_PER_GRANT} consent records` }))
          }
          yield* writeRecord({ sql, keys, audit, events }, {
            recordId, developerId, grantId: grant.id, grantPrincipalId: grant.principalId, dataPrincipalId: input.dataPrincipalId,
            scopes: grant.scopes, notice, purposes: input.purposes, consentMethod: input.consentMethod,
            consentManagerRef: input.consentManagerRef, principalType: input.principalType,
            guardianVerification: input.guardianVerification, authRequestId: null, consentGivenAt: input.consentGivenAt,
            processingExpiresAt: input.processingExpiresAt, retentionUntil: retentionUntil(input.processingExpiresAt, yield* retentionDays(sql, developerId)),
            automatic: false, nowMs: ms
          })
          return (yield* load(developerId, recordId))!
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        return recordView(row, ms)
      })

    /** published: reading a record counts as an access */
    const get = (developerId: string, recordId: string) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const touched = yield* sql`UPDATE dpdp_consent_records SET access_count = access_count + 1, last_accessed_at = ${new Date(ms)}
                                   WHERE id = ${recordId} AND developer_id = ${developerId} RETURNING id`.pipe(Effect.orDie)
        const row = touched.length === 0 ? undefined : yield* load(developerId, recordId)
        if (row === undefined) return yield* Effect.fail(new NotFound({ message: "Consent record not found" }))
        return recordView(row, ms)
      })

    const page = (developerId: string, filters: RecordFilters, cursor: CursorPosition | undefined, limit: number, ms: number) =>
      Effect.gen(function*() {
        const params: Array<unknown> = [developerId]
        const where = ["r.developer_id = $1"]
        const add = (clause: (n: number) => string, value: unknown) => {
          params.push(value)
          where.push(clause(params.length))
        }
        if (filters.dataPrincipalId !== undefined) add((n) => `r.data_principal_id = $${n}`, filters.dataPrincipalId)
        if (filters.grantId !== undefined) {
          add((n) => `EXISTS (SELECT 1 FROM dpdp_consent_record_grants c WHERE c.record_id = r.id AND c.grant_id = $${n})`, filters.grantId)
        }
        if (filters.status === "expired") add((n) => `r.status = 'active' AND r.processing_expires_at <= $${n}`, new Date(ms))
        else if (filters.status === "active") add((n) => `r.status = 'active' AND r.processing_expires_at > $${n}`, new Date(ms))
        else if (filters.status !== undefined) add((n) => `r.status = $${n}`, filters.status)
        if (cursor !== undefined) {
          params.push(new Date(cursor.createdAt), cursor.id)
          where.push(`(r.created_at, r.id) < ($${params.length - 1}, $${params.length})`)
        }
        params.push(limit + 1)
        const rows = yield* sql.unsafe<RecordRow>(
          `${RECORD_SELECT} WHERE ${where.join(" AND ")} ORDER BY r.created_at DESC, r.id DESC LIMIT $${params.length}`,
          params as any
        ).pipe(Effect.orDie)
        return toPage(rows, limit)
      })

    const list = (developerId: string, filters: RecordFilters, cursor: CursorPosition | undefined, limit: number) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const { page: rows, nextCursor } = yield* page(developerId, filters, cursor, limit, ms)
        // published: totalRecords is the page's length
        return { records: rows.map((r) => recordView(r, ms)), totalRecords: rows.length, nextCursor }
      })

    /**
     * The data principal's records (published; unknown principal → empty list) and (ours) the summary of
     * what the service holds about them (AccessSummary.ts). Each call counts an access of the returned
     * records in one statement and appends `service.dpdp.records_accessed`.
     */
    const byPrincipal = (developerId: string, principalId: string, cursor: CursorPosition | undefined) =>
      sql.withTransaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        const { page: rows, nextCursor } = yield* page(developerId, { dataPrincipalId: principalId }, cursor, RECORD_PAGE, ms)
        const total = (yield* sql<{ total: number }>`
          SELECT count(*)::int AS total FROM dpdp_consent_records WHERE developer_id = ${developerId} AND data_principal_id = ${principalId}`)[0]!.total
        const at = new Date(ms)
        if (rows.length > 0) {
          yield* sql`UPDATE dpdp_consent_records SET access_count = access_count + 1, last_accessed_at = ${at}
                     WHERE id IN ${sql.in(rows.map((r) => r.id))}`
          yield* audit.append({ developerId, action: "service.dpdp.records_accessed", principalId, metadata: { recordCount: rows.length } })
        }
        const records = rows.map((r) => recordView({ ...r, accessCount: r.accessCount + 1, lastAccessedAt: at }, ms))
        const pseudonym = yield* pseudonymOf(sql, ring, developerId, principalId, ms)
        const summary = yield* accessSummary(developerId, principalId, at, grants.agentDid, pseudonym)
        return { dataPrincipalId: principalId, records, totalRecords: total, totalCount: total, nextCursor, summary }
      })).pipe(Effect.catchTag("SqlError", Effect.die))

    return { create, get, list, byPrincipal, load }
  })

export type RecordsService = Effect.Effect.Success<ReturnType<typeof makeRecords>>
