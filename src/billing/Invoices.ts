/**
 * Period close and invoices (decisions §16). Closing a month runs in one transaction holding that
 * month's `billing_periods` row (FOR UPDATE SKIP LOCKED): another instance skips it, a crash rolls
 * it back to be redone, and (developer, period) is unique, so a month is invoiced once. Quantities
 * come from the durable rows (Meters.ts); prices and amounts are computed by SQL in numeric(20,4).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { iso, nowMillis } from "../platform/Time.ts"
import { emptyUsage, measure, type Usage } from "./Meters.ts"
import { METERS, periodOf, type Plans, QUOTA_OF } from "./Plans.ts"

export type CloseOutcome =
  | { readonly status: "closed"; readonly period: string; readonly invoices: number }
  | { readonly status: "already-closed"; readonly period: string; readonly invoices: number }
  | { readonly status: "busy"; readonly period: string }
  | { readonly status: "not-ended"; readonly period: string }

/** Upserts the configured plans, so SQL prices invoices with the figures the service runs on. */
export const syncPlans = (plans: Plans) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const p of Object.values(plans)) {
      yield* sql`INSERT INTO plans (code, name, limits, monthly_fee, currency, overage, updated_at)
        VALUES (${p.code}, ${p.name}, ${JSON.stringify(p.limits)}::jsonb, ${p.monthlyFee}::numeric, ${p.currency},
                ${JSON.stringify(p.overage)}::jsonb, now())
        ON CONFLICT (code) DO UPDATE SET name = EXCLUDED.name, limits = EXCLUDED.limits, monthly_fee = EXCLUDED.monthly_fee,
          currency = EXCLUDED.currency, overage = EXCLUDED.overage, updated_at = EXCLUDED.updated_at`
    }
  })

