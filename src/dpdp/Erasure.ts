/**
 * Erasure of a data principal (decisions §21): `POST /v1/dpdp/data-principals/:id/erasure` runs it
 * in the request's transaction (ErasureRun.ts) and answers 201 in the published shape plus
 * `heldUntil`, `pseudonym` and `counts`; a repeat, found by the pseudonym, answers 200 with the same
 * `requestId`. 404 only when nothing is held for that id. `scheduledFor` (48 hours to 3 years ahead,
 * Rule 8(2)) stores it as `scheduled` (event `dpdp.erasure.scheduled` at once, `dpdp.erasure.due` 48
 * hours before), run by the DPDP fiber at that time (ErasureWorker.ts); `DELETE
 * /v1/dpdp/erasures/:requestId` cancels it.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Grants } from "../grants/Service.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { BadRequest, NotFound } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { ulid } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { VaultKeys } from "../vault/Crypto.ts"
import { runErasure } from "./ErasureRun.ts"
import { pseudonymOf } from "./Pseudonyms.ts"
import { readSettings } from "./SettingsRead.ts"
import { fail, isObject, isoTime, text, validated } from "./Validate.ts"

const HOUR_MS = 3_600_000
const DAY_MS = 24 * HOUR_MS
/** Rule 8(2): the person is told at least 48 hours before */
export const ERASURE_NOTICE_MS = 48 * HOUR_MS
const MAX_SCHEDULE_MS = 3 * 366 * DAY_MS
const REASONS = ["principal_request", "retention", "withdrawal", "other"] as const

interface ErasureRow {
  readonly id: string
  readonly developerId: string
  readonly pseudonym: string
  readonly status: "scheduled" | "processing" | "completed" | "cancelled"
  readonly scheduledFor: Date | null
  readonly submittedAt: Date
  readonly expectedCompletionBy: Date
  readonly completedAt: Date | null
  readonly heldUntil: Date | null
  readonly counts: Record<string, any>
  readonly pendingPrincipalId: string | null
}

const COLUMNS = `id, developer_id, pseudonym, status, scheduled_for, submitted_at, expected_completion_by, completed_at, held_until,
  counts, pending_principal_id`

export const erasureView = (row: ErasureRow, dataPrincipalId: string) => ({
  requestId: row.id,
  dataPrincipalId,
  status: row.status,
  recordsErased: row.counts.recordsErased ?? 0,
  grantsRevoked: row.counts.grantsRevoked ?? 0,
  submittedAt: row.submittedAt.toISOString(),
  expectedCompletionBy: row.expectedCompletionBy.toISOString(),
  scheduledFor: row.scheduledFor?.toISOString() ?? null,
  completedAt: row.completedAt?.toISOString() ?? null,
  heldUntil: row.heldUntil?.toISOString() ?? null,
  pseudonym: row.pseudonym,
  counts: row.counts
})

const parseBody = (raw: unknown, principalId: string, nowMs: number) => {
  if (raw === undefined || raw === null || raw === "") return { reason: null, scheduledFor: null }
  if (!isObject(raw)) return fail("", "The body must be a JSON object")
  const given = text(raw, "dataPrincipalId", 256, false)
  if (given !== undefined && given !== principalId) fail("dataPrincipalId", "dataPrincipalId must equal the path's id")
  const reason = raw.reason === undefined || raw.reason === null ? null : raw.reason
  if (reason !== null && !(REASONS as ReadonlyArray<unknown>).includes(reason)) fail("reason", `reason must be one of ${REASONS.join(", ")}`)
  const scheduledFor = isoTime(raw, "scheduledFor", false) ?? null
  if (scheduledFor !== null) {
    if (scheduledFor.getTime() < nowMs + ERASURE_NOTICE_MS) fail("scheduledFor", "scheduledFor must be at least 48 hours ahead (DPDP Rule 8(2))")
    if (scheduledFor.getTime() > nowMs + MAX_SCHEDULE_MS) fail("scheduledFor", "scheduledFor may be at most 3 years ahead")
  }
  return { reason: reason as string | null, scheduledFor }
}

