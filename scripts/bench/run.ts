/**
 * npm run bench: runs every benchmark in scripts/bench/ in turn, prints each one's figures next to
 * its floor, then all of them as one table, and writes them as JSON to bench-results.json.
 */
import { readdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { currentBench, printedRows } from "./support.ts"

const dir = import.meta.dir
const only = process.argv.slice(2)
const files = readdirSync(dir)
  .filter((f) => f.endsWith(".ts") && !["run.ts", "support.ts", "floors.ts"].includes(f))
  .filter((f) => only.length === 0 || only.some((o) => f.startsWith(o)))
  .sort()
const all: Record<string, unknown> = {
  startedAt: new Date().toISOString(),
  database: process.env.TEST_DATABASE_URL ? "postgresql" : "pglite",
  counters: process.env.TEST_REDIS_URL ? "redis" : "memory"
}
for (const file of files) {
  const name = file.replace(/\.ts$/, "")
  console.log(`\n### ${name}`)
  currentBench.name = name
  try {
    const mod = await import(join(dir, file))
    if (typeof mod.run !== "function") continue
    all[name] = await mod.run()
  } catch (e) {
    console.log(`  failed: ${e instanceof Error ? e.message : String(e)}`)
    all[name] = { error: String(e) }
  }
}
// every figure again as one table (Markdown, so it pastes into the README)
console.log("\n| bench | figure | value | floor (same run) | verdict |\n| - | - | - | - | - |")
for (const r of printedRows) console.log(`| ${r.bench} | ${r.name} | ${r.value} | ${r.floor} | ${r.verdict} |`)
all.table = printedRows
writeFileSync("bench-results.json", JSON.stringify(all, null, 2))
console.log("\nfigures written to bench-results.json")
process.exit(0)
