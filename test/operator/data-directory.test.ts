/**
 * One process owns an embedded data directory (issue 31, item 2; decisions §10, revised): a second
 * `serve` or any operator command on a held directory exits 1 naming the holder's pid and writes
 * nothing; the lock goes with its holder, however it ends (SIGTERM, SIGKILL); readiness fails once
 * the directory is removed. Real processes (`bun src/main.ts`), real PGlite on disk.
 */
import { afterAll, describe, expect, test } from "bun:test"
import { spawn } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DataDirectoryHeld, LOCK_FILE, lockDataDirectory } from "../../src/platform/DataDirectory.ts"
import { testPrivateKey, usingRealServers } from "../support/app.ts"
import { runCli, type ServiceProcess, spawnCli } from "./process.ts"

const dirs: Array<string> = []
const children: Array<ServiceProcess> = []
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "aas-datadir-"))
  dirs.push(dir)
  return dir
}
afterAll(async () => {
  for (const c of children) await c.stop("SIGKILL")
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

/** every file under the directory with its size and modification time */
const snapshot = (dir: string) =>
  (readdirSync(dir, { recursive: true }) as Array<string>).sort().map((name) => {
    const st = statSync(join(dir, name))
    return `${name} ${st.size} ${st.mtimeMs}`
  })

const heldLine = (dir: string, pid: number) => `agent-auth: data directory ${dir} is held by pid ${pid}; stop it, or use the API`

describe("in process: the lock itself", () => {
  test("flock: a second lock on a held directory is refused naming the holder; released, it can be taken again", () => {
    const dir = tempDir()
    const held = lockDataDirectory(dir)
    expect(readFileSync(join(dir, LOCK_FILE), "utf8")).toBe(`${process.pid}\n`)
    let refused: unknown
    try {
      lockDataDirectory(dir)
    } catch (e) {
      refused = e
    }
    expect(refused).toBeInstanceOf(DataDirectoryHeld)
    expect((refused as DataDirectoryHeld).message).toBe(`data directory ${dir} is held by pid ${process.pid}; stop it, or use the API`)
    held.release()
    expect(readFileSync(join(dir, LOCK_FILE), "utf8")).toBe("")
    lockDataDirectory(dir).release()
  })

  test("the pid-file stand-in (no flock): a live holder's pid refuses, a dead one's is taken over", async () => {
    const dir = tempDir()
    const sleeper = spawn("sleep", ["30"])
    try {
      const held = lockDataDirectory(dir, null)
      held.release()
      await Bun.write(join(dir, LOCK_FILE), `${sleeper.pid}\n`)
      expect(() => lockDataDirectory(dir, null)).toThrow(`is held by pid ${sleeper.pid}; stop it, or use the API`)
    } finally {
      sleeper.kill("SIGKILL")
      await new Promise((resolve) => sleeper.once("exit", resolve))
    }
    const again = lockDataDirectory(dir, null)
    expect(readFileSync(join(dir, LOCK_FILE), "utf8")).toBe(`${process.pid}\n`)
    again.release()
  })
})

// embedded directories only: the run against PostgreSQL and Redis need not repeat these processes
test.skipIf(usingRealServers)("two processes on one directory: the second serve and every operator command exit 1 naming the holder, writing nothing; the lock goes with its holder", async () => {
  const dir = tempDir()
  const env = { DATABASE_URL: `pglite://${dir}`, REDIS_URL: "memory://", RSA_PRIVATE_KEY: testPrivateKey(), HOST: "127.0.0.1", PORT: "0", LOG_LEVEL: "info" }
  const first = spawnCli(["serve"], env)
  children.push(first)
  const url = await first.listening()
  const signup = await fetch(`${url}/v1/signup`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: "first" }) })
  expect(signup.status).toBe(201)
  const developerId = ((await signup.json()) as { developerId: string }).developerId
  expect(readFileSync(join(dir, LOCK_FILE), "utf8")).toBe(`${first.pid}\n`)

  // the holder is paused (its lock stays): any change to the directory from here on is the intruders'
  process.kill(first.pid, "SIGSTOP")
  const before = snapshot(dir)
  const second = await runCli(["serve"], env)
  expect([second.code, second.stderr]).toEqual([1, heldLine(dir, first.pid) + "\n"])
  expect(second.stdout).not.toContain("listening")
  const commands = [["migrate"], ["developers", "create", "--name", "Beside", "--email", "beside@example.com"], ["developers", "set-plan", developerId, "pro"], ["vault", "rekey"]]
  const answers = await Promise.all(commands.map((args) => runCli(args, { DATABASE_URL: env.DATABASE_URL })))
  expect(answers.map((a, i) => [commands[i]!.join(" "), a.code, a.stderr])).toEqual(commands.map((args) => [args.join(" "), 1, heldLine(dir, first.pid) + "\n"]))
  // nothing of the directory changed: not a file, not a byte, not a modification time
  expect(snapshot(dir)).toEqual(before)
  process.kill(first.pid, "SIGCONT")
  const me = await fetch(`${url}/health/ready`)
  expect(me.status).toBe(200)

  // SIGTERM: the holder exits 0 and its lock with it; the directory has exactly the holder's writes
  expect(await first.stop("SIGTERM")).toBe(0)
  expect(readFileSync(join(dir, LOCK_FILE), "utf8")).toBe("")
  const listed = await runCli(["developers", "list"], { DATABASE_URL: env.DATABASE_URL })
  expect(listed.code).toBe(0)
  expect(listed.stdout.trim().split("\n").slice(1).map((l) => l.split(/\s+/)[0])).toEqual([developerId])
  expect(listed.stdout).toMatch(new RegExp(`^${developerId}\\s+-\\s+free\\s`, "m"))

  // SIGKILL: the kernel drops the lock; the pid left in the file does not stop the next start
  const killed = spawnCli(["serve"], env)
  children.push(killed)
  await killed.listening()
  expect(await killed.stop("SIGKILL")).not.toBe(0)
  expect(readFileSync(join(dir, LOCK_FILE), "utf8")).toBe(`${killed.pid}\n`)
  const next = spawnCli(["serve"], env)
  children.push(next)
  const nextUrl = await next.listening()
  expect(readFileSync(join(dir, LOCK_FILE), "utf8")).toBe(`${next.pid}\n`)
  expect((await fetch(`${nextUrl}/health/ready`)).status).toBe(200)
  expect(await next.stop()).toBe(0)
}, 240_000)

