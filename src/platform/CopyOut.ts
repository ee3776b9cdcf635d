/**
 * `COPY (query) TO STDOUT` as a stream of bytes, through a connection of the service's pool (issue
 * 37: an export built by PostgreSQL page by page reached 55-59 % of what COPY streams; COPY sends the
 * rows as it makes them, with no page queries and no text decoded and encoded again here).
 *
 * Backpressure: the rows go into a small buffer the consumer drains; while an offer waits for room
 * the connection's socket is paused, so PostgreSQL waits on its send and nothing piles up here. A
 * consumer that stops early (a client gone) closes the stream's scope, which destroys the
 * connection: the COPY dies with it, and the pool opens another.
 *
 * COPY takes no parameters, so the query is built with `literal` (the driver's own quoting). Only
 * for PostgreSQL servers: the embedded database keeps its page-by-page path.
 */
import { SqlError } from "@effect/sql"
import { Effect, Stream } from "effect"
import type Pg from "pg"
import { PgPool } from "./PgPool.ts"

/** the bytes of rows handed over at a time */
const BATCH_BYTES = 64 * 1024
/** batches held for the consumer; past them the socket stays paused (at most ~1 MiB held) */
const BUFFERED_CHUNKS = 16

export interface CopyOutService {
  /** the bytes of `COPY (<query>) TO STDOUT <options>` */
  readonly copyOut: (query: string, options: string) => Stream.Stream<Uint8Array, SqlError.SqlError>
  /** a value quoted as an SQL literal, for the query COPY cannot parameterise */
  readonly literal: (value: string | number) => string
}

/** the driver's submittable for a COPY OUT: what pg's connection calls as the server answers */
class CopyOutSubmittable {
  constructor(
    private readonly text: string,
    private readonly onData: (chunk: Uint8Array) => void,
    private readonly onDone: (error?: unknown) => void
  ) {}
  submit(connection: { query: (text: string) => void }) {
    connection.query(this.text)
  }
  handleCopyOutResponse() {}
  handleCopyData(message: { chunk: Uint8Array }) {
    this.onData(message.chunk)
  }
  handleCommandComplete() {}
  handleReadyForQuery() {
    this.onDone()
  }
  handleError(error: unknown) {
    this.onDone(error)
  }
}

const failure = (cause: unknown) => new SqlError.SqlError({ cause, message: "Failed to copy out" })

export const makeCopyOut = Effect.map(PgPool, (pool): CopyOutService => ({
  literal: (value) => {
    if (typeof value === "number") {
      if (!Number.isSafeInteger(value)) throw new Error(`not an integer literal: ${value}`)
      return String(value)
    }
    // the E'' form reads the same whatever standard_conforming_strings says: backslashes and quotes doubled
    return `E'${value.replace(/\\/g, "\\\\").replace(/'/g, "''")}'`
  },
  copyOut: (query, options) =>
    Stream.asyncScoped<Uint8Array, SqlError.SqlError>((emit) =>
      Effect.gen(function*() {
        let finished = false
        const client = yield* Effect.acquireRelease(
          Effect.tryPromise({ try: () => pool.connect(), catch: failure }),
          // a COPY still running (the consumer stopped early) cannot be left on a pooled connection
          (client, exit) => Effect.sync(() => client.release(exit._tag === "Success" && finished ? undefined : new Error("copy out abandoned")))
        )
        // PostgreSQL sends a CopyData message per row: rows are gathered into batches of BATCH_BYTES,
        // so the buffer, the pause and the consumer see a batch at a time, not a row
        let batch = new Uint8Array(BATCH_BYTES)
        let used = 0
        let waiting = 0
        const socket = (client as unknown as { connection: { stream: { pause: () => void; resume: () => void } } }).connection.stream
        let lastOffer: Promise<unknown> = Promise.resolve()
        const offer = (bytes: Uint8Array) => {
          waiting++
          socket.pause()
          lastOffer = emit.single(bytes).then(() => {
            if (--waiting === 0) socket.resume()
          })
        }
        const flush = () => {
          if (used === 0) return
          const full = batch.subarray(0, used)
          batch = new Uint8Array(BATCH_BYTES)
          used = 0
          offer(full)
        }
        // (pg reuses its read buffer: each row is copied out before the next read overwrites it)
        const onData = (chunk: Uint8Array) => {
          if (used + chunk.length > batch.length) flush()
          if (chunk.length > batch.length) return offer(Uint8Array.prototype.slice.call(chunk))
          batch.set(chunk, used)
          used += chunk.length
        }
        const onDone = (error?: unknown) => {
          if (error !== undefined) return void emit.fail(failure(error))
          flush()
          finished = true
          // the end after the last batch is in
          void lastOffer.then(() => emit.end())
        }
        ;(client as unknown as Pg.Client).query(new CopyOutSubmittable(`COPY (${query}) TO STDOUT ${options}`, onData, onDone) as never)
      }), { bufferSize: BUFFERED_CHUNKS, strategy: "suspend" })
}))
