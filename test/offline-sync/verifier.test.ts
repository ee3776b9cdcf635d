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

/** `waitFor`: the workers expected up before verifying (polled, for a loaded machine), or a fixed wait in ms for none */
const run = (options: VerifierOptions, waitFor: { workers: number } | number) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const verifier = yield* makeVerifier(options)
    // let the workers come up (or fail to)
    if (typeof waitFor === "number") yield* Effect.promise(() => Bun.sleep(waitFor))
    else for (let i = 0; i < 600 && verifier.workers() < waitFor.workers; i++) yield* Effect.promise(() => Bun.sleep(50))
    const readyBefore = verifier.workers()
    const t = performance.now()
    const results = yield* Effect.flatten(verifier.start(messages, signatures, [pem]))
    return { results, readyBefore, readyAfter: verifier.workers(), ms: performance.now() - t }
  })))

test("the real workers come up, say so, and verify", async () => {
  const r = await run({ size: 2 }, { workers: 2 })
  expect(r.readyBefore).toBe(2)
  expect(r.results).toEqual(expected)
  expect(defaultWorkerUrl()).toEndWith("/src/offline-sync/verifyWorker.ts")
})

test("a worker module that does not load: verified on the main thread, no hang", async () => {
  const r = await run({ size: 2, workerUrl: "file:///nonexistent/verifyWorker.ts" }, 300)
  expect([r.readyBefore, r.readyAfter]).toEqual([0, 0])
  expect(r.results).toEqual(expected)
  expect(r.ms).toBeLessThan(10_000) // a hang would be the test's timeout; wide apart for a loaded machine
})

test("a worker that stops answering is given up at the answer timeout and its slice verified here", async () => {
  const r = await run({ size: 2, workerUrl: new URL("./stuckWorker.ts", import.meta.url).href, answerTimeoutMs: 300 }, { workers: 2 })
  expect(r.readyBefore).toBe(2)
  expect(r.results).toEqual(expected)
  expect(r.ms).toBeGreaterThanOrEqual(250)
  expect(r.ms).toBeLessThan(10_000) // a hang would be the test's timeout; wide apart for a loaded machine
  expect(r.readyAfter).toBe(0)
})
