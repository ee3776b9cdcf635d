/**
 * Operator commands of the binary beyond serve/migrate. Each runs against the configured database
 * and answers one line. Capabilities register theirs here.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AppConfig } from "./Config.ts"
import { billingCommands } from "./billing/Commands.ts"
import { Events, EventsLive } from "./platform/Events.ts"
import { rekeyCommand } from "./vault/Rekey.ts"

export type OperatorCommand = (args: ReadonlyArray<string>, config: AppConfig) => Effect.Effect<string, Error, any>

const setPlan: OperatorCommand = ([developerId, plan]) =>
  Effect.gen(function*() {
    if (developerId === undefined || plan === undefined) {
      return yield* Effect.fail(new Error("usage: agent-auth developers set-plan <developerId> <plan>"))
    }
    const sql = yield* SqlClient.SqlClient
    // decisions §16: any plan in the plans table (seeded, or added by PLANS_FILE at the last start)
    const known = yield* sql<{ code: string }>`SELECT code FROM plans ORDER BY code`.pipe(Effect.mapError((e) => new Error(`database error: ${e.message}`)))
    if (!known.some((p) => p.code === plan)) {
      return yield* Effect.fail(new Error(`unknown plan "${plan}"; the plans are ${known.map((p) => p.code).join(", ")}`))
    }
    // the change and its billing.subscription.updated event commit together (decisions §16)
    const rows = yield* sql.withTransaction(Effect.gen(function*() {
      const rows = yield* sql`UPDATE developers SET plan = ${plan!}, updated_at = now() WHERE id = ${developerId} RETURNING id`
      if (rows.length > 0) {
        const events = yield* Events
        yield* events.emit(developerId, "billing.subscription.updated", { plan: plan!, status: "active" })
      }
      return rows
    })).pipe(
      Effect.provide(EventsLive),
      Effect.mapError((e) => new Error(`database error: ${e.message}`))
    )
    if (rows.length === 0) return yield* Effect.fail(new Error(`no developer ${developerId}`))
    return `developer ${developerId} is now on the ${plan} plan`
  })

export const operatorCommands: Record<string, OperatorCommand> = {
  "developers set-plan": setPlan,
  "vault rekey": rekeyCommand,
  "billing set-plan": setPlan,
  ...billingCommands
}
