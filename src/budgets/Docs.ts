/** Summaries, descriptions and examples of grant budgets; BudgetsApi carries them. */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { GRANT, T } from "../platform/DocExamples.ts"

const allocation = { id: "bdg_01JDQ9JV9W0XYZABCDEFGHJKMN", grantId: GRANT, initialBudget: 100, remainingBudget: 100, currency: "USD", createdAt: T }

export const BUDGETS_DOCS = {
  allocate: {
    summary: "Allocate a budget to a grant",
    description: "One budget per grant (409 `CONFLICT` for a second). Amounts are JSON numbers with at most 4 decimals. The allocation's `id` is its own; the other budget calls take the `grantId`.",
    request: { grantId: GRANT, initialBudget: 100, currency: "USD" },
    response: allocation
  },
  debit: {
    summary: "Debit a budget",
    description: "Called by your backend before the agent spends: atomic under concurrency, never below zero (402 `INSUFFICIENT_BUDGET`, nothing debited); 409 `GRANT_NOT_ACTIVE` once the grant is revoked or expired. Emits `budget.threshold` when spending crosses 50 % or 80 % and `budget.exhausted` at zero.",
    request: { grantId: GRANT, amount: 12.5, description: "Flight search API", metadata: { provider: "skyscanner" } },
    response: { remaining: 87.5, transactionId: "btx_01JDQ9KW0XYZABCDEFGHJKMNPQ", grantId: GRANT }
  },
  balance: { summary: "Budget balance", description: "Initial, remaining and spent amounts of a grant's budget.", response: { ...allocation, remainingBudget: 87.5, spent: 12.5, updatedAt: T } },
  transactions: {
    summary: "Budget transactions",
    description: "A grant's debits, newest first; page with `cursor` / `limit`.",
    response: { transactions: [{ id: "btx_01JDQ9KW0XYZABCDEFGHJKMNPQ", grantId: GRANT, amount: 12.5, remaining: 87.5, description: "Flight search API", metadata: { provider: "skyscanner" }, createdAt: T }], nextCursor: null }
  },
  allocations: {
    summary: "List budget allocations",
    description: "Every budget you allocated, newest first; page with `cursor` / `limit` (1–100, default 50).",
    response: { allocations: [allocation], nextCursor: null }
  }
} satisfies Record<string, OperationDoc>
