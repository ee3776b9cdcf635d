/**
 * The DPDP breach register (interface: Breach; decisions §8). Each change commits in one
 * transaction with its audit-chain entry (and, on record, its events). Events and audit metadata
 * carry ids, statuses and times only: never principal ids or breach text.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { AuditChain } from "../platform/AuditChain.ts"
import { BadRequest, BreachClosed, InvalidTransition, NotFound, ReportIncomplete } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { decodeCursor, encodeCursor } from "../platform/Pagination.ts"
import { nowMillis } from "../platform/Time.ts"
import { CONTENT_ITEMS, Invalid, parseIntimation, parseRecord, parseUpdate, REPORT_KEYS, type ReportKey } from "./Validate.ts"

export const BOARD_REPORT_HOURS = 72

export interface BreachRow {
  readonly id: string
  readonly developerId: string
  readonly status: "open" | "initial_intimated" | "reported" | "closed"
  readonly description: string
  readonly nature: string
  readonly extent: string
  readonly occurredAt: Date | null
  readonly awareAt: Date
  readonly location: string | null
  readonly likelyImpact: string | null
  readonly affectedCount: number
  readonly affectedPrincipalIds: ReadonlyArray<string>
  readonly idsGiven: boolean
  readonly mitigation: string | null
  readonly detailedReport: Record<ReportKey, string | null>
  readonly boardInitialIntimationSentAt: Date | null
  readonly boardDetailedReportSentAt: Date | null
  readonly extension: { requestedAt: string; granted: boolean | null; newDueAt: string | null } | null
  readonly createdAt: Date
  readonly updatedAt: Date | null
  readonly closedAt: Date | null
  /** joined: distinct principals intimated, listed ids not yet intimated, last intimation */
  readonly intimatedCount: number
  readonly pendingIds: number
  readonly lastIntimatedAt: Date | null
}

/**
 * The counts are stored on the row and kept in the transaction of each intimation (decisions §19),
 * so a list costs the same whatever the size of the breaches it returns; it also leaves out the
 * listed ids (up to 10,000 per breach), which only a single breach shows.
 */
export const breachSelect = (options: { ids: boolean }) => `
  SELECT b.id, b.developer_id, b.status, b.description, b.nature, b.extent, b.occurred_at, b.aware_at, b.location,
         b.likely_impact, b.affected_count, ${options.ids ? "b.affected_principal_ids" : "'{}'::text[] AS affected_principal_ids"},
         b.ids_given, b.mitigation, b.detailed_report,
         b.board_initial_intimation_sent_at, b.board_detailed_report_sent_at, b.extension, b.created_at, b.updated_at, b.closed_at,
         b.intimated_count, b.pending_count AS pending_ids, b.last_intimated_at
  FROM breaches b`

/** awareAt + 72 h, or the granted extension's newDueAt */
export const dueAt = (b: { awareAt: Date; extension: BreachRow["extension"] }): Date =>
  b.extension?.granted === true && b.extension.newDueAt
    ? new Date(b.extension.newDueAt)
    : new Date(b.awareAt.getTime() + BOARD_REPORT_HOURS * 3600 * 1000)

const iso = (d: Date | null) => d?.toISOString() ?? null

export const breachView = (b: BreachRow, nowMs: number, options: { ids: boolean }) => {
  const due = dueAt(b)
  const sent = b.boardDetailedReportSentAt
  return {
    breachId: b.id,
    status: b.status,
    description: b.description,
    nature: b.nature,
    extent: b.extent,
    occurredAt: iso(b.occurredAt),
    awareAt: b.awareAt.toISOString(),
    location: b.location,
    likelyImpact: b.likelyImpact,
    affectedCount: b.affectedCount,
    ...(options.ids ? { affectedDataPrincipalIds: [...b.affectedPrincipalIds] } : {}),
    mitigation: b.mitigation,
    detailedReport: Object.fromEntries(REPORT_KEYS.map((k) => [k, b.detailedReport[k] ?? null])) as Record<ReportKey, string | null>,
    boardInitialIntimationRequired: true,
    boardInitialIntimationSentAt: iso(b.boardInitialIntimationSentAt),
    boardDetailedReportDueAt: due.toISOString(),
    boardDetailedReportSentAt: iso(sent),
    boardDetailedReportOverdue: sent === null && nowMs > due.getTime(),
    boardDetailedReportLate: sent !== null && sent.getTime() > due.getTime(),
    extension: b.extension === null
      ? null
      : { requestedAt: b.extension.requestedAt, granted: b.extension.granted, newDueAt: b.extension.newDueAt },
    principalIntimationRequired: true,
    principalIntimation: {
      due: "without_delay" as const,
      intimatedCount: b.intimatedCount,
      pendingCount: b.idsGiven ? b.pendingIds : null,
      lastIntimatedAt: iso(b.lastIntimatedAt)
    },
    createdAt: b.createdAt.toISOString(),
    updatedAt: iso(b.updatedAt),
    closedAt: iso(b.closedAt)
  }
}

