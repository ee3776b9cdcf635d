/**
 * Coalescing of concurrent requests into batches (group commit / batched lookups). The first
 * request runs at once; requests that arrive while `parallel` batches are under way wait and go
 * together in the next one. At low load nothing waits; under load one statement serves many
 * requests, which is what lets a busy instance keep its per-request database round trips small.
 */
import { Cause, Deferred, Effect, Exit, FiberId } from "effect"

export const makeCoalescer = <K, V>(
  run: (keys: ReadonlyArray<K>) => Effect.Effect<ReadonlyArray<V>>,
  options: { readonly max?: number; readonly parallel?: number } = {}
) => {
  const max = options.max ?? 256
  const parallel = options.parallel ?? 1
  const queue: Array<{ readonly key: K; readonly done: Deferred.Deferred<V> }> = []
  let running = 0
  const drain: Effect.Effect<void> = Effect.gen(function*() {
    for (;;) {
      const batch = yield* Effect.sync(() => {
        if (queue.length === 0) {
          running--
          return undefined
        }
        return queue.splice(0, max)
      })
      if (batch === undefined) return
      const exit = yield* Effect.exit(run(batch.map((b) => b.key)))
      for (let i = 0; i < batch.length; i++) {
        // a failed batch fails each of its requests as a defect (500 without internals)
        const outcome: Exit.Exit<V> = Exit.isSuccess(exit) ? Exit.succeed(exit.value[i]!) : Exit.die(Cause.squash(exit.cause))
        yield* Deferred.done(batch[i]!.done, outcome)
      }
    }
  })
  return (key: K): Effect.Effect<V> =>
    Effect.suspend(() => {
      const done = Deferred.unsafeMake<V>(FiberId.none)
      queue.push({ key, done })
      let start: Effect.Effect<void> = Effect.void
      if (running < parallel) {
        running++
        // a daemon, so a caller that goes away does not cancel the batch the others wait for
        start = Effect.asVoid(Effect.forkDaemon(drain))
      }
      return Effect.zipRight(start, Deferred.await(done))
    })
}
