/**
 * Database: one SqlClient for the whole service.
 * - postgres://…  → PgClient (node-postgres pool) with a statement timeout.
 * - pglite://dir | pglite://memory → embedded PostgreSQL (PGlite) served on a loopback socket,
 *   so the very same PgClient and SQL run against it (one connection: PGlite is single-session).
 */
import { PgClient } from "@effect/sql-pg"
import { SqlClient, SqlError } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import type Pg from "pg"
import { Config } from "../Config.ts"
import { acquirePool, PgPool, snakeToCamel } from "./PgPool.ts"
import { postgresConnectFailure } from "./ConnectErrors.ts"
import { markingTransactions } from "./IdempotencyMark.ts"

const CONNECT_TIMEOUT_MS = 3_000
const EMBEDDED_QUEUE_WAIT_MS = 15_000

/**
 * The SqlClient over our own pool (prepared statements, PgPool.ts); pg returns int8 and numeric as
 * strings, converted explicitly where needed. Like PgClient.layer, it fails to build unless a
 * first `SELECT 1` answers within the connect timeout.
 */
const clientLayer = (config: Pg.PoolConfig, prepare: boolean) =>
  Layer.unwrapScoped(
    Effect.gen(function*() {
      const pool = yield* acquirePool({ connectionTimeoutMillis: CONNECT_TIMEOUT_MS, application_name: "agent-auth", ...config }, prepare)
      yield* Effect.tryPromise({
        try: () => pool.query("SELECT 1"),
        catch: (cause) => new SqlError.SqlError({ cause, message: "PgClient: Failed to connect" })
      }).pipe(
        Effect.timeoutFail({
          duration: CONNECT_TIMEOUT_MS,
          onTimeout: () => new SqlError.SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
        })
      )
      return Layer.merge(
        PgClient.layerFromPool({ acquire: Effect.succeed(pool), transformResultNames: snakeToCamel, transformJson: false }),
        Layer.succeed(PgPool, pool)
      )
    })
  )

/** PG_PREPARE=false sends every statement unnamed (benchmarks compare the two in one run) */
const preparedStatements = () => process.env.PG_PREPARE !== "false"

const postgresLayer = (url: string, maxConnections: number) =>
  clientLayer({ connectionString: withStatementTimeout(url), max: maxConnections, idleTimeoutMillis: 30_000 }, preparedStatements())

/** A statement that runs longer than this is cancelled by PostgreSQL itself, so no request hangs on it. */
const withStatementTimeout = (url: string) => {
  const parsed = new URL(url)
  if (!parsed.searchParams.has("options")) parsed.searchParams.set("options", "-c statement_timeout=15000")
  return parsed.toString()
}

const pgliteLayer = (location: string) =>
  Layer.unwrapScoped(
    Effect.gen(function*() {
      const { PGlite } = yield* Effect.promise(() => import("@electric-sql/pglite"))
      const { PGLiteSocketServer } = yield* Effect.promise(() => import("@electric-sql/pglite-socket"))
      const assets = yield* Effect.promise(() => import("./pgliteAssets.ts").then((m) => m.loadPgliteAssets()))
      const db = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const instance = location === "memory"
            ? new PGlite({ ...assets, loadDataDir: await blankCluster(PGlite, assets) })
            : new PGlite(location, { ...assets })
          await instance.waitReady
          return instance
        }),
        (instance) => Effect.promise(() => instance.close()).pipe(Effect.ignore)
      )
      const port = yield* freePort
      const server = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const s = new PGLiteSocketServer({ db, port, host: "127.0.0.1", maxConnections: 1 })
          await s.start()
          return s
        }),
        (s) => Effect.promise(() => s.stop()).pipe(Effect.ignore)
      )
      void server
      // Every request queues for the one session, so the pool's wait is a queue, not a connect: bounded
      // like a statement (15 s), not by the 3 s connect timeout (a loaded machine answered 503 to a
      // burst of 50 appends that only had to wait their turn).
      return clientLayer({
        host: "127.0.0.1", port, database: "postgres", user: "postgres", max: 1, idleTimeoutMillis: 3_600_000, connectionTimeoutMillis: EMBEDDED_QUEUE_WAIT_MS
      }, false)
    })
  )

/**
 * pglite://memory starts from a copy of one freshly initialised cluster per process: initdb is most
 * of an embedded start (measured 6-25 s on a loaded 2-core machine, against ~2 s to load a copy and
 * under 1 s of migrations), and the test suite starts hundreds. A failed copy is made anew next time.
 */
let blank: Promise<Blob> | undefined
const blankCluster = (PGlite: typeof import("@electric-sql/pglite").PGlite, assets: object): Promise<Blob> =>
  blank ??= (async () => {
    const db = new PGlite({ ...assets })
    try {
      await db.waitReady
      return await db.dumpDataDir("none")
    } finally {
      await db.close()
    }
  })().catch((e) => {
    blank = undefined
    throw e
  })

const freePort = Effect.promise(
  () =>
    new Promise<number>((resolve, reject) => {
      import("node:net").then(({ createServer }) => {
        const srv = createServer()
        srv.once("error", reject)
        srv.listen(0, "127.0.0.1", () => {
          const address = srv.address()
          const port = typeof address === "object" && address ? address.port : 0
          srv.close(() => resolve(port))
        })
      })
    })
)

/** Picks the driver from DATABASE_URL. */
export const DatabaseLive: Layer.Layer<PgClient.PgClient | SqlClient.SqlClient | PgPool, unknown, Config> = Layer.unwrapEffect(
  Effect.map(Config, (config): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient | PgPool, unknown> => {
    if (config.databaseUrl.startsWith("pglite://")) {
      const location = config.databaseUrl.slice("pglite://".length)
      return pgliteLayer(location === "memory" || location === "" ? "memory" : location)
    }
    // a failed first connection says why (refused, unknown host, authentication, no such database)
    return Layer.catchAll(postgresLayer(config.databaseUrl, 10), (e) => Layer.fail(postgresConnectFailure(config.databaseUrl, e)))
  })
).pipe(
  // a keyed request's transactions mark its Idempotency-Key committed with their own commit (Idempotency.ts)
  Layer.map((context) => Context.add(context, SqlClient.SqlClient, markingTransactions(Context.get(context, SqlClient.SqlClient))))
)

export const isEmbeddedDatabase = (url: string) => url.startsWith("pglite://")
