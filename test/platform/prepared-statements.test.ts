/**
 * Issue 27: parameterised statements are prepared once per connection and reused (PostgreSQL
 * plans them once), a bounded number per process, and a plan invalidated by a schema change
 * falls back to an unnamed statement instead of failing from then on.
 */
import { describe, expect, test } from "bun:test"
import { Effect, Scope } from "effect"
import { acquirePool, MAX_PREPARED, PLAN_EACH_TIME, statementName } from "../../src/platform/PgPool.ts"
import { createDatabase } from "../support/app.ts"

const real = process.env.TEST_DATABASE_URL !== undefined

describe("prepared statements", () => {
  test("a text is named from its second use, always the same name", () => {
    const text = `SELECT $1::int AS n -- ${Math.random()}`
    expect(statementName(text)).toBeUndefined()
    const name = statementName(text)
    expect(name).toMatch(/^aas_[A-Za-z0-9_-]{22}$/)
    expect(statementName(text)).toBe(name!)
    expect(MAX_PREPARED).toBeLessThanOrEqual(300)
  })

  test("a statement marked to be planned each time is never named, however often it runs", () => {
    const text = `${PLAN_EACH_TIME}SELECT $1::int AS n -- ${Math.random()}`
    for (let i = 0; i < 10; i++) expect(statementName(text)).toBeUndefined()
  })

  test.skipIf(!real)("a repeated query is prepared once on its connection and stays correct after a schema change", async () => {
    const db = await createDatabase()
    const scope = Effect.runSync(Scope.make())
    try {
      const pool = await Effect.runPromise(Scope.extend(acquirePool({ connectionString: db.url, max: 1 }, true), scope))
      await pool.query("CREATE TABLE things (id int PRIMARY KEY, label text)")
      await pool.query("INSERT INTO things VALUES (1, 'one'), (2, 'two')")
      const text = "SELECT * FROM things WHERE id = $1"
      for (const id of [1, 2, 1]) expect((await pool.query(text, [id])).rows[0].id).toBe(id)
      const prepared = await pool.query("SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement = $1", [text])
      expect(prepared.rows[0].n).toBe(1)
      // the result type changes under the prepared plan: the next use still answers, with the new column
      await pool.query("ALTER TABLE things ADD COLUMN extra text DEFAULT 'x'")
      const after = await new Promise<any>((resolve, reject) => pool.query(text, [2], (e, r) => (e ? reject(e) : resolve(r))))
      expect(after.rows[0]).toEqual({ id: 2, label: "two", extra: "x" })
      expect((await pool.query(text, [1])).rows[0]).toEqual({ id: 1, label: "one", extra: "x" })
    } finally {
      await Effect.runPromise(Scope.close(scope, { _tag: "Success", value: undefined } as any))
      await db.drop()
    }
  })
})
