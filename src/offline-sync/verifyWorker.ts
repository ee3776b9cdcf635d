/**
 * Worker thread of the signature verifier: Ed25519 checks of offline audit entries, off the HTTP
 * thread. Says { ready: true } once loaded (the pool sends it nothing before), then receives
 * { id, messages, signatures, keys } and answers { id, results } (1 = verified by one of the keys).
 */
import { verifyBatch } from "./verifyCore.ts"

declare const self: Worker

self.onmessage = (event: MessageEvent) => {
  const { id, messages, signatures, keys } = event.data as { id: number; messages: Array<string>; signatures: Array<string>; keys: Array<string> }
  const results = verifyBatch(messages, signatures, keys)
  self.postMessage({ id, results }, [results.buffer])
}
self.postMessage({ ready: true })
