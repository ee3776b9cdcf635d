/**
 * What an operator needs to know what runs (issue 31, item 4): `--version` and /health/ready name the
 * version, git commit and build time; start-up logs the migrations it applied; the access line
 * carries the client address as the rate limiter sees it (after TRUST_PROXY).
 */
import { afterAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pkg from "../../package.json" with { type: "json" }
import { migrations } from "../../sql/index.ts"
import { createDatabase, startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { runCli } from "./process.ts"

const head = (await Bun.$`git rev-parse HEAD`.text()).trim()

/** console.log lines written while `f` runs, parsed */
const captured = async <A>(f: () => Promise<A>): Promise<{ value: A; lines: Array<any> }> => {
  const lines: Array<any> = []
  const original = console.log
  console.log = (...args: Array<unknown>) => {
    for (const arg of args) {
      try {
        lines.push(JSON.parse(String(arg)))
      } catch {
        // not a log line
      }
    }
  }
  try {
    return { value: await f(), lines }
  } finally {
    console.log = original
  }
}

describe("version, commit, build time", () => {
  test("--version from source: the checkout's commit, built \"source\"", async () => {
    expect(head).toMatch(/^[0-9a-f]{40}$/)
    const { stdout, stderr, code } = await runCli(["--version"], {})
    expect([code, stderr, stdout]).toEqual([0, "", `agent-auth ${pkg.version} (commit ${head}, built source)\n`])
  })

  test("what the build bakes in (its --define, as scripts/build.ts passes them) is what --version says", async () => {
    const child = Bun.spawn([process.execPath, "--define", 'AGENT_AUTH_COMMIT="0123456789abcdef0123456789abcdef01234567"', "--define", 'AGENT_AUTH_BUILT_AT="2026-11-27T09:00:00.000Z"', "src/main.ts", "--version"], {
      env: { PATH: process.env.PATH ?? "" },
      stdout: "pipe",
      stderr: "pipe"
    })
    const [stdout, code] = await Promise.all([new Response(child.stdout).text(), child.exited])
    expect([code, stdout]).toEqual([0, `agent-auth ${pkg.version} (commit 0123456789abcdef0123456789abcdef01234567, built 2026-11-27T09:00:00.000Z)\n`])
  })

  test("/health/ready names them", async () => {
    const app = await startTestApp()
    try {
      const ready = await app.request("GET", "/health/ready")
      expect([ready.status, ready.body]).toEqual([200, {
        status: "ready",
        version: pkg.version,
        commit: head,
        builtAt: "source",
        checks: { db: "ok", redis: "ok", migrations: "ok" }
      }])
    } finally {
      await app.stop()
    }
  })
})

describe("start-up logs the migrations it applied", () => {
  const dir = usingRealPostgres ? undefined : mkdtempSync(join(tmpdir(), "aas-migrations-"))
  afterAll(() => dir !== undefined && rmSync(dir, { recursive: true, force: true }))

  test("a new database: one line naming every migration, in order; the next start: none pending", async () => {
    const db = usingRealPostgres ? await createDatabase() : { url: `pglite://${dir}`, drop: async () => {} }
    try {
      const first = await captured(() => startTestApp({ databaseUrl: db.url, env: { LOG_LEVEL: "info" } }))
      await first.value.stop()
      const names = Object.keys(migrations).sort()
      expect(names.length).toBeGreaterThan(20)
      expect(first.lines.filter((l) => /migration/.test(l.message))).toEqual([
        expect.objectContaining({ level: "info", message: "migrations applied", count: names.length, migrations: names })
      ])
      const second = await captured(() => startTestApp({ databaseUrl: db.url, env: { LOG_LEVEL: "info" } }))
      await second.value.stop()
      expect(second.lines.filter((l) => /migration/.test(l.message)).map((l) => [l.level, l.message])).toEqual([["info", "no pending migrations"]])
    } finally {
      await db.drop()
    }
  }, 120_000)
})

describe("the access line's client address", () => {
  const lines: Array<any> = []
  const original = console.log
  let trusted: TestApp
  let direct: TestApp
  afterAll(async () => {
    console.log = original
    await trusted?.stop()
    await direct?.stop()
  })

  test("after TRUST_PROXY, the address the limiter counts: API path, lean path, health, refusals", async () => {
    console.log = (...args: Array<unknown>) => {
      for (const arg of args) {
        try {
          lines.push(JSON.parse(String(arg)))
        } catch {
          // not a log line
        }
      }
    }
    trusted = await startTestApp({ env: { LOG_LEVEL: "info", TRUST_PROXY: "1", RATE_LIMIT_SIGNUP_PER_HOUR: "1" } })
    direct = await startTestApp({ env: { LOG_LEVEL: "info" } })
    const from = (address: string, id: string) => ({ headers: { "x-forwarded-for": `198.51.100.1, ${address}`, "x-request-id": id } })
    // the sign-up limit is per address per hour: the second from one address is refused, another address is not
    const a1 = await trusted.request("POST", "/v1/signup", { body: { name: "a" }, ...from("203.0.113.7", "cl-a1") })
    const a2 = await trusted.request("POST", "/v1/signup", { body: { name: "a" }, ...from("203.0.113.7", "cl-a2") })
    const b1 = await trusted.request("POST", "/v1/signup", { body: { name: "b" }, ...from("203.0.113.8", "cl-b1") })
    expect([a1.status, a2.status, b1.status]).toEqual([201, 429, 201])
    await trusted.request("GET", "/v1/me", { apiKey: a1.body.apiKey, ...from("203.0.113.9", "cl-me") })
    await trusted.request("GET", "/health/live", from("203.0.113.10", "cl-live"))
    await trusted.request("GET", "/health", from("203.0.113.11", "cl-health"))
    // without TRUST_PROXY the header is not believed: the socket's peer
    await direct.request("GET", "/v1/me", { headers: { "x-forwarded-for": "203.0.113.12", "x-request-id": "cl-direct" } })
    const client = (id: string) => lines.filter((l) => l.message === "request" && l.requestId === id).map((l) => [l.status, l.client])
    expect([client("cl-a1"), client("cl-a2"), client("cl-b1"), client("cl-me"), client("cl-live"), client("cl-health"), client("cl-direct")]).toEqual([
      [[201, "203.0.113.7"]],
      [[429, "203.0.113.7"]],
      [[201, "203.0.113.8"]],
      [[200, "203.0.113.9"]],
      [[200, "203.0.113.10"]],
      [[200, "203.0.113.11"]],
      [[401, "127.0.0.1"]]
    ])
  })
})
