/**
 * Database: one SqlClient for the whole service.
 * - postgres://…  → PgClient (node-postgres pool) with a statement timeout.
 * - pglite://dir | pglite://memory → embedded PostgreSQL (PGlite) served on a loopback socket,
 *   so the very same PgClient and SQL run against it (one connection: PGlite is single-session).
 */
import { PgClient } from "@effect/sql-pg"
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Redacted, String as Str } from "effect"
import { Config } from "../Config.ts"
import { postgresConnectFailure } from "./ConnectErrors.ts"

const clientOptions = {
  transformResultNames: Str.snakeToCamel,
  transformJson: false,
  connectTimeout: "3 seconds",
  // pg returns int8 and numeric as strings; we convert explicitly where needed.
} as const

const postgresLayer = (url: string, maxConnections: number) =>
  PgClient.layer({
    ...clientOptions,
    url: Redacted.make(withStatementTimeout(url)),
    maxConnections,
    idleTimeout: "30 seconds"
  })

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
            ? new PGlite({ ...assets })
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
      return PgClient.layer({
        ...clientOptions,
        host: "127.0.0.1",
        port,
        database: "postgres",
        username: "postgres",
        maxConnections: 1,
        idleTimeout: "1 hour"
      })
    })
  )

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
export const DatabaseLive: Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, unknown, Config> = Layer.unwrapEffect(
  Effect.map(Config, (config): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, unknown> => {
    if (config.databaseUrl.startsWith("pglite://")) {
      const location = config.databaseUrl.slice("pglite://".length)
      return pgliteLayer(location === "memory" || location === "" ? "memory" : location)
    }
    // a failed first connection says why (refused, unknown host, authentication, no such database)
    return Layer.catchAll(postgresLayer(config.databaseUrl, 10), (e) => Layer.fail(postgresConnectFailure(config.databaseUrl, e)))
  })
)

export const isEmbeddedDatabase = (url: string) => url.startsWith("pglite://")
