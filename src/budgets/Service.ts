/**
 * Budgets: one allocation per grant, debited atomically.
 *
 * A debit is a single conditional UPDATE (`remaining_budget >= amount`) that returns the new
 * balance; concurrent debits queue on the row lock and each sees the previous one's result, so no
 * interleaving can overdraw. The transaction row and the `budget.threshold` / `budget.exhausted`
 * events commit with the debit. A threshold event is emitted by the one debit whose before/after
 * balances straddle the line, so each crossing is reported exactly once (budgets only go down).
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Grants } from "../grants/Service.ts"
import { BadRequest, Conflict, GrantNotActive, InsufficientBudget, NotFound } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { type CursorPosition, decodeCursor, pageLimit, toPage } from "../platform/Pagination.ts"
import { nowMillis } from "../platform/Time.ts"
import { amountText, toNumber, toUnits } from "./Amount.ts"

export interface AllocationRow {
  readonly id: string
  readonly grantId: string
  readonly developerId: string
  readonly initialBudget: string
  readonly remainingBudget: string
  readonly spent: string
  readonly currency: string
  readonly createdAt: Date
  readonly updatedAt: Date
}

interface TransactionRow {
  readonly id: string
  readonly grantId: string
  readonly amount: string
  readonly remainingAfter: string
  readonly description: string | null
  readonly metadata: Record<string, unknown> | null
  readonly createdAt: Date
}

export const allocationView = (a: AllocationRow) => ({
  id: a.id,
  grantId: a.grantId,
  initialBudget: toNumber(a.initialBudget),
  remainingBudget: toNumber(a.remainingBudget),
  currency: a.currency,
  createdAt: a.createdAt.toISOString()
})

export const balanceView = (a: AllocationRow) => ({
  ...allocationView(a),
  spent: toNumber(a.spent),
  updatedAt: a.updatedAt.toISOString()
})

const transactionView = (t: TransactionRow) => ({
  id: t.id,
  grantId: t.grantId,
  amount: toNumber(t.amount),
  remaining: toNumber(t.remainingAfter),
  description: t.description,
  metadata: t.metadata ?? {},
  createdAt: t.createdAt.toISOString()
})

/** the thresholds (percent of the initial budget spent) that emit budget.threshold */
export const THRESHOLDS = [50, 80] as const

/** thresholds crossed by moving from `before` to `after` remaining (exact, in 1/10000 units) */
export const crossedThresholds = (initial: bigint, before: bigint, after: bigint): Array<50 | 80> =>
  THRESHOLDS.filter((pct) => {
    const line = initial * BigInt(pct) // spent * 100 >= line ⇔ spent ≥ pct%
    return (initial - before) * 100n < line && (initial - after) * 100n >= line
  })

export interface DebitInput {
  readonly grantId: string
  readonly amount: number
  readonly description?: string
  readonly metadata?: Record<string, unknown>
}

export interface BudgetsService {
  readonly allocate: (
    developerId: string,
    input: { readonly grantId: string; readonly initialBudget: number; readonly currency?: string }
  ) => Effect.Effect<ReturnType<typeof allocationView>, NotFound | Conflict>
  readonly debit: (
    developerId: string,
    input: DebitInput
  ) => Effect.Effect<{ remaining: number; transactionId: string; grantId: string }, NotFound | InsufficientBudget | GrantNotActive>
  readonly balance: (developerId: string, grantId: string) => Effect.Effect<ReturnType<typeof balanceView>, NotFound>
  readonly transactions: (
    developerId: string,
    grantId: string,
    page: { readonly cursor?: string; readonly limit?: string }
  ) => Effect.Effect<{ transactions: Array<ReturnType<typeof transactionView>>; nextCursor: string | null }, NotFound | BadRequest>
  /** every allocation of the developer, newest first, a page at a time */
  readonly allocations: (
    developerId: string,
    page: { readonly limit: number; readonly cursor: CursorPosition | undefined }
  ) => Effect.Effect<{ allocations: Array<ReturnType<typeof allocationView>>; nextCursor: string | null }>
  /** remaining budget of a grant (a number), or undefined without an allocation: the `bdg` claim */
  readonly remaining: (grantId: string) => Effect.Effect<number | undefined>
}

