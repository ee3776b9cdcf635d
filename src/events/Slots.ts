/**
 * The open event streams of each developer (decisions §23: at most 5), counted across instances in
 * Redis when the service has it: a sorted set per developer whose members are open streams, scored by
 * when their claim lapses. A stream renews its claim with each heartbeat, so the streams of an
 * instance that died stop counting within SLOT_TTL_MS. With the in-memory counter store (embedded
 * development, one instance) the count is this process's. If Redis does not answer, the instance's own
 * count decides (the limit protects the service's connections, it guards no data).
 */
import { Effect } from "effect"
import type { CounterStore } from "../platform/Counters.ts"

/** how long a stream's claim lasts without renewal (three heartbeats) */
export const SLOT_TTL_MS = 45_000

const TAKE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1`

export interface StreamSlots {
  /** claims a place for `streamId`; false when the developer already has `max` */
  readonly take: (developerId: string, streamId: string, nowMs: number) => Effect.Effect<boolean>
  readonly renew: (developerId: string, streamId: string, nowMs: number) => Effect.Effect<void>
  readonly release: (developerId: string, streamId: string) => Effect.Effect<void>
}

export const makeSlots = (counters: CounterStore, max: number): StreamSlots => {
  const local = new Map<string, Set<string>>()
  const takeLocal = (developerId: string, streamId: string) => {
    const set = local.get(developerId) ?? new Set<string>()
    if (set.size >= max) return false
    set.add(streamId)
    local.set(developerId, set)
    return true
  }
  const releaseLocal = (developerId: string, streamId: string) => {
    const set = local.get(developerId)
    set?.delete(streamId)
    if (set?.size === 0) local.delete(developerId)
  }
  const redis = counters.redis
  if (counters.kind !== "redis" || redis === undefined) {
    return {
      take: (developerId, streamId) => Effect.sync(() => takeLocal(developerId, streamId)),
      renew: () => Effect.void,
      release: (developerId, streamId) => Effect.sync(() => releaseLocal(developerId, streamId))
    }
  }
  // one key per developer, hash-tagged like the service's other per-developer keys (Redis Cluster)
  const key = (developerId: string) => `${counters.prefix}streams:{${developerId}}`
  const unanswered = (what: string) => (e: unknown) =>
    Effect.logWarning(`event stream slots: Redis did not answer (${what}); this instance's count decides`).pipe(
      Effect.annotateLogs({ error: String(e) })
    )
  return {
    take: (developerId, streamId, nowMs) =>
      Effect.tryPromise(() =>
        redis.eval(TAKE, 1, key(developerId), String(nowMs), String(nowMs + SLOT_TTL_MS), streamId, String(max), String(SLOT_TTL_MS * 2)) as Promise<number>
      ).pipe(
        Effect.map((taken) => taken === 1 && takeLocal(developerId, streamId)),
        Effect.catchAll((e) => Effect.zipRight(unanswered("take")(e), Effect.sync(() => takeLocal(developerId, streamId))))
      ),
    renew: (developerId, streamId, nowMs) =>
      Effect.tryPromise(() => redis.zadd(key(developerId), "XX", nowMs + SLOT_TTL_MS, streamId)).pipe(
        Effect.asVoid,
        Effect.catchAll(unanswered("renew"))
      ),
    release: (developerId, streamId) =>
      Effect.sync(() => releaseLocal(developerId, streamId)).pipe(
        Effect.zipRight(Effect.tryPromise(() => redis.zrem(key(developerId), streamId))),
        Effect.asVoid,
        Effect.catchAll(unanswered("release"))
      )
  }
}
