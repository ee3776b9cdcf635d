/**
 * Grievances (decisions §21): filed → 202 with a `GRV-<UTC year>-<ULID>` reference, a response
 * target (7 days) and the 90-day statutory outer limit; moved by PATCH through
 * submitted → under_review → resolved, or escalated (to the Board) from any open state or from
 * resolved. Each change commits with its history row, its event and its audit entry; events and the
 * chain carry ids and statuses, never the description, evidence or resolution.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { AuditChain } from "../platform/AuditChain.ts"
import { InvalidTransition, NotFound } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { newId, ulid } from "../platform/Ids.ts"
import { type CursorPosition, toPage } from "../platform/Pagination.ts"
import { readSettings } from "./SettingsRead.ts"
import { nowMillis } from "../platform/Time.ts"
import { InvalidRecord, TooManyOpenGrievances } from "./Errors.ts"
import { fail, objectBody, pattern, text, validated } from "./Validate.ts"

const DAY_MS = 86_400_000
/** grievanceResponseDays' default (the published suite asserts 7); the developer's setting applies */
export const RESPONSE_DAYS = 7
/** the outer limit of DPDP Rule 14: never later than 90 days after filing */
export const STATUTORY_DAYS = 90
export const MAX_OPEN_PER_PRINCIPAL = 100
export const OPEN_STATUSES = ["submitted", "under_review"] as const
const TYPE = /^[a-z0-9][a-z0-9_-]{0,63}$/
const OUTCOMES = ["upheld", "partially_upheld", "rejected"] as const
type Status = "submitted" | "under_review" | "resolved" | "escalated"

/** allowed moves: the next status → the statuses it may come from */
const FROM: Record<Exclude<Status, "submitted">, ReadonlyArray<Status>> = {
  under_review: ["submitted"],
  resolved: ["under_review"],
  escalated: ["submitted", "under_review", "resolved"]
}

const parseFiling = (raw: unknown) => {
  const body = objectBody(raw)
  const evidence = body.evidence ?? null
  if (evidence !== null && Buffer.byteLength(JSON.stringify(evidence), "utf8") > 16_384) fail("evidence", "evidence may be at most 16 KiB")
  return {
    dataPrincipalId: text(body, "dataPrincipalId", 256, true)!,
    type: pattern(body, "type", TYPE, true, "1 to 64 of a-z 0-9 _ - starting with a letter or digit")!,
    description: text(body, "description", 5000, true)!,
    recordId: text(body, "recordId", 100, false),
    evidence
  }
}

const parseUpdate = (raw: unknown) => {
  const body = objectBody(raw)
  for (const key of Object.keys(body)) if (!["status", "resolution", "outcome", "note"].includes(key)) fail(key, `Unknown field ${key}`)
  const status = body.status
  if (status !== "under_review" && status !== "resolved" && status !== "escalated") {
    return fail("status", "status must be under_review, resolved or escalated")
  }
  const outcome = body.outcome ?? undefined
  if (outcome !== undefined && !(OUTCOMES as ReadonlyArray<unknown>).includes(outcome)) fail("outcome", `outcome must be one of ${OUTCOMES.join(", ")}`)
  const resolution = text(body, "resolution", 5000, false)
  if (status === "resolved" && (resolution === undefined || outcome === undefined)) {
    fail(resolution === undefined ? "resolution" : "outcome", "Resolving a grievance needs resolution and outcome")
  }
  return { status: status as Exclude<Status, "submitted">, resolution, outcome: outcome as typeof OUTCOMES[number] | undefined, note: text(body, "note", 1000, false) }
}

interface GrievanceRow {
  readonly id: string
  readonly referenceNumber: string
  readonly dataPrincipalId: string
  readonly recordId: string | null
  readonly type: string
  readonly description: string
  readonly evidence: unknown
  readonly status: Status
  readonly outcome: string | null
  readonly resolution: string | null
  readonly expectedResolutionBy: Date
  readonly statutoryDueAt: Date
  readonly resolvedAt: Date | null
  readonly updatedAt: Date | null
  readonly createdAt: Date
}

const COLUMNS = `id, reference_number, data_principal_id, record_id, type, description, evidence, status, outcome, resolution,
  expected_resolution_by, statutory_due_at, resolved_at, updated_at, created_at`

