/**
 * Period close (decisions §16, revised). One instance closes a month at a time: it holds the
 * month's lease (platform/Leases.ts, kind `billing.close`, renewed while the close runs), and the
 * close itself is one transaction that commits only while the lease is still its own, so a crash
 * rolls it back to be redone and (developer, period) stays invoiced once.
 *
 * Each part of the month is priced at the plan in force then (the developer's plan changes are kept
 * in `plan_changes`): a fee line per part, prorated by its share of the month, and overage per part
 * above that part's share of the plan's included quota. A developer whose plan (in any part) the
 * plans table lacks, or whose parts bill in different currencies, is not invoiced and the close does
 * not complete: the developers invoiced so far keep their invoices, the month stays open with the
 * reasons (`billing_periods.last_error`), the outcome is `failed`, and the next round tries again.
 * Quantities come from the durable rows (Meters.ts); money is computed by SQL in numeric(20,4).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { guardLease, withLease } from "../platform/Leases.ts"
import { nowMillis } from "../platform/Time.ts"
import { emptyUsage, measure, type Usage } from "./Meters.ts"
import { METERS, periodOf, QUOTA_OF } from "./Plans.ts"

export type CloseOutcome =
  | { readonly status: "closed"; readonly period: string; readonly invoices: number }
  | { readonly status: "already-closed"; readonly period: string; readonly invoices: number }
  | { readonly status: "busy"; readonly period: string }
  | { readonly status: "not-ended"; readonly period: string }
  /** some developers could not be invoiced (or the close broke): the month stays open and is retried */
  | { readonly status: "failed"; readonly period: string; readonly invoices: number; readonly errors: ReadonlyArray<string> }

export const CLOSE_LEASE_KIND = "billing.close"
export const CLOSE_LEASE_MS = 300_000

/** the month before the one holding `ms` */
export const previousPeriodStart = (ms: number): Date => {
  const current = periodOf(ms).start
  return periodOf(current.getTime() - 1).start
}

export interface PlanChange {
  readonly changedAt: Date
  readonly fromPlan: string
  readonly toPlan: string
}

export interface Segment {
  readonly plan: string
  readonly start: Date
  readonly end: Date
}

/**
 * The parts of [start, end) by the plan in force: the plan at `start` is the last change's
 * `toPlan` before it, else the first later change's `fromPlan`, else the current plan.
 */
export const segmentsOf = (
  current: string,
  lastBefore: PlanChange | undefined,
  firstAfter: PlanChange | undefined,
  within: ReadonlyArray<PlanChange>,
  start: Date,
  end: Date
): ReadonlyArray<Segment> => {
  let plan = lastBefore?.toPlan ?? firstAfter?.fromPlan ?? current
  let from = start
  const out: Array<Segment> = []
  for (const change of within) {
    if (change.changedAt.getTime() > from.getTime() && change.toPlan !== plan) {
      out.push({ plan, start: from, end: change.changedAt })
      from = change.changedAt
    }
    plan = change.toPlan
  }
  out.push({ plan, start: from, end })
  return out
}

interface PlanRow {
  readonly code: string
  readonly currency: string
}

/** Closes the month starting at `start` if it has ended; idempotent. */
export const closePeriod = (start: Date) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const period = periodOf(start.getTime())
    if (period.end.getTime() > (yield* nowMillis)) return { status: "not-ended", period: period.label } as CloseOutcome
    yield* sql`INSERT INTO billing_periods (period_start, period_end) VALUES (${period.start}, ${period.end}) ON CONFLICT DO NOTHING`
    const [row] = yield* sql<{ closedAt: Date | null }>`SELECT closed_at FROM billing_periods WHERE period_start = ${period.start}`
    if (row?.closedAt != null) return { status: "already-closed", period: period.label, invoices: yield* invoiceCount(period.start) } as CloseOutcome
    const outcome = yield* withLease(CLOSE_LEASE_KIND, period.label, { leaseMs: CLOSE_LEASE_MS, recurring: true }, (claim) =>
      // the lease is checked last, so renewals are not held up by the close; a lost lease rolls it all back
      sql.withTransaction(Effect.tap(closeMonth(period), () => guardLease(claim))))
    switch (outcome._tag) {
      case "Done":
        return outcome.value
      case "Busy":
      case "Lost":
        return { status: "busy", period: period.label } as CloseOutcome
      default:
        return { status: "failed", period: period.label, invoices: yield* invoiceCount(period.start), errors: [outcome.error] } as CloseOutcome
    }
  })

