/**
 * Signature verification spread over the machine's cores: a warm pool of worker threads (starting
 * one costs ~50 ms, so they start with the service), each verifying a slice of a batch. The HTTP
 * thread only hashes and waits.
 *
 * Never hangs: a worker takes slices only once it has said it is ready, a worker that fails or does
 * not answer within the answer timeout is dropped and its slice verified here, and with no ready
 * worker everything is verified in-process (correct, only slower).
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
  /** workers ready now */
  readonly workers: () => number
}

export class Verifier extends Context.Tag("agent-auth/OfflineVerifier")<Verifier, VerifierService>() {}

/** Below this many entries messaging costs more than it saves. */
const IN_PROCESS_BELOW = 32

/**
 * The worker's module. Under `bun build --compile` every extra entry point is embedded relative to
 * the entry points' common folder (src/), and `import.meta.url` names the executable, so the
 * worker is addressed from that root; from source it sits beside this file.
 */
export const defaultWorkerUrl = (): string =>
  /\/\$bunfs\/|~BUN/.test(import.meta.url)
    ? "./offline-sync/verifyWorker.ts"
    : new URL("./verifyWorker.ts", import.meta.url).href

interface PooledWorker {
  readonly worker: Worker
  readonly pending: Map<number, (results: Uint8Array | undefined) => void>
  ready: boolean
  dead: boolean
}

export interface VerifierOptions {
  readonly workerUrl?: string
  readonly size?: number
  /** how long a worker may take over one slice before it is given up and the slice verified here */
  readonly answerTimeoutMs?: number
}

export const makeVerifier = (options: VerifierOptions = {}) =>
  Effect.gen(function*() {
    const url = options.workerUrl ?? defaultWorkerUrl()
    const size = options.size ?? Math.max(1, Math.min(8, availableParallelism()))
    const answerTimeoutMs = options.answerTimeoutMs ?? 5_000

    const kill = (w: PooledWorker) => {
      if (w.dead) return
      w.dead = true
      w.ready = false
      for (const resolve of w.pending.values()) resolve(undefined)
      w.pending.clear()
      w.worker.terminate()
    }

    const spawn = (): PooledWorker | undefined => {
      let worker: Worker
      try {
        worker = new Worker(url)
      } catch {
        return undefined
      }
      const pooled: PooledWorker = { worker, pending: new Map(), ready: false, dead: false }
      worker.onmessage = (event: MessageEvent) => {
        const data = event.data as { ready?: true; id?: number; results?: Uint8Array }
        if (data.ready === true) {
          pooled.ready = !pooled.dead
          return
        }
        const resolve = pooled.pending.get(data.id!)
        pooled.pending.delete(data.id!)
        resolve?.(data.results)
      }
      // a module that does not load, or a worker that throws: never used again
      worker.onerror = () => kill(pooled)
      return pooled
    }

    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => Array.from({ length: size }, spawn).filter((w): w is PooledWorker => w !== undefined)),
      (workers) => Effect.sync(() => workers.forEach(kill))
    )

    // Say how many came up within 10 s (the binary's CI check reads this line), and warn when none
    // did (e.g. a build without the worker's entry point): checks then run on the main thread.
    yield* Effect.gen(function*() {
      for (let waited = 0; waited < 10_000 && pool.some((w) => !w.ready && !w.dead); waited += 100) yield* Effect.sleep("100 millis")
      const ready = pool.filter((w) => w.ready).length
      yield* ready === 0
        ? Effect.logWarning("offline-sync verifier workers did not start: verifying on the main thread")
        : Effect.logInfo(`offline-sync verifier workers ready: ${ready}`)
    }).pipe(Effect.forkScoped)

    let nextId = 0
    const onWorker = (w: PooledWorker, messages: ReadonlyArray<string>, signatures: ReadonlyArray<string>, keys: ReadonlyArray<string>) =>
      new Promise<Uint8Array>((resolve) => {
        const id = nextId++
        const timer = setTimeout(() => kill(w), answerTimeoutMs)
        w.pending.set(id, (results) => {
          clearTimeout(timer)
          // no answer (the worker died or timed out) or a wrong-sized one: verify that slice here
          resolve(results !== undefined && results.length === messages.length ? results : verifyBatch(messages, signatures, keys))
        })
        try {
          w.worker.postMessage({ id, messages, signatures, keys })
        } catch {
          kill(w)
        }
      })

    const start: VerifierService["start"] = (messages, signatures, keys) =>
      Effect.sync(() => {
        const ready = pool.filter((w) => w.ready)
        if (ready.length === 0 || messages.length < IN_PROCESS_BELOW) return Effect.sync(() => verifyBatch(messages, signatures, keys))
        const slice = Math.ceil(messages.length / ready.length)
        const answers = ready
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
    return { start, workers: () => pool.filter((w) => w.ready).length } satisfies VerifierService
  })

export const VerifierLive = Layer.scoped(Verifier, makeVerifier())
