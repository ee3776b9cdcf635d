/**
 * Issue 37, memory: the service's resident memory in real mode, measured on a process of its own
 * (the built binary `dist/agent-auth` when there is one, else `bun src/main.ts serve`), idle after
 * start and under a mixed load of signups, agents, authorizes, token exchanges and verifies sent
 * from this process. Targets: ≤ 120 MB idle, ≤ 180 MB under load. Needs TEST_DATABASE_URL and
 * TEST_REDIS_URL (real mode); embedded mode is printed as such when they are absent.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createDatabase } from "../../test/support/app.ts"
import { BENCH_RATE_LIMIT_SCALE, load, postJson, row } from "./support.ts"

const rssMb = (pid: number) => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024)
}

const waitForHealth = async (url: string) => {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${url}/health`)).ok) return
    } catch {}
    await Bun.sleep(100)
  }
  throw new Error("the service did not answer /health within 30 s")
}

export async function run() {
  const real = process.env.TEST_DATABASE_URL !== undefined && process.env.TEST_REDIS_URL !== undefined
  const db = await createDatabase()
  const binary = process.env.BENCH_BINARY ?? join(import.meta.dir, "../../dist/agent-auth")
  const command = existsSync(binary) ? [binary, "serve"] : [process.execPath, join(import.meta.dir, "../../src/main.ts"), "serve"]
  const port = 3900 + Math.floor(Math.random() * 90)
  const home = mkdtempSync(join(tmpdir(), "aas-memory-"))
  const child = spawn(command[0]!, command.slice(1), {
    cwd: home,
    stdio: "ignore",
    env: {
      PATH: process.env.PATH, HOME: home, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "none",
      DATABASE_URL: db.url, REDIS_URL: process.env.TEST_REDIS_URL ?? "memory://", AUTO_GENERATE_KEYS: "true",
      RATE_LIMIT_SCALE: BENCH_RATE_LIMIT_SCALE, REDIS_KEY_PREFIX: `benchmem_${Math.random().toString(36).slice(2, 8)}:`,
      // the engine's own settings (BUN_JSC_*), to compare heap policies
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("BUN_JSC_")))
    }
  })
  const url = `http://127.0.0.1:${port}`
  try {
    await waitForHealth(url)
    await Bun.sleep(3000)
    const idle = rssMb(child.pid!)
    const json = postJson(url)
    const { apiKey } = await json("/v1/signup", { name: "bench", mode: "sandbox" })
    const agent = await json("/v1/agents", { name: "bench", scopes: ["email:read"] }, apiKey)
    let peak = idle
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(child.pid!))), 200)
    const mixed = await load(async () => {
      const { code } = await json("/v1/authorize", { agentId: agent.agentId, principalId: `p${Math.random()}`, scopes: ["email:read"] }, apiKey)
      const { grantToken } = await json("/v1/token", { code, agentId: agent.agentId }, apiKey)
      const verified = await json("/v1/tokens/verify", { token: grantToken }, apiKey)
      return verified.valid === true
    }, { seconds: 10, concurrency: 16 })
    clearInterval(sampler)
    await Bun.sleep(10_000)
    const after = rssMb(child.pid!)
    const what = `${command[0] === process.execPath ? "bun src/main.ts" : "binary"}, ${real ? "real mode" : "embedded mode"}`
    row(`resident memory idle after start (${what})`, `${idle} MB`, "120 MB (target)", idle <= 120 ? "met" : "over")
    row(`resident memory under load, peak (${what}; ${mixed.perSecond} chains/s)`, `${peak} MB`, "180 MB (target)", peak <= 180 ? "met" : "over")
    row("resident memory 10 s of load later", `${after} MB`, "")
    return { idle, peak, after, chainsPerSecond: mixed.perSecond, errors: mixed.errors, real }
  } finally {
    child.kill("SIGTERM")
    await new Promise((resolve) => child.once("exit", resolve))
    await db.drop()
  }
}

if (import.meta.main) await run()