export const makeErasure = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const grants = yield* Grants
  const ring = yield* VaultKeys
  const events = yield* Events
  const audit = yield* AuditChain

  const load = (developerId: string, id: string) =>
    sql.unsafe<ErasureRow>(`SELECT ${COLUMNS} FROM dpdp_erasures WHERE id = $1 AND developer_id = $2`, [id, developerId]).pipe(
      Effect.map((rows) => rows[0])
    )

  /** anything held for the id (404 otherwise) */
  const holdsAnything = (developerId: string, pid: string) =>
    sql<{ any: boolean }>`SELECT
        EXISTS (SELECT 1 FROM grants WHERE developer_id = ${developerId} AND principal_id = ${pid})
        OR EXISTS (SELECT 1 FROM auth_requests WHERE developer_id = ${developerId} AND principal_id = ${pid})
        OR EXISTS (SELECT 1 FROM dpdp_consent_records WHERE developer_id = ${developerId} AND (data_principal_id = ${pid} OR grant_principal_id = ${pid}))
        OR EXISTS (SELECT 1 FROM dpdp_grievances WHERE developer_id = ${developerId} AND data_principal_id = ${pid})
        OR EXISTS (SELECT 1 FROM dpdp_nominations WHERE developer_id = ${developerId} AND (data_principal_id = ${pid} OR nominee_principal_id = ${pid}))
        OR EXISTS (SELECT 1 FROM vault_credentials WHERE developer_id = ${developerId} AND principal_id = ${pid})
        OR EXISTS (SELECT 1 FROM webauthn_credentials WHERE developer_id = ${developerId} AND principal_id = ${pid})
        OR EXISTS (SELECT 1 FROM principal_sessions WHERE developer_id = ${developerId} AND principal_id = ${pid})
        OR EXISTS (SELECT 1 FROM scim_users WHERE developer_id = ${developerId} AND principal_id = ${pid})
        OR EXISTS (SELECT 1 FROM audit_log WHERE developer_id = ${developerId} AND principal_id = ${pid}) AS any`.pipe(
      Effect.map((rows) => rows[0]?.any === true)
    )

  /** runs an erasure whose row exists (status processing), in the caller's transaction; marks it completed */
  const execute = (row: { id: string; developerId: string; pseudonym: string }, pid: string, ms: number) =>
    Effect.gen(function*() {
      const settings = yield* readSettings(sql, row.developerId)
      const result = yield* runErasure({ sql, grants, ring }, {
        developerId: row.developerId, principalId: pid, pseudonym: row.pseudonym, requestId: row.id, holdDays: settings.erasureLogHoldDays, ms
      })
      const counts = { ...result.counts }
      yield* sql`UPDATE dpdp_erasures SET status = 'completed', completed_at = ${new Date(ms)}, held_until = ${result.heldUntil},
                   counts = ${JSON.stringify(counts)}::jsonb, pending_principal_id = NULL WHERE id = ${row.id}`
      const heldUntil = result.heldUntil?.toISOString() ?? null
      // the payload names the pseudonym: stored events keep no raw id of an erased principal
      yield* events.emit(row.developerId, "dpdp.erasure.completed", {
        requestId: row.id, dataPrincipalId: row.pseudonym, recordsErased: counts.recordsErased, grantsRevoked: counts.grantsRevoked,
        status: "completed", heldUntil
      })
      yield* audit.append({
        developerId: row.developerId,
        action: "service.dpdp.erasure_completed",
        principalId: row.pseudonym,
        metadata: {
          requestId: row.id, recordsErased: counts.recordsErased, grantsRevoked: counts.grantsRevoked, auditEntries: counts.auditEntries,
          heldUntil, legacyRedactions: counts.legacyRedactions, legacyRedactionDigest: result.legacyRedactionDigest
        }
      })
    })

  const request = (developerId: string, principalId: string, body: unknown) =>
    Effect.gen(function*() {
      if (principalId.length === 0 || principalId.length > 256) {
        return yield* Effect.fail(new BadRequest({ message: "The principal id must be 1 to 256 characters" }))
      }
      const ms = yield* nowMillis
      const input = yield* validated(() => parseBody(body, principalId, ms))
      return yield* sql.withTransaction(Effect.gen(function*() {
        const pseudonym = yield* pseudonymOf(sql, ring, developerId, principalId, ms)
        const found = yield* sql.unsafe<ErasureRow>(
          `SELECT ${COLUMNS} FROM dpdp_erasures WHERE developer_id = $1 AND pseudonym = $2 AND status <> 'cancelled'`, [developerId, pseudonym])
        if (found[0] !== undefined) return { status: 200 as const, body: erasureView(found[0], principalId) }
        if (!(yield* holdsAnything(developerId, principalId))) {
          return yield* Effect.fail(new NotFound({ message: "Nothing is held for that data principal" }))
        }
        const at = new Date(ms)
        const requestId = `ER-${at.getUTCFullYear()}-${ulid(ms)}`
        const scheduled = input.scheduledFor !== null
        const inserted = yield* sql`
          INSERT INTO dpdp_erasures (id, developer_id, pseudonym, reason, status, scheduled_for, submitted_at, expected_completion_by,
            pending_principal_id)
          VALUES (${requestId}, ${developerId}, ${pseudonym}, ${input.reason}, ${scheduled ? "scheduled" : "processing"},
            ${input.scheduledFor}, ${at}, ${new Date((input.scheduledFor?.getTime() ?? ms) + 7 * DAY_MS)}, ${scheduled ? principalId : null})
          ON CONFLICT (developer_id, pseudonym) WHERE status <> 'cancelled' DO NOTHING RETURNING id`
        if (inserted.length === 0) {
          // a concurrent request made it first: the same answer as a repeat
          const [row] = yield* sql.unsafe<ErasureRow>(
            `SELECT ${COLUMNS} FROM dpdp_erasures WHERE developer_id = $1 AND pseudonym = $2 AND status <> 'cancelled'`, [developerId, pseudonym])
          return { status: 200 as const, body: erasureView(row!, principalId) }
        }
        if (scheduled) {
          const data = { requestId, pseudonym, scheduledFor: input.scheduledFor!.toISOString() }
          yield* events.emit(developerId, "dpdp.erasure.scheduled", data)
          yield* audit.append({ developerId, action: "service.dpdp.erasure_scheduled", principalId: pseudonym, metadata: data })
        } else {
          yield* execute({ id: requestId, developerId, pseudonym }, principalId, ms)
        }
        return { status: 201 as const, body: erasureView((yield* load(developerId, requestId))!, principalId) }
      }))
    }).pipe(Effect.catchTag("SqlError", Effect.die))

  const cancel = (developerId: string, requestId: string) =>
    sql.withTransaction(Effect.gen(function*() {
      const rows = yield* sql`UPDATE dpdp_erasures SET status = 'cancelled', pending_principal_id = NULL
                              WHERE id = ${requestId} AND developer_id = ${developerId} AND status = 'scheduled' RETURNING id`
      if (rows.length === 0) return yield* Effect.fail(new NotFound({ message: "No scheduled erasure with that requestId" }))
      yield* audit.append({ developerId, action: "service.dpdp.erasure_cancelled", metadata: { requestId } })
    })).pipe(Effect.catchTag("SqlError", Effect.die))

  /**
   * The DPDP fiber's pass over scheduled erasures: `dpdp.erasure.due` once, 48 hours before; at the
   * time, the erasure itself. Each claimed FOR UPDATE SKIP LOCKED, so instances share the work.
   */
  const runDue = Effect.gen(function*() {
    const ms = yield* nowMillis
    const now = new Date(ms)
    let notified = 0
    let ran = 0
    for (;;) {
      const did = yield* sql.withTransaction(Effect.gen(function*() {
        const [row] = yield* sql.unsafe<ErasureRow>(
          `SELECT ${COLUMNS} FROM dpdp_erasures WHERE status = 'scheduled'
             AND (scheduled_for <= $1 OR (due_notified_at IS NULL AND scheduled_for <= $2))
           ORDER BY scheduled_for, id LIMIT 1 FOR UPDATE SKIP LOCKED`, [now, new Date(ms + ERASURE_NOTICE_MS)])
        if (row === undefined) return false
        if (row.scheduledFor!.getTime() <= ms) {
          yield* sql`UPDATE dpdp_erasures SET status = 'processing', due_notified_at = coalesce(due_notified_at, ${now}) WHERE id = ${row.id}`
          yield* execute(row, row.pendingPrincipalId!, ms)
          ran++
        } else {
          yield* sql`UPDATE dpdp_erasures SET due_notified_at = ${now} WHERE id = ${row.id}`
          const data = { requestId: row.id, pseudonym: row.pseudonym, scheduledFor: row.scheduledFor!.toISOString() }
          yield* events.emit(row.developerId, "dpdp.erasure.due", data)
          notified++
        }
        return true
      }))
      if (!did) return { notified, ran }
    }
  }).pipe(Effect.orDie)

  return { request, cancel, runDue, load }
})

export type ErasureService = Effect.Effect.Success<typeof makeErasure>