/** Closes the month starting at `start` if it has ended; idempotent. */
export const closePeriod = (start: Date) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const events = yield* Events
    const period = periodOf(start.getTime())
    const ms = yield* nowMillis
    if (period.end.getTime() > ms) return { status: "not-ended", period: period.label } as CloseOutcome
    yield* sql`INSERT INTO billing_periods (period_start, period_end) VALUES (${period.start}, ${period.end}) ON CONFLICT DO NOTHING`
    return yield* sql.withTransaction(Effect.gen(function*() {
      const claimed = yield* sql<{ closedAt: Date | null }>`
        SELECT closed_at FROM billing_periods WHERE period_start = ${period.start} FOR UPDATE SKIP LOCKED`
      if (claimed.length === 0) return { status: "busy", period: period.label } as CloseOutcome
      if (claimed[0]!.closedAt !== null) {
        const [{ n }] = (yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM invoices WHERE period_start = ${period.start}`) as any
        return { status: "already-closed", period: period.label, invoices: n } as CloseOutcome
      }
      const usage = yield* measure(period.start, period.end)
      const developers = yield* sql<{ id: string; plan: string }>`
        SELECT id, plan FROM developers WHERE created_at < ${period.end} ORDER BY id`
      const issuedAt = new Date(ms)
      let created = 0
      for (const developer of developers) {
        const id = newId("inv", ms)
        const used: Usage = usage.get(developer.id) ?? emptyUsage()
        const inserted = yield* sql`
          INSERT INTO invoices (id, developer_id, plan, period_start, period_end, status, currency, total, usage, issued_at)
          SELECT ${id}, ${developer.id}, code, ${period.start}, ${period.end}, 'open', currency, 0, ${JSON.stringify(used)}::jsonb, ${issuedAt}
          FROM plans WHERE code = ${developer.plan}
          ON CONFLICT (developer_id, period_start) DO NOTHING RETURNING id`
        if (inserted.length === 0) continue
        yield* sql`INSERT INTO invoice_lines (invoice_id, line_no, kind, meter, quantity, unit_price, amount)
          SELECT ${id}, 0, 'fee', NULL, 1, monthly_fee, monthly_fee FROM plans WHERE code = ${developer.plan}`
        let line = 1
        for (const meter of METERS) {
          const quota = QUOTA_OF[meter]
          // units above the plan's included quota (all units for a meter without one), priced per 1,000
          const rows = yield* sql.unsafe(
            `INSERT INTO invoice_lines (invoice_id, line_no, kind, meter, quantity, unit_price, amount)
             SELECT $1, $2, 'overage', $3, q.quantity, (p.overage->>$3)::numeric(20,4),
                    round(q.quantity * (p.overage->>$3)::numeric(20,4) / 1000, 4)
             FROM plans p, LATERAL (SELECT greatest(0, $4::bigint - coalesce((p.limits->>$5)::bigint, 0)) AS quantity) q
             WHERE p.code = $6 AND p.overage->>$3 IS NOT NULL AND q.quantity > 0
             RETURNING line_no`,
            [id, line, meter, used[meter], quota ?? "none", developer.plan] as any
          )
          line += rows.length
        }
        yield* sql`UPDATE invoices SET total = (SELECT coalesce(sum(amount), 0) FROM invoice_lines WHERE invoice_id = ${id}) WHERE id = ${id}`
        yield* events.emit(developer.id, "billing.invoice.created", { invoiceId: id, period: period.label })
        created++
      }
      yield* sql`UPDATE billing_periods SET closed_at = ${issuedAt} WHERE period_start = ${period.start}`
      return { status: "closed", period: period.label, invoices: created } as CloseOutcome
    }))
  })

/** the month before the one holding `ms` */
export const previousPeriodStart = (ms: number): Date => {
  const current = periodOf(ms).start
  return periodOf(current.getTime() - 1).start
}

export interface InvoiceView {
  readonly id: string
  readonly plan: string
  readonly periodStart: string
  readonly periodEnd: string
  readonly status: "draft" | "open" | "paid" | "void"
  readonly currency: string
  readonly lines: ReadonlyArray<{ kind: "fee" | "overage"; meter: string | null; quantity: number; unitPrice: number; amount: number }>
  readonly total: number
  readonly usage: Record<string, number>
  readonly issuedAt: string
  readonly paidAt: string | null
}

interface InvoiceRow {
  id: string
  plan: string
  periodStart: Date
  periodEnd: Date
  status: InvoiceView["status"]
  currency: string
  total: string
  usage: Record<string, number>
  issuedAt: Date
  paidAt: Date | null
}

/** Invoices of one developer (newest first, after the cursor), with their lines. */
export const readInvoices = (developerId: string, options: { id?: string; limit?: number; after?: { createdAt: string; id: string } }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const columns = "id, plan, period_start, period_end, status, currency, total::text AS total, usage, issued_at, paid_at"
    const rows = options.id !== undefined
      ? yield* sql.unsafe<InvoiceRow>(`SELECT ${columns} FROM invoices WHERE developer_id = $1 AND id = $2`, [developerId, options.id])
      : options.after === undefined
      ? yield* sql.unsafe<InvoiceRow>(`SELECT ${columns} FROM invoices WHERE developer_id = $1 ORDER BY issued_at DESC, id DESC LIMIT $2`,
        [developerId, options.limit ?? 50] as any)
      : yield* sql.unsafe<InvoiceRow>(
        `SELECT ${columns} FROM invoices WHERE developer_id = $1 AND (issued_at, id) < ($3, $4) ORDER BY issued_at DESC, id DESC LIMIT $2`,
        [developerId, options.limit ?? 50, new Date(options.after.createdAt), options.after.id] as any
      )
    if (rows.length === 0) return [] as Array<InvoiceView & { createdAt: Date }>
    const lines = yield* sql<{ invoiceId: string; kind: "fee" | "overage"; meter: string | null; quantity: string; unitPrice: string; amount: string }>`
      SELECT invoice_id, kind, meter, quantity::text AS quantity, unit_price::text AS unit_price, amount::text AS amount
      FROM invoice_lines WHERE invoice_id IN ${sql.in(rows.map((r) => r.id))} ORDER BY invoice_id, line_no`
    return rows.map((r) => ({
      id: r.id,
      plan: r.plan,
      periodStart: iso(r.periodStart)!,
      periodEnd: iso(r.periodEnd)!,
      status: r.status,
      currency: r.currency,
      lines: lines.filter((l) => l.invoiceId === r.id).map((l) => ({
        kind: l.kind,
        meter: l.meter,
        quantity: Number(l.quantity),
        unitPrice: Number(l.unitPrice),
        amount: Number(l.amount)
      })),
      // a JSON number on the wire (as budgets); the stored value is numeric(20,4)
      total: Number(r.total),
      usage: typeof r.usage === "string" ? JSON.parse(r.usage) : r.usage,
      issuedAt: iso(r.issuedAt)!,
      paidAt: iso(r.paidAt),
      createdAt: r.issuedAt
    }))
  })

export const markPaid = (invoiceId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const at = new Date(yield* nowMillis)
    const rows = yield* sql<{ status: string }>`
      UPDATE invoices SET status = 'paid', paid_at = coalesce(paid_at, ${at}) WHERE id = ${invoiceId} AND status IN ('open', 'paid')
      RETURNING status`
    return rows.length > 0
  })

