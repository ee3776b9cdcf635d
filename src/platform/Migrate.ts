/**
 * Applies pending migrations with @effect/sql's Migrator. The whole run holds a transaction-level
 * advisory lock, so two instances starting together apply each migration exactly once (the
 * second waits, then finds nothing left to do).
 */
import { Migrator } from "@effect/sql"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { migrations } from "../../sql/index.ts"

const MIGRATION_LOCK = 727274001

const migrator = Migrator.make({})

export const runMigrations = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const loader = Migrator.fromRecord(
    Object.fromEntries(Object.entries(migrations).map(([name, text]) => [name, sql.unsafe(text).raw]))
  )
  return yield* sql.withTransaction(
    Effect.zipRight(
      Effect.zipRight(
        sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`,
        // Created here (the Migrator's own probe would abort this transaction when the table is missing).
        sql`CREATE TABLE IF NOT EXISTS schema_migrations (
              migration_id integer PRIMARY KEY,
              created_at timestamptz NOT NULL DEFAULT now(),
              name text NOT NULL)`
      ),
      migrator({ loader, table: "schema_migrations" })
    )
  )
})