export type BreachView = ReturnType<typeof breachView>

interface IntimationRow {
  readonly id: string
  readonly channel: string
  readonly intimatedAt: Date
  readonly principalCount: number
  readonly contentIncluded: ReadonlyArray<string>
  readonly contentMissing: ReadonlyArray<string>
  readonly createdAt: Date
}

const intimationView = (i: IntimationRow) => ({
  intimationId: i.id,
  channel: i.channel,
  intimatedAt: i.intimatedAt.toISOString(),
  principalCount: i.principalCount,
  contentIncluded: [...i.contentIncluded],
  contentMissing: [...i.contentMissing],
  createdAt: i.createdAt.toISOString()
})

export interface BreachesService {
  readonly record: (developerId: string, body: unknown) => Effect.Effect<BreachView & { principalIntimations: Array<ReturnType<typeof intimationView>> }, BadRequest>
  readonly update: (developerId: string, id: string, body: unknown) => Effect.Effect<BreachView, BadRequest | ReportIncomplete | NotFound | InvalidTransition | BreachClosed>
  readonly list: (developerId: string, query: { status?: string; cursor?: string; limit: number }) => Effect.Effect<
    { breaches: Array<BreachView>; nextCursor: string | null },
    BadRequest
  >
  readonly get: (developerId: string, id: string) => Effect.Effect<BreachView & { principalIntimations: Array<ReturnType<typeof intimationView>> }, NotFound>
  readonly intimate: (developerId: string, id: string, body: unknown) => Effect.Effect<unknown, BadRequest | NotFound | BreachClosed>
}

export class Breaches extends Context.Tag("agent-auth/Breaches")<Breaches, BreachesService>() {}

const validated = <A>(f: () => A) =>
  Effect.try({ try: f, catch: (e) => (e instanceof Invalid ? new BadRequest({ message: e.message }) : (() => { throw e })()) })

