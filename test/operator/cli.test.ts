/**
 * The binary as an operator meets it (issue 18, item 5): help generated from the Config table (and
 * the README's table naming the same variables), every command's --help, developers list/show/create,
 * SIGNUP_ENABLED=false, and start-up failures that say why.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { readFileSync } from "node:fs"
import { createServer, type Server } from "node:net"
import { loadConfig, VARIABLES } from "../../src/Config.ts"
import { createDatabase, startTestApp, testPrivateKey, usingRealPostgres, usingRealRedis } from "../support/app.ts"
import { runCli } from "./process.ts"

const run = runCli

/** the variable names of the README's configuration table (`A` / `_B` means A's prefix + _B) */
const readmeVariables = (): Array<string> => {
  const readme = readFileSync("README.md", "utf8")
  const section = readme.slice(readme.indexOf("## Configuration"), readme.indexOf("\n## ", readme.indexOf("## Configuration") + 5))
  const names: Array<string> = []
  for (const row of section.split("\n").filter((l) => l.startsWith("| `"))) {
    const cell = row.split("|")[1]!
    const parts = [...cell.matchAll(/`([A-Z_][A-Z0-9_]*)`/g)].map((m) => m[1]!)
    const first = parts[0]!
    for (const p of parts) names.push(p.startsWith("_") ? first.slice(0, first.lastIndexOf("_")) + p : p)
  }
  return names
}

describe("help", () => {
  test("--help lists every command and every variable of the Config table with its default", async () => {
    const { stdout, code } = await run(["--help"])
    expect(code).toBe(0)
    for (const c of ["serve", "migrate", "dev", "developers list", "developers show", "developers create", "developers set-plan", "keys generate", "vault rekey"]) {
      expect(stdout).toContain(`agent-auth ${c}`)
    }
    for (const v of VARIABLES) expect(stdout).toMatch(new RegExp(`^  ${v.name} +${v.default.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`, "m"))
  })

  test("the README's configuration table names exactly the variables of the Config table", () => {
    expect(readmeVariables().sort()).toEqual(VARIABLES.map((v) => v.name).sort())
  })

  test("loadConfig reads no variable the table does not list", () => {
    const read = new Set<string>()
    const env = new Proxy({ DATABASE_URL: "pglite://memory", REDIS_URL: "memory://", AUTO_GENERATE_KEYS: "true" } as Record<string, string>, {
      get: (target, key) => {
        if (typeof key === "string") read.add(key)
        return target[key as string]
      }
    })
    loadConfig(env)
    const known = new Set(VARIABLES.map((v) => v.name))
    expect([...read].filter((k) => !known.has(k))).toEqual([])
  })

  test("serve --help and every command's --help print help instead of running (no environment needed)", async () => {
    for (const args of [["serve", "--help"], ["dev", "-h"], ["migrate", "--help"], ["developers", "create", "--help"], ["vault", "rekey", "--help"], ["developers", "--help"]]) {
      const { stdout, stderr, code } = await run(args)
      expect([code, stderr]).toEqual([0, ""])
      expect(stdout).toContain(`agent-auth ${args[0]}`)
      expect(stdout).not.toContain("listening")
    }
  })
})

describe("developers", () => {
  let databaseUrl: string
  let drop: () => Promise<void>
  beforeAll(async () => {
    // the commands need a migrated database: one app migrates it, then the binary uses it
    const db = usingRealPostgres ? await createDatabase() : { url: `pglite://${await Bun.$`mktemp -d`.text().then((t) => t.trim())}`, drop: async () => {} }
    databaseUrl = db.url
    drop = db.drop
    const app = await startTestApp({ databaseUrl })
    await app.stop()
  })
  afterAll(() => drop())

  test("create prints the key once; list and show find the developer by id and by email; the key works", async () => {
    const created = await run(["developers", "create", "--name", "Ops Created", "--email", "Ops@Example.com", "--plan", "pro"], { DATABASE_URL: databaseUrl })
    expect(created.code).toBe(0)
    const id = /developer (dev_[0-9A-Z]{26}) created/.exec(created.stdout)![1]!
    const apiKey = /apiKey: (sk_live_\S+)/.exec(created.stdout)![1]!
    const again = await run(["developers", "create", "--name", "X", "--email", "ops@example.com"], { DATABASE_URL: databaseUrl })
    expect([again.code, again.stderr.trim()]).toEqual([1, "agent-auth: a developer with the email ops@example.com already exists"])
    expect((await run(["developers", "create", "--name", "X"], { DATABASE_URL: databaseUrl })).stderr).toContain("usage: agent-auth developers create")

    const listed = await run(["developers", "list"], { DATABASE_URL: databaseUrl })
    expect(listed.code).toBe(0)
    expect(listed.stdout.split("\n")[0]).toMatch(/^ID\s+EMAIL\s+PLAN\s+MODE\s+CREATED\s+NAME$/)
    expect(listed.stdout).toMatch(new RegExp(`^${id}\\s+ops@example.com\\s+pro\\s+live\\s+\\S+\\s+Ops Created$`, "m"))
    expect(listed.stdout).not.toContain(apiKey)
    for (const key of [id, "ops@example.com"]) {
      const shown = await run(["developers", "show", key], { DATABASE_URL: databaseUrl })
      expect(shown.code).toBe(0)
      expect(shown.stdout).toContain(`id:           ${id}`)
      expect(shown.stdout).toContain("plan:         pro")
    }
    expect((await run(["developers", "show", "dev_nope"], { DATABASE_URL: databaseUrl })).stderr.trim()).toBe("agent-auth: no developer dev_nope")

    // the printed key authenticates; open sign-up is off on this instance
    const app = await startTestApp({ databaseUrl, env: { SIGNUP_ENABLED: "false" } })
    try {
      const me = await app.request("GET", "/v1/me", { apiKey })
      expect([me.status, me.body.developerId ?? me.body.id]).toEqual([200, id])
      const signup = await app.request("POST", "/v1/signup", { body: { name: "walk-in" } })
      expect([signup.status, signup.body.code]).toEqual([403, "SIGNUP_DISABLED"])
      expect(signup.body.requestId).toBe(signup.headers.get("x-request-id"))
    } finally {
      await app.stop()
    }
  })
})

