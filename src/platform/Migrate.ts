/**
 * Applies pending migrations. The whole run holds a transaction-level advisory lock, so two
 * instances starting together apply each migration exactly once (the second waits, then finds
 * nothing left to do).
 *
 * Pending means every migration not recorded in schema_migrations, in number order: not only those
 * numbered above the latest applied (@effect/sql's Migrator's rule). Work merged from parallel
 * branches can add a lower number after a higher one was applied; the readiness probe already counts
 * such a one as pending (Dependencies.ts), and now it is applied instead of left out for good.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { migrations } from "../../sql/index.ts"

const MIGRATION_LOCK = 727274001

/** every migration as [number, name, text], in number order (`0037_api_keys` → 37, "api_keys") */
const ALL = Object.entries(migrations)
  .map(([file, text]) => [Number(file.slice(0, file.indexOf("_"))), file.slice(file.indexOf("_") + 1), text] as const)
  .sort((a, b) => a[0] - b[0])

/** answers what it applied, as [number, name] */
export const runMigrations = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return yield* sql.withTransaction(Effect.gen(function*() {
    yield* sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`
    yield* sql`CREATE TABLE IF NOT EXISTS schema_migrations (
                 migration_id integer PRIMARY KEY,
                 created_at timestamptz NOT NULL DEFAULT now(),
                 name text NOT NULL)`
    const applied = new Set((yield* sql<{ migrationId: number }>`SELECT migration_id FROM schema_migrations`).map((r) => Number(r.migrationId)))
    const pending = ALL.filter(([id]) => !applied.has(id))
    for (const [id, name, text] of pending) {
      yield* sql.unsafe(text).raw
      yield* sql`INSERT INTO schema_migrations (migration_id, name) VALUES (${id}, ${name})`
    }
    return pending.map(([id, name]) => [id, name] as const)
  }))
})
