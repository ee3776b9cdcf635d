/**
 * Events that each have an audit-chain entry recording the same act (a vault exchange, say),
 * committed together: both or neither.
 *
 * The usual way (a transaction that locks the chain head, inserts the entries, moves the head, then
 * writes the events and their deliveries) costs five round trips, and under load each round trip
 * waits its turn on a busy event loop. Here it is one statement: the entries are chained in memory
 * onto the head this instance last wrote, and the statement moves the head only if it is still
 * there (same seq and hash), inserting the entries, the events and their deliveries only when it
 * did. Any other writer (another instance, or `append`) that moved the head in between makes the
 * statement write nothing; the head is read again and the batch chained again. PostgreSQL re-checks
 * the condition after waiting on a concurrent writer's row lock, so the chain never forks. After a
 * few misses, or for a chain that has no head yet, the locking transaction does the work.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Config } from "../Config.ts"
import { type AppendInput, AuditChain, chainEntries, entryColumnParams, entryV2Params, insertEntriesSql } from "./AuditChain.ts"
import { DELIVERY_CHANNEL, Events, type EventType, insertDeliveriesSql, nudgeDeliveryWorkers } from "./Events.ts"
import { newId } from "./Ids.ts"
import { nowMillis } from "./Time.ts"

export interface AuditedEvent {
  readonly developerId: string
  readonly type: EventType
  readonly data: Record<string, unknown>
  /** the chain entry, in the same developer's chain */
  readonly audit: Omit<AppendInput, "developerId">
}

export interface AuditedEventsService {
  /** records every event with its entry; entries of a developer are chained in the order given */
  readonly recordMany: (items: ReadonlyArray<AuditedEvent>) => Effect.Effect<void>
}

export class AuditedEvents extends Context.Tag("agent-auth/AuditedEvents")<AuditedEvents, AuditedEventsService>() {}

interface Head {
  readonly seq: number
  readonly hash: string | null
}

/** the one statement of a batch (exported so the benchmark's floor sends the same text) */
export const WRITE_ON_HEAD_SQL = `WITH head AS (
             UPDATE audit_heads SET seq = $17, hash = $18
             WHERE developer_id = $1 AND seq = $15 AND hash IS NOT DISTINCT FROM $16
             RETURNING developer_id
           ), entries AS (${insertEntriesSql(4, "head, ", 24)}
           ), event AS (
             INSERT INTO events (id, developer_id, type, data, created_at)
             SELECT u.id, head.developer_id, u.type, u.data::jsonb, $3
             FROM head, unnest($19::text[], $20::text[], $21::text[]) AS u(id, type, data)
             RETURNING id, developer_id, type, data
           ), deliveries AS (${insertDeliveriesSql("$22", "$3")})
           SELECT (SELECT count(*) FROM head)::int AS applied,
                  (SELECT count(*) FROM deliveries)::int AS deliveries,
                  (SELECT pg_notify($23, $1) WHERE EXISTS (SELECT 1 FROM deliveries))::text AS notified`

/** optimistic attempts before the locking transaction takes over */
const ATTEMPTS = 3
const KNOWN_HEADS_MAX = 10_000

export const AuditedEventsLive = Layer.effect(
  AuditedEvents,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const audit = yield* AuditChain
    const events = yield* Events
    /** the head each chain had after this instance's last write to it: a guess, checked by the statement */
    const knownHeads = new Map<string, Head>()

    const readHead = (developerId: string) =>
      Effect.map(
        sql<{ seq: string; hash: string | null }>`SELECT seq, hash FROM audit_heads WHERE developer_id = ${developerId}`,
        (rows): Head | undefined => rows[0] === undefined ? undefined : { seq: Number(rows[0].seq), hash: rows[0].hash }
      )

    /** one statement; answers the new head when it was written, undefined when the head had moved */
    const writeOnHead = (developerId: string, head: Head, group: ReadonlyArray<AuditedEvent>, ms: number) => {
      const chained = chainEntries(developerId, head, group.map((item) => ({ ...item.audit, developerId })), ms)
      return Effect.map(
        sql.unsafe<{ applied: number; deliveries: number }>(
          WRITE_ON_HEAD_SQL,
          [developerId, chained.timestamp, new Date(ms), ...entryColumnParams(chained.cols), head.seq, head.hash,
            chained.seq, chained.prevHash, group.map(() => newId("evt", ms)), group.map((item) => item.type),
            group.map((item) => JSON.stringify(item.data)), config.webhooks.maxAttempts, DELIVERY_CHANNEL, ...entryV2Params(chained.cols)] as any
        ),
        ([row]): Head | undefined => {
          if (row === undefined || Number(row.applied) !== 1) return undefined
          if (Number(row.deliveries) > 0) nudgeDeliveryWorkers()
          return { seq: chained.seq, hash: chained.prevHash }
        }
      )
    }

    const recordGroup = (developerId: string, group: ReadonlyArray<AuditedEvent>) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
          const head = knownHeads.get(developerId) ?? (yield* readHead(developerId))
          if (head === undefined) break
          const written = yield* writeOnHead(developerId, head, group, ms)
          if (written !== undefined) {
            // a guess per developer that wrote lately: bounded, a forgotten one costs one read
            if (knownHeads.size >= KNOWN_HEADS_MAX && !knownHeads.has(developerId)) knownHeads.clear()
            knownHeads.set(developerId, written)
            return
          }
          knownHeads.delete(developerId)
        }
        yield* sql.withTransaction(Effect.zipRight(
          events.emitMany(group.map((item) => ({ developerId, type: item.type, data: item.data }))),
          audit.appendMany(group.map((item) => ({ ...item.audit, developerId })))
        ))
      })

    const recordMany: AuditedEventsService["recordMany"] = (items) =>
      Effect.gen(function*() {
        const byDeveloper = new Map<string, Array<AuditedEvent>>()
        for (const item of items) {
          const group = byDeveloper.get(item.developerId)
          if (group === undefined) byDeveloper.set(item.developerId, [item])
          else group.push(item)
        }
        for (const [developerId, group] of byDeveloper) yield* recordGroup(developerId, group)
      }).pipe(Effect.orDie)

    return { recordMany }
  })
)