describe("start-up failures say why", () => {
  const base = { REDIS_URL: "memory://", RSA_PRIVATE_KEY: testPrivateKey(), HOST: "127.0.0.1", PORT: "0" }
  const start = (env: Record<string, string>) => run(["serve"], { ...base, ...env })

  test("SIGNUP_ENABLED and OTEL_EXPORTER_OTLP_ENDPOINT are validated like the others", async () => {
    expect((await start({ DATABASE_URL: "pglite://memory", SIGNUP_ENABLED: "no" })).stderr.trim())
      .toBe('agent-auth: configuration error: SIGNUP_ENABLED: must be "true" or "false", got "no"')
    expect((await start({ DATABASE_URL: "pglite://memory", OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })).stderr.trim())
      .toBe("agent-auth: configuration error: OTEL_EXPORTER_OTLP_ENDPOINT: must use one of http:, https:")
    expect((await start({ DATABASE_URL: "pglite://memory", REDIS_URL: "redis://127.0.0.1:6379/x" })).stderr.trim())
      .toBe("agent-auth: configuration error: REDIS_URL: the path must be a database index, e.g. redis://host:6379/0")
  })

  describe("PostgreSQL", () => {
    const server = new URL(process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres")
    let fake: Server
    let fakePort = 0
    beforeAll(async () => {
      // The shared server trusts loopback connections (pg_hba: trust), so it never asks for a password.
      // This stand-in answers a start-up message the way PostgreSQL answers a wrong password (SQLSTATE 28P01).
      fake = createServer((socket) => {
        socket.once("data", () => {
          const fields = Buffer.from('SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed for user "ops"\0\0')
          const header = Buffer.alloc(5)
          header.write("E", 0)
          header.writeInt32BE(fields.length + 4, 1)
          socket.end(Buffer.concat([header, fields]))
        })
      })
      await new Promise<void>((resolve) => fake.listen(0, "127.0.0.1", resolve))
      fakePort = (fake.address() as { port: number }).port
    })
    afterAll(() => fake.close())

    test("refused (exit 75: worth a restart), unknown host, authentication failed, no such database (exit 1): one line each, no password", async () => {
      // refused may pass (test/operator/startup.test.ts waits it out); with no time to wait, one try
      const closed = await start({ DATABASE_URL: "postgres://postgres:s3cret@127.0.0.1:1/postgres", STARTUP_TIMEOUT_SECONDS: "0" })
      expect([closed.code, closed.stderr.trim()]).toEqual([75, "agent-auth: could not start: DATABASE_URL: cannot connect to 127.0.0.1:1/postgres: connection refused (is PostgreSQL running and listening there?) (gave up after 0 s and 1 try; STARTUP_TIMEOUT_SECONDS=0)"])
      const unknown = await start({ DATABASE_URL: "postgres://postgres@no-such-host.invalid:5432/postgres" })
      expect([unknown.code, unknown.stderr.trim()]).toEqual([1, "agent-auth: could not start: DATABASE_URL: cannot connect to no-such-host.invalid:5432/postgres: unknown host"])
      const wrong = await start({ DATABASE_URL: `postgres://ops:s3cret@127.0.0.1:${fakePort}/postgres` })
      expect([wrong.code, wrong.stderr.trim()]).toEqual([1, `agent-auth: could not start: DATABASE_URL: cannot connect to 127.0.0.1:${fakePort}/postgres: authentication failed (check the user name and password)`])
      // a missing database needs a real server to say so (embedded mode has none)
      const missing = new URL(server)
      missing.pathname = "/aas_no_such_database_here"
      const nodb = usingRealPostgres ? await start({ DATABASE_URL: missing.toString() }) : undefined
      if (nodb !== undefined) {
        expect([nodb.code, nodb.stderr.trim()]).toEqual([1, `agent-auth: could not start: DATABASE_URL: cannot connect to ${server.hostname}:${server.port || "5432"}/aas_no_such_database_here: database does not exist`])
      }
      // the migrate command says the same
      expect((await run(["migrate"], { DATABASE_URL: "postgres://postgres@127.0.0.1:1/postgres" })).stderr.trim())
        .toBe("agent-auth: migration failed: DATABASE_URL: cannot connect to 127.0.0.1:1/postgres: connection refused (is PostgreSQL running and listening there?)")
      for (const r of [closed, unknown, wrong, nodb]) if (r !== undefined) expect(r.stderr + r.stdout).not.toContain("s3cret")
    })
  })

  test.if(usingRealRedis)("a Redis database index the server does not have is refused at start", async () => {
    const redis = new URL(process.env.TEST_REDIS_URL!)
    redis.pathname = "/999"
    const res = await start({ DATABASE_URL: "pglite://memory", REDIS_URL: redis.toString() })
    expect(res.code).toBe(1)
    expect(res.stderr.trim()).toMatch(/^agent-auth: could not start: REDIS_URL: database index 999 is out of range \(the server has \d+: 0-\d+\)$/)
  })
})