export class Budgets extends Context.Tag("agent-auth/Budgets")<Budgets, BudgetsService>() {}

const ALLOCATION_COLUMNS = `id, grant_id, developer_id, initial_budget::text AS initial_budget,
  remaining_budget::text AS remaining_budget, (initial_budget - remaining_budget)::text AS spent, currency, created_at, updated_at`

const isUniqueViolation = (e: SqlError.SqlError) => (e.cause as { code?: string } | undefined)?.code === "23505"

const notFound = () => new NotFound({ message: "No budget allocation for this grant" })

export const BudgetsServiceLive = Layer.effect(
  Budgets,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const grants = yield* Grants
    const events = yield* Events

    const findAllocation = (developerId: string, grantId: string) =>
      sql.unsafe<AllocationRow>(
        `SELECT ${ALLOCATION_COLUMNS} FROM budget_allocations WHERE grant_id = $1 AND developer_id = $2`,
        [grantId, developerId]
      ).pipe(Effect.map((rows) => rows[0]), Effect.orDie)

    const allocate: BudgetsService["allocate"] = (developerId, input) =>
      Effect.gen(function*() {
        const grant = yield* grants.find(developerId, input.grantId)
        if (grant === undefined) return yield* Effect.fail(new NotFound({ message: "Grant not found" }))
        const ms = yield* nowMillis
        const at = new Date(ms)
        const amount = amountText(input.initialBudget)
        const rows = yield* sql.unsafe<AllocationRow>(
          `INSERT INTO budget_allocations (id, grant_id, developer_id, initial_budget, remaining_budget, currency, created_at, updated_at)
           VALUES ($1, $2, $3, $4::numeric, $4::numeric, $5, $6, $6)
           ON CONFLICT (grant_id) DO NOTHING
           RETURNING ${ALLOCATION_COLUMNS}`,
          [newId("bdg", ms), grant.id, developerId, amount, input.currency ?? "USD", at]
        ).pipe(
          Effect.catchIf(isUniqueViolation, () => Effect.succeed([] as ReadonlyArray<AllocationRow>)),
          Effect.orDie
        )
        if (rows.length === 0) {
          return yield* Effect.fail(new Conflict({ message: "A budget is already allocated to this grant" }))
        }
        return allocationView(rows[0]!)
      })

    const debit: BudgetsService["debit"] = (developerId, input) =>
      sql.withTransaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        const at = new Date(ms)
        const amount = amountText(input.amount)
        const updated = yield* sql.unsafe<{ id: string; initialBudget: string; remainingBudget: string }>(
          `UPDATE budget_allocations a
              SET remaining_budget = a.remaining_budget - $1::numeric, updated_at = $4
            WHERE a.grant_id = $2 AND a.developer_id = $3 AND a.remaining_budget >= $1::numeric
              AND EXISTS (SELECT 1 FROM grants g WHERE g.id = a.grant_id AND g.status = 'active' AND g.expires_at > $4)
            RETURNING a.id, a.initial_budget::text AS initial_budget, a.remaining_budget::text AS remaining_budget`,
          [amount, input.grantId, developerId, at]
        )
        const row = updated[0]
        if (row === undefined) {
          // Nothing debited: say why (no allocation, inactive grant, or not enough left).
          const state = yield* sql<{ remainingBudget: string; status: string; expiresAt: Date }>`
            SELECT a.remaining_budget::text AS remaining_budget, g.status, g.expires_at
            FROM budget_allocations a JOIN grants g ON g.id = a.grant_id
            WHERE a.grant_id = ${input.grantId} AND a.developer_id = ${developerId}`
          const current = state[0]
          if (current === undefined) return yield* Effect.fail(notFound())
          if (current.status !== "active" || current.expiresAt.getTime() <= ms) {
            return yield* Effect.fail(new GrantNotActive({ message: "The grant is revoked or expired" }))
          }
          return yield* Effect.fail(new InsufficientBudget({ message: `Insufficient budget: ${toNumber(current.remainingBudget)} remaining` }))
        }
        const transactionId = newId("btx", ms)
        yield* sql`
          INSERT INTO budget_transactions (id, allocation_id, grant_id, developer_id, amount, remaining_after, description, metadata, created_at)
          VALUES (${transactionId}, ${row.id}, ${input.grantId}, ${developerId}, ${amount}::numeric, ${row.remainingBudget}::numeric,
                  ${input.description ?? null}, ${JSON.stringify(input.metadata ?? {})}::jsonb, ${at})`
        const initial = toUnits(row.initialBudget)
        const after = toUnits(row.remainingBudget)
        const before = after + toUnits(amount)
        for (const pct of crossedThresholds(initial, before, after)) {
          yield* events.emit(developerId, "budget.threshold", { grantId: input.grantId, pct })
        }
        if (after === 0n) yield* events.emit(developerId, "budget.exhausted", { grantId: input.grantId })
        return { remaining: toNumber(row.remainingBudget), transactionId, grantId: input.grantId }
      })).pipe(Effect.catchTag("SqlError", Effect.die))

    const balance: BudgetsService["balance"] = (developerId, grantId) =>
      Effect.flatMap(findAllocation(developerId, grantId), (row) =>
        row === undefined ? Effect.fail(notFound()) : Effect.succeed(balanceView(row)))

    const transactions: BudgetsService["transactions"] = (developerId, grantId, page) =>
      Effect.gen(function*() {
        const limit = pageLimit(page.limit)
        if (limit === undefined) return yield* Effect.fail(new BadRequest({ message: "limit must be an integer from 1 to 100" }))
        const cursor = decodeCursor(page.cursor)
        if (cursor === null) return yield* Effect.fail(new BadRequest({ message: "cursor is malformed" }))
        const allocation = yield* findAllocation(developerId, grantId)
        if (allocation === undefined) return yield* Effect.fail(notFound())
        const rows = yield* sql.unsafe<TransactionRow>(
          `SELECT id, grant_id, amount::text AS amount, remaining_after::text AS remaining_after, description, metadata, created_at
             FROM budget_transactions
            WHERE grant_id = $1 ${cursor ? "AND (created_at, id) < ($3::timestamptz, $4)" : ""}
            ORDER BY created_at DESC, id DESC
            LIMIT $2`,
          // by grant (one allocation per grant): the column budget_transactions_list indexes, so a page
          // never scans other grants' transactions
          cursor ? [grantId, limit + 1, cursor.createdAt, cursor.id] : [grantId, limit + 1]
        ).pipe(Effect.orDie)
        const { page: items, nextCursor } = toPage(rows, limit)
        return { transactions: items.map(transactionView), nextCursor }
      })

    const allocations: BudgetsService["allocations"] = (developerId, page) =>
      sql.unsafe<AllocationRow>(
        `SELECT ${ALLOCATION_COLUMNS} FROM budget_allocations
          WHERE developer_id = $1 ${page.cursor ? "AND (created_at, id) < ($3::timestamptz, $4)" : ""}
          ORDER BY created_at DESC, id DESC
          LIMIT $2`,
        page.cursor ? [developerId, page.limit + 1, page.cursor.createdAt, page.cursor.id] : [developerId, page.limit + 1]
      ).pipe(
        Effect.map((rows) => {
          const { page: items, nextCursor } = toPage(rows, page.limit)
          return { allocations: items.map(allocationView), nextCursor }
        }),
        Effect.orDie
      )

    const remaining: BudgetsService["remaining"] = (grantId) =>
      sql<{ remainingBudget: string }>`SELECT remaining_budget::text AS remaining_budget FROM budget_allocations WHERE grant_id = ${grantId}`.pipe(
        Effect.map((rows) => rows[0] === undefined ? undefined : toNumber(rows[0].remainingBudget)),
        Effect.orDie
      )

    return { allocate, debit, balance, transactions, allocations, remaining }
  })
)

/** The capability's services, provided to its handlers and to other capabilities. */
/** needs Grants, composed in src/Server.ts */
export const BudgetsLive = BudgetsServiceLive
