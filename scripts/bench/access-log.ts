// Small load loop: GET /v1/agents with an API key (gate + one cached key lookup) at LOG_LEVEL none vs info.
// Run: bun scripts/bench/access-log.ts <none|info> [path] > /dev/null   (figures on stderr)
// (run on its own only: it exports no `run`, so `npm run bench` skips it instead of exiting with it)
import { startTestApp } from "../../test/support/app.ts"
import { BENCH_RATE_LIMIT_SCALE, cpuCell, makeCpuTally } from "./support.ts"

const main = async () => {
  const level = process.argv[2] ?? "none"
  const app = await startTestApp({ env: { LOG_LEVEL: level, RATE_LIMIT_SCALE: BENCH_RATE_LIMIT_SCALE } })
  const dev = await app.signup({ plan: "enterprise" })
  const hit = () => fetch(app.url + (process.argv[3] ?? "/v1/agents"), { headers: { authorization: `Bearer ${dev.apiKey}` } }).then((r) => r.text())
  for (let i = 0; i < 2000; i++) await hit()
  const rounds: Array<number> = []
  const cpu = makeCpuTally()
  for (let r = 0; r < 5; r++) {
    const t = performance.now()
    await cpu.during(async () => {
      for (let i = 0; i < 40; i++) await Promise.all(Array.from({ length: 50 }, hit))
    }, () => 2000)
    rounds.push(2000 / ((performance.now() - t) / 1000))
  }
  rounds.sort((a, b) => a - b)
  process.stderr.write(`${level}: median ${rounds[2]!.toFixed(0)} req/s (rounds ${rounds.map((x) => x.toFixed(0)).join(", ")}); CPU per request µs, event loop / machine ${cpuCell(cpu.perRequest())}\n`)
  await app.stop()
  process.exit(0)
}

if (import.meta.main) await main()
