/**
 * Signature verification spread over the machine's cores: a warm pool of worker threads (starting
 * one costs ~50 ms, so they start with the service), each verifying a slice of a batch. The HTTP
 * thread only hashes and waits. Where workers cannot start, verification runs in-process.
 */
import { Context, Effect, Layer } from "effect"
import { availableParallelism } from "node:os"
import { verifyBatch } from "./verifyCore.ts"

export interface VerifierService {
  /**
   * Hands the batch to the workers at once (so the caller's own work overlaps the checks) and
   * answers the effect that waits for the results: 1 where a key verifies the signature.
   */
  readonly start: (
    messages: ReadonlyArray<string>,
    signatures: ReadonlyArray<string>,
    keys: ReadonlyArray<string>
  ) => Effect.Effect<Effect.Effect<Uint8Array>>
  readonly workers: number
}

export class Verifier extends Context.Tag("agent-auth/OfflineVerifier")<Verifier, VerifierService>() {}

/** Below this many entries messaging costs more than it saves. */
const IN_PROCESS_BELOW = 32

interface PooledWorker {
  readonly worker: Worker
  readonly pending: Map<number, (results: Uint8Array) => void>
}

const startWorker = (): PooledWorker | undefined => {
  try {
    const worker = new Worker(new URL("./verifyWorker.ts", import.meta.url).href)
    const pending = new Map<number, (results: Uint8Array) => void>()
    worker.onmessage = (event: MessageEvent) => {
      const { id, results } = event.data as { id: number; results: Uint8Array }
      const resolve = pending.get(id)
      pending.delete(id)
      resolve?.(results)
    }
    worker.onerror = () => {
      for (const resolve of pending.values()) resolve(new Uint8Array(0))
      pending.clear()
    }
    return { worker, pending }
  } catch {
    return undefined
  }
}

export const VerifierLive = Layer.scoped(
  Verifier,
  Effect.gen(function*() {
    const size = Math.max(1, Math.min(8, availableParallelism()))
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => Array.from({ length: size }, startWorker).filter((w): w is PooledWorker => w !== undefined)),
      (workers) => Effect.sync(() => workers.forEach((w) => w.worker.terminate()))
    )
    let nextId = 0
    const onWorker = (w: PooledWorker, messages: ReadonlyArray<string>, signatures: ReadonlyArray<string>, keys: ReadonlyArray<string>) =>
      new Promise<Uint8Array>((resolve) => {
        const id = nextId++
        // a worker that died answers empty: verify that slice here instead
        w.pending.set(id, (results) => resolve(results.length === messages.length ? results : verifyBatch(messages, signatures, keys)))
        w.worker.postMessage({ id, messages, signatures, keys })
      })
    const start: VerifierService["start"] = (messages, signatures, keys) =>
      Effect.sync(() => {
        if (pool.length === 0 || messages.length < IN_PROCESS_BELOW) return Effect.sync(() => verifyBatch(messages, signatures, keys))
        const slice = Math.ceil(messages.length / pool.length)
        const answers = pool
          .map((w, i) => [w, i * slice, Math.min(messages.length, (i + 1) * slice)] as const)
          .filter(([, a, b]) => b > a)
          .map(([w, a, b]) => onWorker(w, messages.slice(a, b), signatures.slice(a, b), keys))
        return Effect.map(Effect.promise(() => Promise.all(answers)), (chunks) => {
          const out = new Uint8Array(messages.length)
          let offset = 0
          for (const chunk of chunks) {
            out.set(chunk, offset)
            offset += chunk.length
          }
          return out
        })
      })
    return { start, workers: pool.length }
  })
)
