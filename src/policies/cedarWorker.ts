/**
 * Worker thread of the Cedar parser (CedarPool.ts): the engine's parse and validation of uploaded
 * sets, off the HTTP thread, with the worker's own engine. Its first message is { module } (the
 * main thread's compiled wasm, or undefined: then it compiles its own); it says { ready: true } once
 * its engine is up (the pool sends it sets only after), then receives { text } and answers
 * { outcome, generation } (how many engines it has made: a trap re-creates it, as on the main thread).
 */
import { checkHere } from "./CedarCheck.ts"
import { engineGeneration, initCedar } from "./CedarEngine.ts"

declare const self: Worker

let started = false
self.onmessage = (event: MessageEvent) => {
  if (!started) {
    started = true
    void initCedar((event.data as { module?: WebAssembly.Module }).module).then(() => self.postMessage({ ready: true }))
    return
  }
  const { text } = event.data as { text: string }
  self.postMessage({ outcome: checkHere(text), generation: engineGeneration() })
}
