/**
 * npm run bench: runs every benchmark in scripts/bench/ in turn, prints each one's figures next to
 * its floor, then all of them as one table, and writes them as JSON to bench-results.json.
 * `npm run bench -- light-reads health` runs the files whose names start so. How figures are
 * measured (the service in its own process, wrk, CPU from /proc/<pid>): support.ts and the README.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
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
  counters: process.env.TEST_REDIS_URL ? "redis" : "memory",
  // where the service under test runs (support.ts): its own process needs a database other processes reach
  service: process.env.TEST_DATABASE_URL && process.env.BENCH_IN_PROCESS !== "true" ? "own process" : "the bench's process (embedded)",
  loadAverage: !existsSync("/proc/loadavg") ? "n/a" : readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")
}
console.log(`service under test: ${all.service}; load average before the run: ${all.loadAverage} (figures taken on a busy machine are noisy)`)
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
