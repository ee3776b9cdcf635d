/**
 * A developer's plan changes, kept with their time (decisions §16, revised), so a period's invoice
 * prices each part of the month at the plan in force then (billing/Invoices.ts). The change and its
 * history row commit together; setting the plan a developer already has keeps no row.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** In a transaction: sets the plan and keeps the change; false when there is no such developer. */
export const changePlan = (developerId: string, plan: string, at: Date) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(Effect.gen(function*() {
      const [before] = yield* sql<{ plan: string }>`SELECT plan FROM developers WHERE id = ${developerId} FOR UPDATE`
      if (before === undefined) return false
      yield* sql`UPDATE developers SET plan = ${plan}, updated_at = ${at} WHERE id = ${developerId}`
      if (before.plan !== plan) {
        yield* sql`INSERT INTO plan_changes (developer_id, changed_at, from_plan, to_plan) VALUES (${developerId}, ${at}, ${before.plan}, ${plan})`
      }
      return true
    }))
  })
