/**
 * Uploaded Cedar sets are parsed and validated in worker threads (issue 32): the engine's work on
 * one upload is 3-100 ms of synchronous wasm (more for large sets), which on the HTTP thread stalled
 * every tenant's requests for as long. The byte limit and the pre-scan stay here (linear, cheap);
 * evaluation stays here too (statefulIsAuthorized on pre-parsed sets, well under a millisecond).
 *
 * The pattern of offline-sync/Verifier.ts: a small fixed pool, a worker gets work only after it said
 * it is ready, one set at a time per worker (a queue holds the rest). The pool, and the engine's
 * compiled module it shares (~29 MB of machine code, measured in the binary), start with the first
 * set this process checks, not with the service: most instances never see one (issue 37).
 * A worker that dies or does not answer within the answer timeout costs only its set (422
 * POLICY_INVALID, as a trap of the engine here would) and is replaced. With no worker that can
 * load (a build without the worker's entry point), sets are checked here: correct, only blocking.
 */
import { Effect, Runtime } from "effect"
import { availableParallelism } from "node:os"
import { type CheckOutcome, checkHere, ENGINE_FAILURE, precheck } from "./CedarCheck.ts"
import { fromChecked, type ParseOutcome } from "./Cedar.ts"
import { compiledCedar, initCedar } from "./CedarEngine.ts"

/**
 * The worker's module. Under `bun build --compile` every extra entry point is embedded relative to
 * the entry points' common folder (src/), and `import.meta.url` names the executable; from source
 * it sits beside this file (as Verifier.ts's).
 */
export const defaultCedarWorkerUrl = (): string =>
  /\/\$bunfs\/|~BUN/.test(import.meta.url)
    ? "./policies/cedarWorker.ts"
    : new URL("./cedarWorker.ts", import.meta.url).href

export interface CedarParserOptions {
  readonly workerUrl?: string
  readonly size?: number
  /** how long a worker may take over one set before it is replaced and the set refused */
  readonly answerTimeoutMs?: number
  /** how long a worker may take to load before it is given up (and not replaced) */
  readonly startTimeoutMs?: number
  /** told once, when the workers first started (or were given up): how many are ready */
  readonly onStarted?: (ready: number) => void
}

export interface CedarParserStats {
  /** workers ready now */
  readonly ready: number
  /** sets the workers answered */
  readonly inWorkers: number
  /** sets checked on this thread (no worker could load) */
  readonly here: number
  /** workers that died or went silent over a set and were replaced */
  readonly replaced: number
  /** engines the workers re-created after a trap (each worker's count beyond its first) */
  readonly workerEngineFailures: number
}

export interface CedarParser {
  /** the byte limit and pre-scan here, the engine's parse and validation in a worker */
  readonly parse: (text: string) => Promise<ParseOutcome>
  /** the engine's part alone, without the pre-scan (tests send it what the pre-scan would refuse) */
  readonly check: (text: string) => Promise<CheckOutcome>
  readonly stats: () => CedarParserStats
  /** starts the pool if it has not started; settles once every worker is ready or given up; answers how many are ready */
  readonly started: () => Promise<number>
  readonly close: () => void
}

interface Job {
  readonly text: string
  readonly resolve: (outcome: CheckOutcome) => void
}

interface Slot {
  readonly worker: Worker
  ready: boolean
  dead: boolean
  job: Job | undefined
  timer: ReturnType<typeof setTimeout> | undefined
  generation: number
}

