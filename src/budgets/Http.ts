import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { pageParams } from "../platform/Pagination.ts"
import { Budgets } from "./Service.ts"

export const BudgetsHttp = HttpApiBuilder.group(Api, "budgets", (handlers) =>
  Effect.gen(function*() {
    const budgets = yield* Budgets
    return handlers
      .handle("allocate", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => budgets.allocate(d.id, payload)))
      .handle("debit", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => budgets.debit(d.id, payload)))
      .handle("balance", ({ path }) => Effect.flatMap(CurrentDeveloper, (d) => budgets.balance(d.id, path.grantId)))
      .handle("transactions", ({ path, urlParams }) =>
        Effect.flatMap(CurrentDeveloper, (d) => budgets.transactions(d.id, path.grantId, urlParams)))
      .handle("allocations", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          return yield* budgets.allocations(developer.id, yield* pageParams(urlParams))
        }))
  }))
