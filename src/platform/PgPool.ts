/**
 * The node-postgres pool behind the SqlClient, built here (PgClient.fromPool) so that statements
 * are prepared once per connection and reused: PostgreSQL otherwise parses and plans every
 * parameterised statement afresh (measured ~2× its CPU per light query, issue 27).
 *
 * A parameterised text seen a second time is sent as a named statement (the name a hash of the
 * text); pg then sends Parse once per connection and only Bind/Execute after. PostgreSQL never
 * forgets a prepared statement while the connection lives, so the number of distinct names per
 * process is capped (our SQL is static text; a text built with a varying IN-list or an unsafe
 * fragment past the cap simply runs unnamed, as before).
 */
import { SqlError } from "@effect/sql"
import { Context, Effect, String as Str } from "effect"
import { createHash } from "node:crypto"
import Pg from "pg"

/** distinct prepared statements per process (each is kept by every pooled connection) */
export const MAX_PREPARED = 300
/** texts seen once, remembered so the second sighting prepares (cleared when full) */
const MAX_SEEN = 2_000

const named = new Map<string, string>()
const seen = new Set<string>()
/** texts PostgreSQL refused to reuse (a plan invalidated by a schema change): unnamed from then on */
const refused = new Set<string>()

/**
 * Put first in a statement whose best plan depends on its parameters' values (a claim over a
 * backlog, a time threshold): it is planned at each execution, never prepared. A prepared statement
 * goes to PostgreSQL's generic plan after five executions, chosen without the values; the webhook
 * claim's generic plan read a 15,000-row backlog in ~7 ms where its per-execution plan takes ~1.5 ms.
 */
export const PLAN_EACH_TIME = "/* plan each time */ "

/** The statement name for a parameterised text, or undefined to send it unnamed. */
export const statementName = (text: string): string | undefined => {
  const name = named.get(text)
  if (name !== undefined) return name
  if (named.size >= MAX_PREPARED || refused.has(text) || text.startsWith(PLAN_EACH_TIME)) return undefined
  if (!seen.has(text)) {
    if (seen.size >= MAX_SEEN) seen.clear()
    seen.add(text)
    return undefined
  }
  seen.delete(text)
  const fresh = `aas_${createHash("sha256").update(text).digest("base64url").slice(0, 22)}`
  named.set(text, fresh)
  return fresh
}

/** how many texts this process prepares (for tests) */
export const preparedCount = () => named.size

/** A pg Client that sends repeated parameterised texts as named (prepared) statements. */
export class PreparingClient extends Pg.Client {
  override query(config: any, values?: any, callback?: any): any {
    if (typeof config === "string" && Array.isArray(values) && values.length > 0) {
      const name = statementName(config)
      if (name !== undefined) {
        const text = config
        if (typeof callback !== "function") {
          // promise form: named, with the same fallback as below
          return new Promise((resolve, reject) => this.query(text, values, (err: any, result: any) => (err ? reject(err) : resolve(result))))
        }
        return super.query({ name, text, values } as any, (err: any, result: any) => {
          // a plan a schema change invalidated: the text runs unnamed from now on, this time too
          // (inside a transaction the retry meets the aborted transaction and reports that instead)
          if (err && isPlanChange(err)) {
            forget(this, text, name)
            return super.query(text, values, callback)
          }
          callback(err, result)
        })
      }
    }
    return super.query(config, values, callback)
  }
}

/** "cached plan must not change result type" (0A000): a statement prepared before a schema change */
const isPlanChange = (err: any) => err?.code === "0A000" && /cached plan/i.test(String(err?.message))

const forget = (client: Pg.Client, text: string, name: string) => {
  named.delete(text)
  refused.add(text)
  const connection = (client as any).connection
  if (connection?.parsedStatements) delete connection.parsedStatements[name]
}

/** The service's pool, for what must go through the very same connections (benchmark floors). */
export class PgPool extends Context.Tag("agent-auth/PgPool")<PgPool, Pg.Pool>() {}

/**
 * A pool (whose clients prepare repeated statements when `prepare`), ended when the scope closes.
 * Embedded PGlite serves every socket from one session, so a reconnected client could meet names
 * its predecessor prepared: it runs unnamed.
 */
export const acquirePool = (config: Pg.PoolConfig, prepare: boolean) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const pool = new Pg.Pool({ ...config, Client: (prepare ? PreparingClient : Pg.Client) as any })
      pool.on("error", () => {
        // an idle client's error: the pool drops it; queries surface their own errors
      })
      return pool
    }),
    (pool) => Effect.promise(() => pool.end()).pipe(Effect.timeoutOption(1000), Effect.ignore)
  )

/** column names camel-cased once each, as the SqlClient's rows are (Database.ts uses it too) */
const camelNames = new Map<string, string>()
export const snakeToCamel = (name: string): string => {
  let out = camelNames.get(name)
  if (out === undefined) {
    out = Str.snakeToCamel(name)
    if (camelNames.size < 10_000) camelNames.set(name, out)
  }
  return out
}

export type DirectRead = <Row>(text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<Row>, SqlError.SqlError>

/**
 * A read straight through the service's pool, resumed from pg's callback: the same statement,
 * connection, prepared name, row shape (camel-cased) and SqlError as through the SqlClient, without
 * @effect/sql's per-statement span, scope and statement compilation, which cost a light read
 * (a bundle, its revocation status) about a fifth of its CPU (issue 27). For single reads outside
 * any transaction only: it never joins the caller's transaction.
 */
export const makeDirectRead = Effect.map(PgPool, (pool): DirectRead => <Row>(text: string, params: ReadonlyArray<unknown>) =>
  Effect.async<ReadonlyArray<Row>, SqlError.SqlError>((resume) => {
    pool.query(text, params as Array<unknown>, (error: Error | undefined, result: Pg.QueryResult) => {
      if (error) return resume(Effect.fail(new SqlError.SqlError({ cause: error, message: "Failed to execute statement" })))
      resume(Effect.succeed(camelRows<Row>(result.rows)))
    })
  }))

/** rows with their column names camel-cased, as the SqlClient's are */
const camelRows = <Row>(rows: ReadonlyArray<Record<string, unknown>>): Array<Row> => {
  const out: Array<Row> = new Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!
    const camel: Record<string, unknown> = {}
    for (const key in row) camel[snakeToCamel(key)] = row[key]
    out[i] = camel as Row
  }
  return out
}

export type DirectReadNow = <Row>(text: string, params: ReadonlyArray<unknown>) => Promise<ReadonlyArray<Row>>

/**
 * makeDirectRead as a promise, for a lean route's answer that runs no fiber at all (issue 37: the
 * fiber was a fifth of a revocation-status check's CPU). It rejects with the same SqlError.
 */
export const makeDirectReadNow = Effect.map(PgPool, (pool): DirectReadNow => <Row>(text: string, params: ReadonlyArray<unknown>) =>
  new Promise<ReadonlyArray<Row>>((resolve, reject) => {
    pool.query(text, params as Array<unknown>, (error: Error | undefined, result: Pg.QueryResult) => {
      if (error) return reject(new SqlError.SqlError({ cause: error, message: "Failed to execute statement" }))
      resolve(camelRows<Row>(result.rows))
    })
  }))
