/**
 * Test harness: starts the real service (real HTTP on a loopback port) against a fresh database.
 * - TEST_DATABASE_URL set → a new PostgreSQL database per app (dropped at stop); else PGlite in memory.
 * - TEST_REDIS_URL set → that Redis, with a key prefix per app; else in-memory counters.
 * `testClock: true` runs the whole service on TestClock; `adjust` / `setTime` move it.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer, TestClock, TestContext } from "effect"
import { existsSync } from "node:fs"
import pg from "pg"
import { loadConfig, type AppConfig } from "../../src/Config.ts"
import { generateRsaPrivateKeyPem } from "../../src/platform/Keys.ts"
import { startServer, type RunningServer } from "../../src/Server.ts"

export const usingRealServers = process.env.TEST_DATABASE_URL !== undefined
export const usingRealPostgres = process.env.TEST_DATABASE_URL !== undefined
export const usingRealRedis = process.env.TEST_REDIS_URL !== undefined

let sharedKey: string | undefined
/** One RSA key per test process: generating one per app would cost ~100 ms each. */
export const testPrivateKey = () => (sharedKey ??= generateRsaPrivateKeyPem())

const rand = () => Math.random().toString(36).slice(2, 10)

/** The URL of database `name` on the server of `base`, and how to drop it */
const databaseNamed = (base: string, name: string) => {
  const url = new URL(base)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: base })
      await c.connect()
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {})
      await c.end()
    }
  }
}

/** Creates an empty database on the TEST_DATABASE_URL server and returns its URL. */
export const createDatabase = async (): Promise<{ url: string; drop: () => Promise<void> }> => {
  const base = process.env.TEST_DATABASE_URL
  if (base === undefined) return { url: "pglite://memory", drop: async () => {} }
  const name = `aas_test_${Date.now().toString(36)}_${rand()}`
  const admin = new pg.Client({ connectionString: base })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  return databaseNamed(base, name)
}

/**
 * A migrated database to copy (PostgreSQL only): the first app of a test process migrates one, and
 * every later app's database is a `CREATE DATABASE … TEMPLATE` of it (its start then finds nothing
 * pending). Migrating took 1.5-2.5 s of each of the suite's ~170 app starts; a copy takes ~0.2 s.
 * Its name starts with aas_test_ so CI's cleanup drops it; a local run's stale ones (their process
 * gone) are dropped when the next one is made.
 */
let template: Promise<string> | undefined
const migratedTemplate = (base: string) =>
  template ??= (async () => {
    const name = `aas_test_tmpl_${process.pid}_${rand()}`
    const admin = new pg.Client({ connectionString: base })
    await admin.connect()
    try {
      const stale = await admin.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE 'aas_test_tmpl_%'")
      for (const { datname } of stale.rows) {
        const pid = Number(datname.split("_")[3])
        if (Number.isInteger(pid) && pid !== process.pid && !existsSync(`/proc/${pid}`)) {
          await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => {})
        }
      }
      await admin.query(`CREATE DATABASE ${name}`)
    } finally {
      await admin.end()
    }
    const app = await startTestApp({ databaseUrl: databaseNamed(base, name).url })
    await app.stop()
    return name
  })().catch((e) => {
    template = undefined
    throw e
  })

/** A database with every migration applied (a copy of the template), else as createDatabase. */
export const createMigratedDatabase = async (): Promise<{ url: string; drop: () => Promise<void> }> => {
  const base = process.env.TEST_DATABASE_URL
  if (base === undefined) return createDatabase()
  const source = await migratedTemplate(base)
  const name = `aas_test_${Date.now().toString(36)}_${rand()}`
  const admin = new pg.Client({ connectionString: base })
  await admin.connect()
  try {
    // a copy needs the template to itself: the migrating app's connections may still be closing
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`CREATE DATABASE ${name} TEMPLATE ${source}`)
        break
      } catch (e) {
        if (attempt >= 50 || !/being accessed by other users/.test(String(e))) throw e
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
  } finally {
    await admin.end()
  }
  return databaseNamed(base, name)
}

export interface TestResponse<T = any> {
  readonly status: number
  readonly body: T
  readonly text: string
  readonly headers: Headers
}

export interface RequestOptions {
  readonly body?: unknown
  readonly rawBody?: string
  readonly apiKey?: string
  readonly bearer?: string
  readonly headers?: Record<string, string>
}

export interface TestApp {
  readonly url: string
  readonly config: AppConfig
  readonly databaseUrl: string
  readonly server: RunningServer
  readonly request: <T = any>(method: string, path: string, options?: RequestOptions) => Promise<TestResponse<T>>
  /** signs up a developer; returns its API key and id */
  readonly signup: (input?: { name?: string; email?: string; mode?: "live" | "sandbox"; plan?: "free" | "pro" | "enterprise" }) => Promise<{ apiKey: string; developerId: string }>
  /** runs SQL in the service's own database connection */
  readonly query: <T = any>(text: string, params?: ReadonlyArray<unknown>) => Promise<Array<T>>
  readonly run: <A, E>(effect: Effect.Effect<A, E, any>) => Promise<A>
  /** TestClock only */
  readonly adjust: (duration: Duration.DurationInput) => Promise<void>
  readonly setTime: (millis: number) => Promise<void>
  /** the service's own clock (TestClock's time when testClock is set): what a device beside it reads */
  readonly now: () => Promise<number>
  readonly stop: () => Promise<void>
}