const invoiceCount = (periodStart: Date) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(sql<{ n: number }>`SELECT count(*)::int AS n FROM invoices WHERE period_start = ${periodStart}`, ([r]) => r?.n ?? 0))

/** the close, in the caller's transaction under the month's lease */
const closeMonth = (period: { start: Date; end: Date; label: string }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const events = yield* Events
    const ms = yield* nowMillis
    const [held] = yield* sql<{ closedAt: Date | null }>`SELECT closed_at FROM billing_periods WHERE period_start = ${period.start} FOR UPDATE`
    if (held?.closedAt != null) return { status: "already-closed", period: period.label, invoices: yield* invoiceCount(period.start) } as CloseOutcome
    const usage = yield* measure(period.start, period.end)
    const developers = yield* sql<{ id: string; plan: string; invoiced: boolean }>`
      SELECT d.id, d.plan, EXISTS (SELECT 1 FROM invoices i WHERE i.developer_id = d.id AND i.period_start = ${period.start}) AS invoiced
      FROM developers d WHERE d.created_at < ${period.end} ORDER BY d.id`
    const plans = new Map((yield* sql<PlanRow>`SELECT code, currency FROM plans`).map((p) => [p.code, p]))
    const history = yield* planHistory(period.start, period.end)
    const issuedAt = new Date(ms)
    const errors: Array<string> = []
    let created = 0
    for (const developer of developers) {
      if (developer.invoiced) continue
      const segments = segmentsOf(developer.plan, history.lastBefore.get(developer.id), history.firstAfter.get(developer.id),
        history.within.get(developer.id) ?? [], period.start, period.end)
      const missing = [...new Set(segments.map((s) => s.plan).filter((p) => !plans.has(p)))]
      if (missing.length > 0) {
        errors.push(`developer ${developer.id}: plan ${missing.map((p) => `"${p}"`).join(", ")} is not in the plans table`)
        continue
      }
      const currencies = [...new Set(segments.map((s) => plans.get(s.plan)!.currency))]
      if (currencies.length > 1) {
        errors.push(`developer ${developer.id}: the plans in force in ${period.label} bill in different currencies (${currencies.join(", ")})`)
        continue
      }
      const id = newId("inv", ms)
      const whole: Usage = usage.get(developer.id) ?? emptyUsage()
      const last = segments[segments.length - 1]!
      yield* sql`
        INSERT INTO invoices (id, developer_id, plan, period_start, period_end, status, currency, total, usage, issued_at)
        VALUES (${id}, ${developer.id}, ${last.plan}, ${period.start}, ${period.end}, 'open', ${currencies[0]!}, 0,
                ${JSON.stringify(whole)}::jsonb, ${issuedAt})`
      let line = 0
      for (const segment of segments) {
        const used = segments.length === 1
          ? whole
          : (yield* measure(segment.start, segment.end, developer.id)).get(developer.id) ?? emptyUsage()
        line = yield* priceSegment(id, line, segment, used, period)
      }
      yield* sql`UPDATE invoices SET total = (SELECT coalesce(sum(amount), 0) FROM invoice_lines WHERE invoice_id = ${id}) WHERE id = ${id}`
      yield* events.emit(developer.id, "billing.invoice.created", { invoiceId: id, period: period.label })
      created++
    }
    if (errors.length > 0) {
      yield* sql`UPDATE billing_periods SET last_error = ${errors.join("; ").slice(0, 4000)}, failed_closes = failed_closes + 1
                 WHERE period_start = ${period.start}`
      return { status: "failed", period: period.label, invoices: yield* invoiceCount(period.start), errors } as CloseOutcome
    }
    yield* sql`UPDATE billing_periods SET closed_at = ${issuedAt}, last_error = NULL WHERE period_start = ${period.start}`
    return { status: "closed", period: period.label, invoices: created } as CloseOutcome
  })

