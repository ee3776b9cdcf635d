/**
 * Budgets attached to grants (interface: BudgetAllocation, POST /v1/budget/allocate; decisions §9).
 *
 * | Operation | Status | Code | Condition |
 * | - | - | - | - |
 * | allocate | 400 | BAD_REQUEST | grantId missing, initialBudget not a positive amount (≤ 4 decimals, ≤ 99999999999.9999) |
 * | allocate | 404 | NOT_FOUND | grant not found or not the developer's |
 * | allocate | 409 | CONFLICT | an allocation already exists for the grant |
 * | debit | 400 | BAD_REQUEST | grantId missing, amount not a positive amount, description > 1000 chars, metadata > 16 KiB |
 * | debit | 402 | INSUFFICIENT_BUDGET | amount exceeds the remaining budget (nothing is debited) |
 * | debit | 404 | NOT_FOUND | no allocation for a grant of this developer |
 * | debit | 409 | GRANT_NOT_ACTIVE | the grant is revoked or expired |
 * | balance, transactions | 404 | NOT_FOUND | no allocation for a grant of this developer |
 * | transactions, allocations | 400 | BAD_REQUEST | malformed cursor or limit |
 * | all | 401 | UNAUTHORIZED | invalid or missing API key |
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, Conflict, GrantNotActive, InsufficientBudget, NotFound } from "../platform/Errors.ts"
import { LimitParam } from "../platform/Pagination.ts"
import { amountProblem } from "./Amount.ts"
import { BoundedMetadata } from "../platform/Metadata.ts"
import { documented } from "../platform/OperationDocs.ts"
import { BUDGETS_DOCS } from "./Docs.ts"

const Amount = Schema.Number.pipe(
  Schema.filter((n) => amountProblem(n) ?? true),
  Schema.annotations({ description: "Positive amount, at most 4 decimals, at most 99999999999.9999" })
)
const GrantId = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))
const Currency = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_-]{1,16}$/, { message: () => "must be 1 to 16 letters, digits, '_' or '-'" })
)
const Metadata = BoundedMetadata

export const BudgetAllocation = Schema.Struct({
  id: Schema.String,
  grantId: Schema.String,
  initialBudget: Schema.Number,
  remainingBudget: Schema.Number,
  currency: Schema.String,
  createdAt: Schema.String
})

export const BudgetBalance = Schema.Struct({
  ...BudgetAllocation.fields,
  spent: Schema.Number,
  updatedAt: Schema.String
})

export const BudgetTransaction = Schema.Struct({
  id: Schema.String,
  grantId: Schema.String,
  amount: Schema.Number,
  remaining: Schema.Number,
  description: Schema.NullOr(Schema.String),
  metadata: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  createdAt: Schema.String
})

export class BudgetsApi extends HttpApiGroup.make("budgets")
  .add(
    HttpApiEndpoint.post("allocate", "/v1/budget/allocate")
      .setPayload(Schema.Struct({ grantId: GrantId, initialBudget: Amount, currency: Schema.optional(Currency) }))
      .addSuccess(BudgetAllocation, { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(NotFound)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.post("debit", "/v1/budget/debit")
      .setPayload(Schema.Struct({
        grantId: GrantId,
        amount: Amount,
        description: Schema.optional(Schema.String.pipe(Schema.maxLength(1000))),
        metadata: Schema.optional(Metadata)
      }))
      .addSuccess(Schema.Struct({ remaining: Schema.Number, transactionId: Schema.String, grantId: Schema.String }))
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(InsufficientBudget)
      .addError(NotFound)
      .addError(GrantNotActive)
  )
  .add(
    HttpApiEndpoint.get("balance", "/v1/budget/balance/:grantId")
      .setPath(Schema.Struct({ grantId: Schema.String }))
      .addSuccess(BudgetBalance)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("transactions", "/v1/budget/transactions/:grantId")
      .setPath(Schema.Struct({ grantId: Schema.String }))
      .setUrlParams(Schema.Struct({ cursor: Schema.optional(Schema.String), limit: LimitParam }))
      .addSuccess(Schema.Struct({ transactions: Schema.Array(BudgetTransaction), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("allocations", "/v1/budget/allocations")
      .setUrlParams(Schema.Struct({ cursor: Schema.optional(Schema.String), limit: LimitParam }))
      .addSuccess(Schema.Struct({ allocations: Schema.Array(BudgetAllocation), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
  )
  .addError(ApiKeyRouteErrors)
  .middleware(Authentication)
  .pipe(documented(BUDGETS_DOCS))
{}