export interface TestAppOptions {
  readonly env?: Record<string, string>
  readonly workers?: boolean
  readonly testClock?: boolean
  /** start time for TestClock (default: 2026-11-22T10:00:00Z) */
  readonly startTime?: number
  /** reuse an existing database (e.g. a second instance) */
  readonly databaseUrl?: string
  /** reuse a Redis key prefix (a second instance sharing counters) */
  readonly redisKeyPrefix?: string
  /** services given to the app (e.g. stub ports), merged with TestContext when testClock is set */
  readonly layer?: Layer.Layer<any>
  /** replaces the policies' view of the directory (test/policies/support.ts makeDirectory) */
  readonly policyDirectory?: Layer.Layer<any, never, any>
  /** replaces how CIMD documents are fetched (test/oauth: a document served over TLS on loopback) */
  readonly cimdFetch?: Layer.Layer<any>
}

export const startTestApp = async (options: TestAppOptions = {}): Promise<TestApp> => {
  const db = options.databaseUrl !== undefined
    ? { url: options.databaseUrl, drop: async () => {} }
    : await createMigratedDatabase()
  const redisKeyPrefix = options.redisKeyPrefix ?? `t_${rand()}:`
  const config = loadConfig({
    DATABASE_URL: db.url,
    REDIS_URL: process.env.TEST_REDIS_URL ?? "memory://",
    RSA_PRIVATE_KEY: testPrivateKey(),
    PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "none",
    WEBHOOK_ALLOW_PRIVATE_HOSTS: "true",
    REDIS_KEY_PREFIX: redisKeyPrefix,
    // tests sign up many developers from one address; the sign-up limit has its own test
    RATE_LIMIT_SIGNUP_PER_HOUR: "100000",
    ...options.env
  })
  // The clock is set before any layer starts, so scheduled fibers begin at the test's start time
  // (setting it afterwards would replay every poll since 1970).
  const clock = options.testClock
    ? Layer.effectDiscard(TestClock.setTime(options.startTime ?? Date.parse("2026-11-22T10:00:00.000Z"))).pipe(
      Layer.provideMerge(TestContext.TestContext as Layer.Layer<any>)
    )
    : undefined
  const extra = clock !== undefined && options.layer !== undefined ? Layer.merge(clock, options.layer) : clock ?? options.layer
  const server = await startServer(config, {
    workers: options.workers ?? false, extra: extra as any,
    ...(options.policyDirectory !== undefined ? { policyDirectory: options.policyDirectory } : {}),
    ...(options.cimdFetch !== undefined ? { cimdFetch: options.cimdFetch } : {})
  })
  const url = server.url
  const request = async <T>(method: string, path: string, o: RequestOptions = {}): Promise<TestResponse<T>> => {
    const headers: Record<string, string> = { ...o.headers }
    if (o.apiKey !== undefined) headers.authorization = `Bearer ${o.apiKey}`
    if (o.bearer !== undefined) headers.authorization = `Bearer ${o.bearer}`
    let body: string | undefined
    if (o.rawBody !== undefined) body = o.rawBody
    else if (o.body !== undefined) body = JSON.stringify(o.body)
    if (body !== undefined && headers["content-type"] === undefined) headers["content-type"] = "application/json"
    const response = await fetch(url + path, { method, headers, body, redirect: "manual" })
    const text = await response.text()
    let parsed: any = text
    try {
      parsed = text.length > 0 ? JSON.parse(text) : undefined
    } catch {
      parsed = text
    }
    return { status: response.status, body: parsed, text, headers: response.headers }
  }
  const query = <T>(text: string, params: ReadonlyArray<unknown> = []) =>
    server.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<any>(text, params as any))) as Promise<Array<T>>
  const signup: TestApp["signup"] = async (input = {}) => {
    const res = await request<any>("POST", "/v1/signup", {
      body: { name: input.name ?? `dev-${rand()}`, ...(input.email ? { email: input.email } : {}), ...(input.mode ? { mode: input.mode } : {}) }
    })
    if (res.status !== 201) throw new Error(`signup failed: ${res.status} ${res.text}`)
    if (input.plan !== undefined && input.plan !== "free") {
      await query("UPDATE developers SET plan = $1 WHERE id = $2", [input.plan, res.body.developerId])
    }
    return { apiKey: res.body.apiKey, developerId: res.body.developerId }
  }
  return {
    url,
    config,
    databaseUrl: db.url,
    server,
    request,
    signup,
    query,
    run: server.run,
    adjust: (duration) => server.run(TestClock.adjust(duration)),
    setTime: (millis) => server.run(TestClock.setTime(millis)),
    now: () => server.run(Effect.clockWith((clock) => clock.currentTimeMillis)),
    stop: async () => {
      await server.stop()
      await db.drop()
    }
  }
}