/** Every developer's plan changes that decide the plans in force during [start, end). */
const planHistory = (start: Date, end: Date) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const byDeveloper = (rows: ReadonlyArray<PlanChange & { developerId: string }>) => new Map(rows.map((r) => [r.developerId, r]))
    const lastBefore = byDeveloper(yield* sql<PlanChange & { developerId: string }>`
      SELECT DISTINCT ON (developer_id) developer_id, changed_at, from_plan, to_plan FROM plan_changes
      WHERE changed_at <= ${start} ORDER BY developer_id, changed_at DESC, seq DESC`)
    const firstAfter = byDeveloper(yield* sql<PlanChange & { developerId: string }>`
      SELECT DISTINCT ON (developer_id) developer_id, changed_at, from_plan, to_plan FROM plan_changes
      WHERE changed_at > ${start} ORDER BY developer_id, changed_at, seq`)
    const within = new Map<string, Array<PlanChange>>()
    for (const r of yield* sql<PlanChange & { developerId: string }>`
      SELECT developer_id, changed_at, from_plan, to_plan FROM plan_changes
      WHERE changed_at > ${start} AND changed_at < ${end} ORDER BY developer_id, changed_at, seq`) {
      within.set(r.developerId, [...(within.get(r.developerId) ?? []), r])
    }
    return { lastBefore, firstAfter, within }
  })

/**
 * The lines of one part of the month: its plan's fee prorated by the part's share of the month, and
 * each priced meter's units above the part's share of the included quota (none included for a meter
 * without a quota, or a quota of null), per 1,000. Answers the next line number.
 */
const priceSegment = (invoiceId: string, firstLine: number, segment: Segment, used: Usage, period: { start: Date; end: Date }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const share = [segment.end.getTime() - segment.start.getTime(), period.end.getTime() - period.start.getTime()]
    let line = firstLine
    yield* sql.unsafe(
      `INSERT INTO invoice_lines (invoice_id, line_no, kind, meter, quantity, unit_price, amount, plan, period_start, period_end)
       SELECT $1, $2, 'fee', NULL, 1, monthly_fee, round(monthly_fee * $3::numeric / $4::numeric, 4), code, $5, $6 FROM plans WHERE code = $7`,
      [invoiceId, line, share[0], share[1], segment.start, segment.end, segment.plan] as any
    )
    line++
    for (const meter of METERS) {
      const quota = QUOTA_OF[meter]
      const rows = yield* sql.unsafe(
        `INSERT INTO invoice_lines (invoice_id, line_no, kind, meter, quantity, unit_price, amount, plan, period_start, period_end)
         SELECT $1, $2, 'overage', $3, q.quantity, (p.overage->>$3)::numeric(20,4),
                round(q.quantity * (p.overage->>$3)::numeric(20,4) / 1000, 4), p.code, $8, $9
         FROM plans p, LATERAL (
           SELECT greatest(0, $4::bigint - floor(coalesce((p.limits->>$5)::bigint, 0) * $6::numeric / $7::numeric)::bigint) AS quantity
         ) q
         WHERE p.code = $10 AND p.overage->>$3 IS NOT NULL AND q.quantity > 0
         RETURNING line_no`,
        [invoiceId, line, meter, used[meter], quota ?? "none", share[0], share[1], segment.start, segment.end, segment.plan] as any
      )
      line += rows.length
    }
    return line
  })