export const BreachesServiceLive = Layer.effect(
  Breaches,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const audit = yield* AuditChain
    const events = yield* Events
    const notFound = () => new NotFound({ message: "Breach not found" })

    const load = (developerId: string, id: string, lock = false) =>
      sql.unsafe<BreachRow>(`${breachSelect({ ids: true })} WHERE b.id = $1 AND b.developer_id = $2${lock ? " FOR UPDATE OF b" : ""}`, [id, developerId]).pipe(
        Effect.map((rows) => rows[0]),
        Effect.orDie
      )

    const record: BreachesService["record"] = (developerId, body) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const input = yield* validated(() => parseRecord(body, ms))
        const id = newId("brch", ms)
        const at = new Date(ms)
        const report = Object.fromEntries(REPORT_KEYS.map((k) => [k, null]))
        const row = yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql.unsafe(
            `INSERT INTO breaches (id, developer_id, status, description, nature, extent, occurred_at, aware_at, location, likely_impact,
               affected_count, affected_principal_ids, ids_given, mitigation, detailed_report, created_at, pending_count)
             VALUES ($1, $2, 'open', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::jsonb, $15, $16)`,
            [id, developerId, input.description, input.nature, input.extent, input.occurredAt, input.awareAt, input.location,
              input.likelyImpact, input.affectedCount, [...(input.affectedDataPrincipalIds ?? [])] as any,
              input.affectedDataPrincipalIds !== null, input.mitigation, JSON.stringify(report), at,
              input.affectedDataPrincipalIds?.length ?? 0]
          )
          const row = (yield* load(developerId, id))!
          const due = dueAt(row).toISOString()
          yield* events.emit(developerId, "dpdp.breach.recorded", {
            breachId: id, status: "open", awareAt: row.awareAt.toISOString(), affectedCount: row.affectedCount, boardDetailedReportDueAt: due
          })
          yield* events.emit(developerId, "dpdp.breach.principal_intimation_due", {
            breachId: id, awareAt: row.awareAt.toISOString(), affectedCount: row.affectedCount, due: "without_delay"
          })
          yield* audit.append({
            developerId,
            action: "service.dpdp.breach_recorded",
            metadata: { breachId: id, status: "open", awareAt: row.awareAt.toISOString(), boardDetailedReportDueAt: due, affectedCount: row.affectedCount }
          })
          return row
        })).pipe(Effect.orDie)
        return { ...breachView(row, ms, { ids: true }), principalIntimations: [] as Array<ReturnType<typeof intimationView>> }
      })

    const update: BreachesService["update"] = (developerId, id, body) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const parsed = yield* Effect.either(validated(() => parseUpdate(body, ms)))
        return yield* sql.withTransaction(Effect.gen(function*() {
          const breach = yield* load(developerId, id, true)
          if (breach === undefined) return yield* Effect.fail(notFound())
          // a closed breach refuses every update, whatever the body says (interface: 409 BREACH_CLOSED)
          if (breach.status === "closed") return yield* Effect.fail(new BreachClosed({ message: "The breach is closed" }))
          if (parsed._tag === "Left") return yield* Effect.fail(parsed.left)
          const input = parsed.right
          // checks against the stored breach; nothing is written until all pass
          const aware = breach.awareAt.getTime()
          for (const [field, value] of [["boardInitialIntimationSentAt", input.boardInitialIntimationSentAt], ["boardDetailedReportSentAt", input.boardDetailedReportSentAt]] as const) {
            if (value !== undefined && value.getTime() < aware) return yield* Effect.fail(new BadRequest({ message: `${field} must not be before awareAt` }))
          }
          if (input.extension?.newDueAt && input.extension.newDueAt.getTime() <= aware) {
            return yield* Effect.fail(new BadRequest({ message: "extension.newDueAt must be after awareAt" }))
          }
          const next = input.status
          if (next !== undefined) {
            const from = { initial_intimated: "open", reported: "initial_intimated", closed: "reported" }[next]
            if (breach.status !== from) {
              return yield* Effect.fail(new InvalidTransition({ message: `Cannot move a breach from ${breach.status} to ${next}` }))
            }
          }
          const report = { ...breach.detailedReport, ...input.detailedReport }
          if (next === "reported") {
            const missing = REPORT_KEYS.filter((k) => report[k] === null || report[k] === undefined || report[k]!.trim() === "")
            if (missing.length > 0) {
              return yield* Effect.fail(new ReportIncomplete({ message: `The detailed report lacks: ${missing.join(", ")}` }))
            }
          }
          const at = new Date(ms)
          const initialSentAt = input.boardInitialIntimationSentAt ?? breach.boardInitialIntimationSentAt ??
            (next === "initial_intimated" ? at : null)
          const detailedSentAt = input.boardDetailedReportSentAt ?? breach.boardDetailedReportSentAt ?? (next === "reported" ? at : null)
          const extension = input.extension === undefined
            ? breach.extension
            : {
              requestedAt: input.extension.requestedAt.toISOString(),
              granted: input.extension.granted,
              newDueAt: input.extension.newDueAt?.toISOString() ?? null
            }
          yield* sql.unsafe(
            `UPDATE breaches SET status = $3, detailed_report = $4::jsonb, board_initial_intimation_sent_at = $5,
               board_detailed_report_sent_at = $6, extension = $7::jsonb, updated_at = $8,
               closed_at = CASE WHEN $3 = 'closed' THEN $8 ELSE closed_at END
             WHERE id = $1 AND developer_id = $2`,
            [id, developerId, next ?? breach.status, JSON.stringify(report), initialSentAt, detailedSentAt,
              extension === null ? null : JSON.stringify(extension), at]
          )
          const row = (yield* load(developerId, id))!
          // a status change is announced in this transaction (outbox): ids and statuses, no breach text
          if (next !== undefined) {
            yield* events.emit(developerId, "dpdp.breach.updated", { breachId: id, status: row.status, previousStatus: breach.status })
          }
          yield* audit.append({
            developerId,
            action: "service.dpdp.breach_updated",
            metadata: {
              breachId: id,
              fromStatus: breach.status,
              toStatus: row.status,
              changed: Object.keys(body as object).sort(),
              boardDetailedReportDueAt: dueAt(row).toISOString()
            }
          })
          return breachView(row, ms, { ids: true })
        })).pipe(Effect.catchTag("SqlError", Effect.die))
      })

    const list: BreachesService["list"] = (developerId, query) =>
      Effect.gen(function*() {
        const cursor = decodeCursor(query.cursor)
        if (cursor === null) return yield* Effect.fail(new BadRequest({ message: "cursor is not valid" }))
        const ms = yield* nowMillis
        const params: Array<unknown> = [developerId]
        const conditions = ["b.developer_id = $1"]
        if (query.status !== undefined) {
          params.push(query.status)
          conditions.push(`b.status = $${params.length}`)
        }
        if (cursor) {
          params.push(new Date(cursor.createdAt), cursor.id)
          conditions.push(`(b.created_at, b.id) < ($${params.length - 1}, $${params.length})`)
        }
        params.push(query.limit + 1)
        const rows = yield* sql.unsafe<BreachRow>(
          `${breachSelect({ ids: false })} WHERE ${conditions.join(" AND ")} ORDER BY b.created_at DESC, b.id DESC LIMIT $${params.length}`,
          params as any
        ).pipe(Effect.orDie)
        const page = rows.slice(0, query.limit)
        return {
          breaches: page.map((b) => breachView(b, ms, { ids: false })),
          nextCursor: rows.length > query.limit ? encodeCursor(page[page.length - 1]!) : null
        }
      })

    const get: BreachesService["get"] = (developerId, id) =>
      Effect.gen(function*() {
        const breach = yield* load(developerId, id)
        if (breach === undefined) return yield* Effect.fail(notFound())
        const intimations = yield* sql<IntimationRow>`
          SELECT id, channel, intimated_at, principal_count, content_included, content_missing, created_at
          FROM breach_intimations WHERE breach_id = ${id} ORDER BY created_at DESC, id DESC LIMIT 200`.pipe(Effect.orDie)
        return { ...breachView(breach, yield* nowMillis, { ids: true }), principalIntimations: intimations.map(intimationView) }
      })

    const intimate: BreachesService["intimate"] = (developerId, id, body) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const input = yield* validated(() => parseIntimation(body, ms))
        return yield* sql.withTransaction(Effect.gen(function*() {
          const breach = yield* load(developerId, id, true)
          if (breach === undefined) return yield* Effect.fail(notFound())
          if (input.intimatedAt.getTime() < breach.awareAt.getTime()) {
            return yield* Effect.fail(new BadRequest({ message: "intimatedAt must not be before awareAt" }))
          }
          if (breach.idsGiven) {
            const listed = new Set(breach.affectedPrincipalIds)
            const strangers = input.dataPrincipalIds.filter((p) => !listed.has(p))
            if (strangers.length > 0) {
              return yield* Effect.fail(new BadRequest({ message: `${strangers.length} dataPrincipalIds are not among the breach's affected principals` }))
            }
          }
          if (breach.status === "closed") return yield* Effect.fail(new BreachClosed({ message: "The breach is closed" }))
          const at = new Date(ms)
          const intimationId = newId("bint", ms)
          const contentMissing = CONTENT_ITEMS.filter((c) => !input.contentIncluded.includes(c))
          yield* sql`INSERT INTO breach_intimations (id, breach_id, channel, intimated_at, principal_count, content_included, content_missing, created_at)
                     VALUES (${intimationId}, ${id}, ${input.channel}, ${input.intimatedAt}, ${input.dataPrincipalIds.length},
                             ${[...input.contentIncluded] as any}, ${[...contentMissing] as any}, ${at})`
          // the derived counts move with the principals newly told (every one of them is listed when
          // the breach listed ids, so each is one fewer pending)
          yield* sql.unsafe(
            `WITH told AS (
               INSERT INTO breach_intimated_principals (breach_id, principal_id) SELECT $1, unnest($2::text[])
               ON CONFLICT DO NOTHING RETURNING 1)
             UPDATE breaches SET updated_at = $3,
               intimated_count = intimated_count + (SELECT count(*)::int FROM told),
               pending_count = CASE WHEN ids_given THEN pending_count - (SELECT count(*)::int FROM told) ELSE 0 END,
               last_intimated_at = GREATEST(last_intimated_at, $4::timestamptz)
             WHERE id = $1`,
            [id, [...input.dataPrincipalIds] as any, at, input.intimatedAt]
          )
          yield* audit.append({
            developerId,
            action: "service.dpdp.breach_principals_intimated",
            metadata: { breachId: id, intimationId, principalCount: input.dataPrincipalIds.length, intimatedAt: input.intimatedAt.toISOString() }
          })
          const row = (yield* load(developerId, id))!
          return {
            breachId: id,
            intimationId,
            channel: input.channel,
            intimatedAt: input.intimatedAt.toISOString(),
            principalCount: input.dataPrincipalIds.length,
            contentIncluded: [...input.contentIncluded],
            contentMissing,
            createdAt: at.toISOString(),
            principalIntimation: breachView(row, ms, { ids: false }).principalIntimation
          }
        })).pipe(Effect.catchTag("SqlError", Effect.die))
      })

    return { record, update, list, get, intimate }
  })
)

export const BreachesLive = BreachesServiceLive
