/**
 * Invoices (decisions §16): the configured plans kept in SQL for pricing, reading a developer's
 * invoices with their lines, marking one paid. The period close that issues them is Close.ts.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { iso, nowMillis } from "../platform/Time.ts"
import type { Plans } from "./Plans.ts"

export { closePeriod, type CloseOutcome, previousPeriodStart } from "./Close.ts"

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

export interface InvoiceView {
  readonly id: string
  readonly plan: string
  readonly periodStart: string
  readonly periodEnd: string
  readonly status: "draft" | "open" | "paid" | "void"
  readonly currency: string
  readonly lines: ReadonlyArray<{
    kind: "fee" | "overage"
    meter: string | null
    quantity: number
    unitPrice: number
    amount: number
    /** the plan and the part of the period the line prices */
    plan: string
    periodStart: string
    periodEnd: string
  }>
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
    const lines = yield* sql<{
      invoiceId: string; kind: "fee" | "overage"; meter: string | null; quantity: string; unitPrice: string; amount: string
      plan: string | null; periodStart: Date | null; periodEnd: Date | null
    }>`
      SELECT invoice_id, kind, meter, quantity::text AS quantity, unit_price::text AS unit_price, amount::text AS amount,
             plan, period_start, period_end
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
        amount: Number(l.amount),
        plan: l.plan ?? r.plan,
        periodStart: iso(l.periodStart ?? r.periodStart)!,
        periodEnd: iso(l.periodEnd ?? r.periodEnd)!
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

