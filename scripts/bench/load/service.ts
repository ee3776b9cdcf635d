/**
 * The service under test, in a process of its own (started by support.ts `startBenchServer`): the
 * same `startServer` as `src/main.ts serve`, configured from the environment, with the benchmark-only
 * options (the gate off, no lean path, no inline anomaly rules, workers) from BENCH_APP_OPTIONS.
 * Prints its URL as one JSON line once it listens; stops on SIGTERM.
 */
import { loadConfig } from "../../../src/Config.ts"
import { type AppOptions, startServer } from "../../../src/Server.ts"

const options = JSON.parse(process.env.BENCH_APP_OPTIONS ?? "{}") as Pick<AppOptions, "workers" | "rateLimit" | "lean" | "anomalies">
const server = await startServer(loadConfig(process.env), options)
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`)
const stop = async () => {
  await server.stop()
  process.exit(0)
}
process.on("SIGTERM", () => void stop())
process.on("SIGINT", () => void stop())
