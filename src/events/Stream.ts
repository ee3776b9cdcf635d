/**
 * Live events (decisions §23): `GET /v1/events/stream` reads the outbox (platform/Events.ts), so every
 * instance streams every event and a client that reconnects with `Last-Event-ID` misses nothing kept.
 *
 * Order and resumption: events are read in (xid, seq) order, where xid is the writing transaction
 * (sql/0050), and only once that transaction is older than every transaction still running
 * (`pg_snapshot_xmin`). A transaction that commits late therefore cannot put an event behind a
 * position already streamed: a client's position (the last event id it saw) is a total order that
 * only grows. The price: while a long write transaction runs, events wait for it to end.
 *
 * Wake-ups: an emit on this instance nudges its streams at once; otherwise each stream polls its
 * developer's outbox every second (one indexed statement). A comment line every 15 s keeps proxies
 * and clients from closing a quiet connection. At most 5 streams per developer, counted across
 * instances in Redis (./Slots.ts).
 */
import { SqlClient } from "@effect/sql"
import { Chunk, Clock, Context, Effect, Layer, Option, Queue, Stream } from "effect"
import { Counters } from "../platform/Counters.ts"
import { onEventsEmitted } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { makeSlots } from "./Slots.ts"

export const MAX_STREAMS_PER_DEVELOPER = 5
export const HEARTBEAT_MS = 15_000
export const POLL_MS = 1_000
const BATCH = 500

interface Position {
  readonly xid: string
  readonly seq: string
}

interface Row {
  readonly id: string
  readonly type: string
  readonly data: unknown
  readonly createdAt: Date
  readonly xid: string
  readonly seq: string
}

export interface OpenStream {
  readonly stream: Stream.Stream<Uint8Array>
}

export interface EventStreamService {
  /**
   * Opens a stream for the developer after `lastEventId` (from now when absent; from the oldest kept
   * event when the id is not, or no longer, in the outbox). `undefined` when the developer already
   * has the maximum open.
   */
  readonly open: (
    developerId: string,
    options: { readonly lastEventId?: string; readonly types?: ReadonlyArray<string> }
  ) => Effect.Effect<OpenStream | undefined>
  /** one of the developer's events, as its webhook body */
  readonly get: (developerId: string, eventId: string) => Effect.Effect<StoredEvent | undefined>
}

export interface StoredEvent {
  readonly id: string
  readonly type: string
  readonly createdAt: string
  readonly data: unknown
}

export class EventStreams extends Context.Tag("agent-auth/EventStreams")<EventStreams, EventStreamService>() {}

const encoder = new TextEncoder()

/** one event in the text/event-stream form; the data is the webhook payload (platform/Events.ts, webhooks) */
const frame = (row: Row): string => {
  const createdAt = row.createdAt instanceof Date ? row.createdAt.toISOString() : new Date(row.createdAt).toISOString()
  const data = typeof row.data === "string" ? JSON.parse(row.data) : row.data
  return `id: ${row.id}\nevent: ${row.type}\ndata: ${JSON.stringify({ id: row.id, type: row.type, createdAt, data })}\n\n`
}