export const makeCedarParser = (options: CedarParserOptions = {}): CedarParser => {
  const url = options.workerUrl ?? defaultCedarWorkerUrl()
  const size = options.size ?? Math.max(1, Math.min(4, availableParallelism()))
  const answerTimeoutMs = options.answerTimeoutMs ?? 10_000
  const startTimeoutMs = options.startTimeoutMs ?? 10_000
  const slots: Array<Slot> = []
  const queue: Array<Job> = []
  const waiting: Array<() => void> = []
  let closed = false
  let inWorkers = 0, here = 0, replaced = 0, engineFailures = 0

  let starting: Promise<void> | undefined
  let told = false
  const settled = () => starting !== undefined && slots.every((s) => s.ready || s.dead)
  const notify = () => {
    if (!settled()) return
    if (!told && options.onStarted !== undefined) {
      told = true
      options.onStarted(slots.filter((s) => s.ready).length)
    }
    for (const resolve of waiting.splice(0)) resolve()
  }

  const die = (slot: Slot) => {
    if (slot.dead) return
    const wasReady = slot.ready
    slot.dead = true
    slot.ready = false
    clearTimeout(slot.timer)
    slot.worker.terminate()
    const job = slot.job
    slot.job = undefined
    job?.resolve(ENGINE_FAILURE)
    // one that had loaded is replaced; one that never loaded would not load again
    if (wasReady && !closed) {
      const fresh = spawn()
      if (fresh !== undefined) {
        slots[slots.indexOf(slot)] = fresh
        replaced++
      }
    }
    notify()
    pump()
  }

  const spawn = (): Slot | undefined => {
    let worker: Worker
    try {
      worker = new Worker(url)
    } catch {
      return undefined
    }
    // a pool left open (a test that never stops its app) must not keep the process alive
    ;(worker as { unref?: () => void }).unref?.()
    const slot: Slot = { worker, ready: false, dead: false, job: undefined, timer: undefined, generation: 1 }
    slot.timer = setTimeout(() => slot.ready || die(slot), startTimeoutMs)
    worker.onmessage = (event: MessageEvent) => {
      const data = event.data as { ready?: true; outcome?: CheckOutcome; generation?: number }
      if (data.ready === true) {
        clearTimeout(slot.timer)
        slot.ready = !slot.dead
        notify()
        return pump()
      }
      const job = slot.job
      if (job === undefined || data.outcome === undefined) return
      clearTimeout(slot.timer)
      slot.job = undefined
      inWorkers++
      if (data.generation !== undefined && data.generation > slot.generation) {
        engineFailures += data.generation - slot.generation
        slot.generation = data.generation
      }
      job.resolve(data.outcome)
      pump()
    }
    // a module that does not load, a worker that throws or exits: never used again
    worker.onerror = () => die(slot)
    worker.addEventListener("close", () => die(slot))
    // the compiled module is shared (each worker instantiates it in ~10 ms instead of compiling it)
    try {
      worker.postMessage({ module: compiledCedar() })
    } catch {
      worker.postMessage({ module: undefined })
    }
    return slot
  }

  const dispatch = (slot: Slot, job: Job) => {
    slot.job = job
    slot.timer = setTimeout(() => die(slot), answerTimeoutMs)
    try {
      slot.worker.postMessage({ text: job.text })
    } catch {
      die(slot)
    }
  }

  /** hands queued sets to idle ready workers; with no worker alive (or starting), checks them here */
  const pump = () => {
    while (queue.length > 0) {
      const idle = slots.find((s) => s.ready && s.job === undefined)
      if (idle !== undefined) {
        dispatch(idle, queue.shift()!)
        continue
      }
      if (slots.some((s) => !s.dead)) return
      const job = queue.shift()!
      here++
      job.resolve(checkHere(job.text))
    }
  }

  /** the engine's module compiled here (workers are handed it), then the workers, once */
  const start = () =>
    starting ??= initCedar().then(() => {
      if (closed) return
      for (let i = 0; i < size; i++) {
        const slot = spawn()
        if (slot !== undefined) slots.push(slot)
      }
      notify()
    })

  /** the same text asked for while it is being checked (a set many requests load at once) is checked once */
  const inFlight = new Map<string, Promise<CheckOutcome>>()
  const check = (text: string) => {
    let answer = inFlight.get(text)
    if (answer === undefined) {
      answer = start().then(() =>
        new Promise<CheckOutcome>((resolve) => {
          queue.push({ text, resolve })
          pump()
        })
      )
      inFlight.set(text, answer)
      void answer.then(() => inFlight.delete(text))
    }
    return answer
  }

  return {
    check,
    parse: async (text) => fromChecked(precheck(text) ?? await check(text)),
    stats: () => ({ ready: slots.filter((s) => s.ready).length, inWorkers, here, replaced, workerEngineFailures: engineFailures }),
    started: () =>
      start().then(() =>
        new Promise<number>((resolve) => {
          const answer = () => resolve(slots.filter((s) => s.ready).length)
          if (settled()) answer()
          else waiting.push(answer)
        })
      ),
    close: () => {
      closed = true
      for (const slot of slots) die(slot)
    }
  }
}

/** A parser for the service's lifetime; says how many workers came up (or warns that none did) once they start. */
export const cedarParserScoped = (options?: CedarParserOptions) =>
  Effect.gen(function*() {
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const onStarted = (ready: number) =>
      void runFork(ready === 0
        ? Effect.logWarning("Cedar parser workers did not start: parsing policy sets on the main thread")
        : Effect.logInfo(`Cedar parser workers ready: ${ready}`))
    return yield* Effect.acquireRelease(Effect.sync(() => makeCedarParser({ ...options, onStarted })), (p) => Effect.sync(p.close))
  })
