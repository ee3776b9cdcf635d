/**
 * The erasure map (decisions §21) against the database's own columns: a column that looks like a
 * principal id and is neither erased nor named as holding none fails this test, so a new table
 * cannot skip erasure.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { ERASURE_MAP, JSON_WITH_PRINCIPAL_IDS, NOT_PRINCIPAL_IDS } from "../../src/dpdp/ErasureMap.ts"
import { startTestApp, type TestApp } from "../support/app.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.stop())

/** the columns named like a principal id, and those of them the map does not account for */
const check = async () => {
  const columns = await app.query<{ tableName: string; columnName: string }>(
    `SELECT c.table_name, c.column_name FROM information_schema.columns c
     JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'
     WHERE c.table_schema = current_schema()
       AND (c.column_name LIKE '%principal%' OR c.column_name IN ('user_id', 'user_name', 'userid', 'username') OR c.column_name LIKE '%nominee%')
     ORDER BY c.table_name, c.column_name`)
  const known = new Set([...ERASURE_MAP, ...NOT_PRINCIPAL_IDS].map((e) => `${e.table}.${e.column}`))
  const names = columns.map((c) => `${c.tableName}.${c.columnName}`)
  return { names, missing: names.filter((c) => !known.has(c)) }
}

test("every column named like a principal id (principal, user_id, user_name, nominee) is in the erasure map or known to hold none", async () => {
  const { names, missing } = await check()
  expect(names.length).toBeGreaterThan(20)
  expect(missing).toEqual([])
  // and the map names no column that does not exist (a renamed column would be erased by nothing)
  const present = new Set(names)
  const stale = [...ERASURE_MAP, ...NOT_PRINCIPAL_IDS].filter((e) => !JSON_WITH_PRINCIPAL_IDS.some((j) => j.table === e.table && j.column === e.column))
    .map((e) => `${e.table}.${e.column}`).filter((c) => !present.has(c))
  expect(stale).toEqual([])
})

test("a table added with a principal_id column fails the check", async () => {
  await app.query("CREATE TABLE erasure_map_probe (id text PRIMARY KEY, principal_id text)")
  try {
    expect((await check()).missing).toEqual(["erasure_map_probe.principal_id"])
  } finally {
    await app.query("DROP TABLE erasure_map_probe")
  }
})