export const EventStreamsLive = Layer.effect(
  EventStreams,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const slots = makeSlots(yield* Counters, MAX_STREAMS_PER_DEVELOPER)
    const wakers = new Map<string, Set<() => void>>()
    onEventsEmitted((ids) => {
      for (const id of ids) for (const wake of wakers.get(id) ?? []) wake()
    })

    const startAt = (developerId: string, lastEventId: string | undefined) =>
      Effect.gen(function*() {
        if (lastEventId !== undefined) {
          const [row] = yield* sql<Position>`SELECT xid::text AS xid, seq::text AS seq FROM events
            WHERE developer_id = ${developerId} AND id = ${lastEventId}`
          // an id not kept (or not this developer's): from the oldest kept event, so nothing kept is missed
          return row ?? { xid: "0", seq: "0" }
        }
        const [now] = yield* sql<{ xid: string }>`SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xid`
        return { xid: now!.xid, seq: "0" }
      })

    const readAfter = (developerId: string, at: Position, types: ReadonlyArray<string> | undefined) =>
      // ordered by the columns, not by the text the select list makes of them
      sql<Row>`SELECT e.id, e.type, e.data, e.created_at, e.xid::text AS xid, e.seq::text AS seq FROM events e
        WHERE e.developer_id = ${developerId}
          AND (e.xid, e.seq) > (${at.xid}::xid8, ${at.seq}::bigint)
          AND e.xid < pg_snapshot_xmin(pg_current_snapshot())
          ${types === undefined ? sql`` : sql`AND e.type = ANY(${types as any})`}
        ORDER BY e.xid, e.seq LIMIT ${BATCH}`

    const openStream: EventStreamService["open"] = (developerId, options) =>
      Effect.gen(function*() {
        const streamId = newId("evt", yield* Clock.currentTimeMillis)
        if (!(yield* slots.take(developerId, streamId, yield* Clock.currentTimeMillis))) return undefined
        let released = false
        const release = Effect.suspend(() => {
          if (released) return Effect.void
          released = true
          return slots.release(developerId, streamId)
        })
        const start = yield* startAt(developerId, options.lastEventId).pipe(Effect.orDie, Effect.onInterrupt(() => release))
        const signal = yield* Queue.sliding<void>(1)
        const wake = () => void Queue.unsafeOffer(signal, undefined)
        const register = Effect.sync(() => {
          const set = wakers.get(developerId) ?? new Set()
          set.add(wake)
          wakers.set(developerId, set)
        })
        const unregister = Effect.sync(() => {
          const set = wakers.get(developerId)
          set?.delete(wake)
          if (set?.size === 0) wakers.delete(developerId)
        })
        let position: Position = start
        let lastSent = yield* Clock.currentTimeMillis
        let lastRenewed = lastSent
        // the first chunk flushes the headers and tells EventSource how soon to reconnect
        const hello = Stream.make(encoder.encode(`retry: 2000\n: connected\n\n`))
        const next: Effect.Effect<Option.Option<Chunk.Chunk<Uint8Array>>> = Effect.gen(function*() {
          while (true) {
            // the stream's claim on its place is renewed while it is open, busy or quiet (./Slots.ts)
            const at = yield* Clock.currentTimeMillis
            if (at - lastRenewed >= HEARTBEAT_MS) {
              lastRenewed = at
              yield* slots.renew(developerId, streamId, at)
            }
            const rows = yield* readAfter(developerId, position, options.types).pipe(Effect.orDie)
            if (rows.length > 0) {
              const last = rows[rows.length - 1]!
              position = { xid: last.xid, seq: last.seq }
              lastSent = yield* Clock.currentTimeMillis
              return Option.some(Chunk.of(encoder.encode(rows.map(frame).join(""))))
            }
            const now = yield* Clock.currentTimeMillis
            const untilBeat = lastSent + HEARTBEAT_MS - now
            if (untilBeat <= 0) {
              lastSent = now
              return Option.some(Chunk.of(encoder.encode(`: keep-alive\n\n`)))
            }
            yield* Effect.raceFirst(Queue.take(signal), Effect.sleep(Math.min(POLL_MS, untilBeat)))
          }
        })
        const events = Stream.repeatEffectChunkOption(
          Effect.flatMap(next, (chunk) => Option.isSome(chunk) ? Effect.succeed(chunk.value) : Effect.fail(Option.none()))
        )
        const stream = Stream.concat(hello, events).pipe(
          Stream.ensuring(Effect.zipRight(unregister, release))
        )
        yield* register
        return { stream }
      })

    const get: EventStreamService["get"] = (developerId, eventId) =>
      Effect.map(
        sql<Row>`SELECT id, type, data, created_at FROM events WHERE developer_id = ${developerId} AND id = ${eventId}`,
        ([row]) => row === undefined ? undefined : {
          id: row.id, type: row.type, createdAt: new Date(row.createdAt).toISOString(), data: typeof row.data === "string" ? JSON.parse(row.data) : row.data
        }
      ).pipe(Effect.orDie)

    return { open: openStream, get }
  })
)
