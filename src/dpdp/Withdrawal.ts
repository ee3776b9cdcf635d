/**
 * Withdrawal of consent (decisions §21) revokes through the one revocation path (Grants.revokeMany:
 * descendants, bundles, grant.revoked, credential status bits) in the same transaction as the
 * withdrawal. `revokeGrant` defaults to true; only an explicit false keeps the grants, and they are
 * then named in `grantsLeftActive`. The person revoking a grant on /permissions withdraws the records
 * covering it (`makePrincipalWithdrawal`, called inside the principal's revocation transaction).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Grants } from "../grants/Service.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { NotFound } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { nowMillis } from "../platform/Time.ts"
import { AlreadyWithdrawn } from "./Errors.ts"
import { parseWithdrawBody } from "./RecordInput.ts"
import { readSettings } from "./SettingsRead.ts"
import { validated } from "./Validate.ts"

/** The covered grants and their delegated descendants that are active now. */
const activeTrees = (sql: SqlClient.SqlClient, developerId: string, grantIds: ReadonlyArray<string>) =>
  sql<{ id: string }>`
    WITH RECURSIVE tree AS (
      SELECT id, status FROM grants WHERE id IN ${sql.in(grantIds)} AND developer_id = ${developerId}
      UNION ALL
      SELECT g.id, g.status FROM grants g JOIN tree t ON g.parent_grant_id = t.id
    )
    SELECT DISTINCT id FROM tree WHERE status = 'active' ORDER BY id`.pipe(Effect.map((rows) => rows.map((r) => r.id)))

/**
 * Erases the data processed under the grants (decisions §21, `deleteProcessedData`): the metadata of
 * their audit entries (salt deleted, digests kept, so the chain still verifies), the metadata of
 * their bundles' offline entries, budget transactions' descriptions and metadata.
 */
const eraseProcessedData = (sql: SqlClient.SqlClient, developerId: string, grantIds: ReadonlyArray<string>, at: Date) =>
  Effect.gen(function*() {
    const tree = yield* sql<{ id: string }>`
      WITH RECURSIVE tree AS (
        SELECT id FROM grants WHERE id IN ${sql.in(grantIds)} AND developer_id = ${developerId}
        UNION ALL
        SELECT g.id FROM grants g JOIN tree t ON g.parent_grant_id = t.id
      )
      SELECT DISTINCT id FROM tree`
    const ids = tree.map((t) => t.id)
    if (ids.length === 0) return
    yield* sql`UPDATE audit_log SET metadata = '{}'::jsonb, pii_salt = NULL, erased_at = ${at}
               WHERE developer_id = ${developerId} AND grant_id IN ${sql.in(ids)} AND erased_at IS NULL`
    yield* sql`UPDATE offline_audit_entries SET metadata = NULL WHERE developer_id = ${developerId}
               AND bundle_id IN (SELECT id FROM consent_bundles WHERE developer_id = ${developerId} AND grant_id IN ${sql.in(ids)})`
    yield* sql`UPDATE budget_transactions SET description = NULL, metadata = '{}'::jsonb WHERE grant_id IN ${sql.in(ids)}`
  })

