/** Budgets (placeholder: endpoints land with the capability). */
import { HttpApiGroup } from "@effect/platform"

export class BudgetsApi extends HttpApiGroup.make("budgets") {}