const view = (g: GrievanceRow, history?: ReadonlyArray<{ status: string; at: Date }>) => ({
  grievanceId: g.id,
  referenceNumber: g.referenceNumber,
  dataPrincipalId: g.dataPrincipalId,
  recordId: g.recordId,
  type: g.type,
  description: g.description,
  evidence: g.evidence,
  status: g.status,
  outcome: g.outcome,
  resolution: g.resolution,
  expectedResolutionBy: g.expectedResolutionBy.toISOString(),
  statutoryDueAt: g.statutoryDueAt.toISOString(),
  resolvedAt: g.resolvedAt?.toISOString() ?? null,
  updatedAt: g.updatedAt?.toISOString() ?? null,
  createdAt: g.createdAt.toISOString(),
  ...(history !== undefined ? { history: history.map((h) => ({ status: h.status, at: h.at.toISOString() })) } : {})
})

export interface GrievanceFilters {
  readonly status?: Status | undefined
  readonly dataPrincipalId?: string | undefined
  readonly overdue?: boolean | undefined
}

export const makeGrievances = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const audit = yield* AuditChain
  const events = yield* Events
  const notFound = () => new NotFound({ message: "Grievance not found" })

  const load = (developerId: string, id: string, lock = false) =>
    sql.unsafe<GrievanceRow>(`SELECT ${COLUMNS} FROM dpdp_grievances WHERE id = $1 AND developer_id = $2${lock ? " FOR UPDATE" : ""}`, [id, developerId])
      .pipe(Effect.map((rows) => rows[0]))
  const history = (id: string) => sql<{ status: string; at: Date }>`SELECT status, at FROM dpdp_grievance_history WHERE grievance_id = ${id} ORDER BY seq`

  const file = (developerId: string, body: unknown) =>
    Effect.gen(function*() {
      const input = yield* validated(() => parseFiling(body))
      return yield* sql.withTransaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        if (input.recordId !== undefined) {
          // another developer's record, another principal's and an unknown id are answered alike
          const [record] = yield* sql`SELECT id FROM dpdp_consent_records WHERE id = ${input.recordId} AND developer_id = ${developerId}
                                        AND (data_principal_id = ${input.dataPrincipalId} OR grant_principal_id = ${input.dataPrincipalId})`
          if (record === undefined) return yield* Effect.fail(new InvalidRecord({ message: "recordId is not a consent record of this data principal" }))
        }
        // filings for one principal take turns, so the cap on open grievances holds under concurrency
        yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`dpdp-grievances:${developerId}:${input.dataPrincipalId}`}))`
        const open = (yield* sql<{ open: number }>`
          SELECT count(*)::int AS open FROM dpdp_grievances WHERE developer_id = ${developerId}
            AND data_principal_id = ${input.dataPrincipalId} AND status IN ('submitted', 'under_review')`)[0]!.open
        if (open >= MAX_OPEN_PER_PRINCIPAL) {
          return yield* Effect.fail(new TooManyOpenGrievances({ message: `This data principal already has ${MAX_OPEN_PER_PRINCIPAL} open grievances` }))
        }
        const at = new Date(ms)
        const id = newId("grv", ms)
        const referenceNumber = `GRV-${at.getUTCFullYear()}-${ulid(ms)}`
        const expected = new Date(ms + (yield* readSettings(sql, developerId)).grievanceResponseDays * DAY_MS)
        const statutory = new Date(ms + STATUTORY_DAYS * DAY_MS)
        yield* sql`INSERT INTO dpdp_grievances (id, developer_id, reference_number, data_principal_id, record_id, type, description, evidence,
                     status, expected_resolution_by, statutory_due_at, created_at)
                   VALUES (${id}, ${developerId}, ${referenceNumber}, ${input.dataPrincipalId}, ${input.recordId ?? null}, ${input.type},
                     ${input.description}, ${input.evidence === null ? null : JSON.stringify(input.evidence)}::jsonb, 'submitted', ${expected}, ${statutory}, ${at})`
        yield* sql`INSERT INTO dpdp_grievance_history (grievance_id, seq, status, at) VALUES (${id}, 1, 'submitted', ${at})`
        yield* events.emit(developerId, "dpdp.grievance.filed", { grievanceId: id, referenceNumber, type: input.type, dataPrincipalId: input.dataPrincipalId })
        yield* audit.append({
          developerId,
          action: "service.dpdp.grievance_filed",
          principalId: input.dataPrincipalId,
          metadata: { grievanceId: id, referenceNumber, type: input.type, recordId: input.recordId ?? null, expectedResolutionBy: expected.toISOString(), statutoryDueAt: statutory.toISOString() }
        })
        return {
          grievanceId: id, referenceNumber, type: input.type, status: "submitted" as const,
          expectedResolutionBy: expected.toISOString(), statutoryDueAt: statutory.toISOString(), createdAt: at.toISOString()
        }
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

  const get = (developerId: string, id: string) =>
    Effect.gen(function*() {
      const row = yield* load(developerId, id)
      if (row === undefined) return yield* Effect.fail(notFound())
      return view(row, yield* history(id))
    }).pipe(Effect.catchTag("SqlError", Effect.die))

  const update = (developerId: string, id: string, body: unknown) =>
    Effect.gen(function*() {
      const parsed = yield* Effect.either(validated(() => parseUpdate(body)))
      return yield* sql.withTransaction(Effect.gen(function*() {
        const row = yield* load(developerId, id, true)
        if (row === undefined) return yield* Effect.fail(notFound())
        if (parsed._tag === "Left") return yield* Effect.fail(parsed.left)
        const input = parsed.right
        if (!FROM[input.status].includes(row.status)) {
          return yield* Effect.fail(new InvalidTransition({ message: `Cannot move a grievance from ${row.status} to ${input.status}` }))
        }
        const at = new Date(yield* nowMillis)
        yield* sql`UPDATE dpdp_grievances SET status = ${input.status}, updated_at = ${at},
                     resolution = COALESCE(${input.resolution ?? null}, resolution), outcome = COALESCE(${input.outcome ?? null}, outcome),
                     resolved_at = CASE WHEN ${input.status} = 'resolved' THEN ${at} ELSE resolved_at END
                   WHERE id = ${id}`
        yield* sql`INSERT INTO dpdp_grievance_history (grievance_id, seq, status, note, at)
                   SELECT ${id}, COALESCE(max(seq), 0) + 1, ${input.status}, ${input.note ?? null}, ${at} FROM dpdp_grievance_history WHERE grievance_id = ${id}`
        yield* events.emit(developerId, "dpdp.grievance.updated", { grievanceId: id, status: input.status, previousStatus: row.status })
        yield* audit.append({
          developerId,
          action: "service.dpdp.grievance_updated",
          principalId: row.dataPrincipalId,
          metadata: { grievanceId: id, fromStatus: row.status, toStatus: input.status, outcome: input.outcome ?? null }
        })
        return view((yield* load(developerId, id))!, yield* history(id))
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

  const list = (developerId: string, filters: GrievanceFilters, cursor: CursorPosition | undefined, limit: number) =>
    Effect.gen(function*() {
      const ms = yield* nowMillis
      const params: Array<unknown> = [developerId]
      const where = ["developer_id = $1"]
      if (filters.status !== undefined) {
        params.push(filters.status)
        where.push(`status = $${params.length}`)
      }
      if (filters.dataPrincipalId !== undefined) {
        params.push(filters.dataPrincipalId)
        where.push(`data_principal_id = $${params.length}`)
      }
      if (filters.overdue !== undefined) {
        params.push(new Date(ms))
        const overdue = `(status IN ('submitted', 'under_review') AND statutory_due_at < $${params.length})`
        where.push(filters.overdue ? overdue : `NOT ${overdue}`)
      }
      if (cursor !== undefined) {
        params.push(new Date(cursor.createdAt), cursor.id)
        where.push(`(created_at, id) < ($${params.length - 1}, $${params.length})`)
      }
      params.push(limit + 1)
      const rows = yield* sql.unsafe<GrievanceRow>(
        `SELECT ${COLUMNS} FROM dpdp_grievances WHERE ${where.join(" AND ")} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
        params as any
      ).pipe(Effect.orDie)
      const { page, nextCursor } = toPage(rows, limit)
      return { grievances: page.map((g) => view(g)), nextCursor }
    })

  return { file, get, update, list }
})

export type GrievancesService = Effect.Effect.Success<typeof makeGrievances>