test.skipIf(usingRealServers)("readiness fails once the data directory is removed (and /health names the database)", async () => {
  const dir = tempDir()
  const env = { DATABASE_URL: `pglite://${dir}`, REDIS_URL: "memory://", RSA_PRIVATE_KEY: testPrivateKey(), HOST: "127.0.0.1", PORT: "0", LOG_LEVEL: "info" }
  const service = spawnCli(["serve"], env)
  children.push(service)
  const url = await service.listening()
  const ready = await fetch(`${url}/health/ready`)
  expect(ready.status).toBe(200)
  expect(await fetch(`${url}/health`).then((r) => r.json())).toEqual({ status: "ok" })

  rmSync(dir, { recursive: true, force: true })
  const after = await fetch(`${url}/health/ready`)
  expect(after.status).toBe(503)
  const body = (await after.json()) as { status: string; checks: Record<string, string> }
  expect([body.status, body.checks.db, body.checks.redis]).toEqual(["not_ready", "unavailable", "ok"])
  const health = await fetch(`${url}/health`)
  expect([health.status, await health.json()]).toEqual([503, { status: "degraded", failing: ["db"] }])
  // once, with the reason
  await service.waitFor((l) => l.message === "dependency unavailable" && l.dependency === "db", 5_000)
  expect(service.lines.filter((l) => l.message === "dependency unavailable")).toEqual([
    expect.objectContaining({ level: "warn", dependency: "db", reason: "data directory removed" })
  ])
  expect(await service.stop()).toBe(0)
}, 120_000)
