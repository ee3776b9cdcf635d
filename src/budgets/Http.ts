import { HttpApiBuilder } from "@effect/platform"
import { Api } from "../Api.ts"

export const BudgetsHttp = HttpApiBuilder.group(Api, "budgets", (handlers) => handlers)