export const makeWithdrawal = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const audit = yield* AuditChain
  const events = yield* Events
  const grants = yield* Grants

  const withdraw = (developerId: string, recordId: string, body: unknown) =>
    Effect.gen(function*() {
      const input = yield* validated(() => parseWithdrawBody(body))
      return yield* sql.withTransaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        const at = new Date(ms)
        const covered = (yield* sql<{ grantId: string }>`
          SELECT c.grant_id FROM dpdp_consent_record_grants c JOIN dpdp_consent_records r ON r.id = c.record_id
          WHERE c.record_id = ${recordId} AND r.developer_id = ${developerId} ORDER BY c.grant_id`).map((r) => r.grantId)
        if (covered.length > 0) {
          // Locks in the revocation path's order (bundles, then grants) before the record: a person revoking
          // the same grant (grants, then the records covering it) then waits here instead of deadlocking.
          yield* sql`SELECT id FROM consent_bundles WHERE grant_id IN ${sql.in(covered)} ORDER BY id FOR UPDATE`
          yield* sql`SELECT id FROM grants WHERE id IN ${sql.in(covered)} ORDER BY id FOR UPDATE`
        }
        const [record] = yield* sql<{ status: string; grantId: string; dataPrincipalId: string }>`
          SELECT status, grant_id, data_principal_id FROM dpdp_consent_records
          WHERE id = ${recordId} AND developer_id = ${developerId} FOR UPDATE`
        if (record === undefined) return yield* Effect.fail(new NotFound({ message: "Consent record not found" }))
        if (record.status !== "active") {
          return yield* Effect.fail(new AlreadyWithdrawn({ message: `The consent record is already ${record.status}` }))
        }
        // published default false; ours true: only an explicit false keeps the grants, unless the
        // developer's strictWithdrawal setting is on
        const revoke = input.revokeGrant !== false || (yield* readSettings(sql, developerId)).strictWithdrawal
        const active = yield* activeTrees(sql, developerId, covered)
        let revokedGrantIds: ReadonlyArray<string> = []
        let grantsLeftActive: ReadonlyArray<string> = []
        if (revoke) {
          const before = new Set(active)
          // the one revocation path, in this transaction (a savepoint): the record and its grants go together; root first
          revokedGrantIds = (yield* grants.revokeMany(developerId, covered)).filter((id) => before.has(id))
        } else {
          grantsLeftActive = covered.filter((id) => active.includes(id))
        }
        // deleteProcessedData: what was processed under the covered grants (and their delegated descendants) is
        // erased inline, by the erasure mechanism scoped to those grants; principal ids are kept
        if (input.deleteProcessedData && covered.length > 0) yield* eraseProcessedData(sql, developerId, covered, at)
        const dataDeletion = input.deleteProcessedData ? "completed" as const : null
        yield* sql`UPDATE dpdp_consent_records SET status = 'withdrawn', withdrawn_at = ${at}, withdrawn_reason = ${input.reason},
                     withdrawn_by = 'developer', grant_revoked = ${revoke}, data_deletion = ${dataDeletion}
                   WHERE id = ${recordId}`
        const result = {
          recordId,
          status: "withdrawn" as const,
          withdrawnAt: at.toISOString(),
          grantRevoked: revoke,
          dataDeleted: input.deleteProcessedData,
          revokedGrantIds: [...revokedGrantIds],
          grantsLeftActive: [...grantsLeftActive],
          dataDeletion
        }
        // the reason is free text: it stays out of the event and the chain
        yield* events.emit(developerId, "dpdp.consent.withdrawn", {
          recordId, grantRevoked: revoke, dataDeleted: input.deleteProcessedData, revokedGrantIds: result.revokedGrantIds,
          grantsLeftActive: result.grantsLeftActive, withdrawnBy: "developer"
        })
        yield* audit.append({
          developerId,
          action: "service.dpdp.consent_withdrawn",
          grantId: record.grantId,
          principalId: record.dataPrincipalId,
          metadata: { recordId, withdrawnBy: "developer", grantRevoked: revoke, revokedGrantIds: result.revokedGrantIds, grantsLeftActive: result.grantsLeftActive, dataDeletion }
        })
        return result
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

  return { withdraw }
})

/**
 * For the principal's revocation (DELETE /v1/principal/grants/:id and the /permissions page): in the
 * caller's transaction, after the grants were revoked, the active records covering any of them are
 * withdrawn (`withdrawnBy: "principal"`). Other revocations leave records active.
 */
export const makePrincipalWithdrawal = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const audit = yield* AuditChain
  const events = yield* Events
  return (developerId: string, revokedGrantIds: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      if (revokedGrantIds.length === 0) return [] as ReadonlyArray<string>
      const at = new Date(yield* nowMillis)
      const records = yield* sql<{ id: string; grantId: string; dataPrincipalId: string }>`
        UPDATE dpdp_consent_records r SET status = 'withdrawn', withdrawn_at = ${at}, withdrawn_by = 'principal', grant_revoked = true
        WHERE r.developer_id = ${developerId} AND r.status = 'active'
          AND r.id IN (SELECT c.record_id FROM dpdp_consent_record_grants c WHERE c.grant_id IN ${sql.in(revokedGrantIds)})
        RETURNING r.id, r.grant_id, r.data_principal_id`
      for (const record of [...records].sort((a, b) => a.id.localeCompare(b.id))) {
        yield* events.emit(developerId, "dpdp.consent.withdrawn", {
          recordId: record.id, grantRevoked: true, dataDeleted: false, revokedGrantIds: [...revokedGrantIds], grantsLeftActive: [], withdrawnBy: "principal"
        })
        yield* audit.append({
          developerId,
          action: "service.dpdp.consent_withdrawn",
          grantId: record.grantId,
          principalId: record.dataPrincipalId,
          metadata: { recordId: record.id, withdrawnBy: "principal", grantRevoked: true, revokedGrantIds: [...revokedGrantIds], grantsLeftActive: [] }
        })
      }
      return records.map((r) => r.id)
    }).pipe(Effect.orDie)
})
