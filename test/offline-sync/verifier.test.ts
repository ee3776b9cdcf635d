/**
 * Issue 16 item 14: the signature verifier never hangs. Workers take slices only once ready; a
 * worker module that does not load, or a worker that stops answering, leaves the checks to the
 * main thread, with the same results.
 */
import { expect, test } from "bun:test"
import { Effect } from "effect"
import { generateKeyPairSync, sign } from "node:crypto"
import { defaultWorkerUrl, makeVerifier, type VerifierOptions } from "../../src/offline-sync/Verifier.ts"

const { publicKey, privateKey } = generateKeyPairSync("ed25519")
const pem = publicKey.export({ type: "spki", format: "pem" }).toString()
const messages = Array.from({ length: 200 }, (_, i) => i.toString(16).padStart(64, "0"))
// every third signature is wrong
const signatures = messages.map((m, i) => i % 3 === 0 ? "00".repeat(64) : sign(null, Buffer.from(m), privateKey).toString("hex"))
const expected = Uint8Array.from(messages, (_, i) => (i % 3 === 0 ? 0 : 1))

const run = (options: VerifierOptions, waitMs: number) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const verifier = yield* makeVerifier(options)
    yield* Effect.promise(() => Bun.sleep(waitMs)) // let the workers come up (or fail to)
    const readyBefore = verifier.workers()
    const t = performance.now()
    const results = yield* Effect.flatten(verifier.start(messages, signatures, [pem]))
    return { results, readyBefore, readyAfter: verifier.workers(), ms: performance.now() - t }
  })))

test("the real workers come up, say so, and verify", async () => {
  const r = await run({ size: 2 }, 1_000)
  expect(r.readyBefore).toBe(2)
  expect(r.results).toEqual(expected)
  expect(defaultWorkerUrl()).toEndWith("/src/offline-sync/verifyWorker.ts")
})

test("a worker module that does not load: verified on the main thread, no hang", async () => {
  const r = await run({ size: 2, workerUrl: "file:///nonexistent/verifyWorker.ts" }, 300)
  expect([r.readyBefore, r.readyAfter]).toEqual([0, 0])
  expect(r.results).toEqual(expected)
  expect(r.ms).toBeLessThan(2_000)
})

test("a worker that stops answering is given up at the answer timeout and its slice verified here", async () => {
  const r = await run({ size: 2, workerUrl: new URL("./stuckWorker.ts", import.meta.url).href, answerTimeoutMs: 300 }, 1_000)
  expect(r.readyBefore).toBe(2)
  expect(r.results).toEqual(expected)
  expect(r.ms).toBeGreaterThanOrEqual(250)
  expect(r.ms).toBeLessThan(2_000)
  expect(r.readyAfter).toBe(0)
})
