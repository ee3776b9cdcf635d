/**
 * Issue 32: uploaded Cedar sets are parsed and validated in worker threads (src/policies/CedarPool.ts),
 * so one developer's uploads do not stall every tenant's requests. Asserted structurally: the pool
 * counts what its workers answered and what it checked on this thread. A worker that dies or goes
 * silent over a set costs only that set (the 422 POLICY_INVALID of an engine failure) and is replaced.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { ENGINE_FAILURE } from "../../src/policies/CedarCheck.ts"
import { initCedar } from "../../src/policies/CedarEngine.ts"
import { makeCedarParser } from "../../src/policies/CedarPool.ts"
import { PolicyEngine } from "../../src/policies/Service.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { authorize, b64 } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" } })
})
afterAll(async () => {
  await app?.stop()
})

const valid = (n: number) => `@id("reads") permit(principal, action == Action::"authorize", resource) when { ["email:read"].containsAll(context.scopes) };
@id("no-send") forbid(principal, action, resource) when { context.scopes.contains("email:send") }; // ${n}`
const deep = `permit(principal, action, resource) when { ${"(".repeat(200)}true${")".repeat(200)} };`
const sync = (apiKey: string, text: string, activate = false) =>
  app.request("POST", "/v1/policies/sync", { apiKey, body: { format: "cedar", version: "1", content: b64(text), activate } })
const parser = () => app.run(Effect.map(PolicyEngine, (engine) => engine.cedarParser))

describe("Cedar sets are parsed in worker threads", () => {
  test("an instance starts its parser workers with the first Cedar set it receives, not at start (issue 37)", async () => {
    const pool = await parser()
    expect(pool.stats()).toMatchObject({ ready: 0, inWorkers: 0, here: 0 })
    const { apiKey } = await app.signup()
    // rules alone never start the engine
    expect((await app.request("POST", "/v1/policies", { apiKey, body: { name: "r", effect: "deny", scopes: ["x:y"] } })).status).toBe(201)
    expect(pool.stats().ready).toBe(0)
    expect((await sync(apiKey, valid(0))).status).toBe(201)
    expect(pool.stats()).toMatchObject({ inWorkers: 1, here: 0 })
    expect(pool.stats().ready).toBeGreaterThan(0)
  })

  test("10 concurrent uploads and the load of an active set are each parsed by a worker, none on the event loop", async () => {
    const pool = await parser()
    expect(await pool.started()).toBeGreaterThan(0)
    const before = pool.stats()
    const { apiKey, developerId } = await app.signup()
    const uploads = await Promise.all(Array.from({ length: 10 }, (_, i) => sync(apiKey, valid(i))))
    expect(uploads.map((r) => r.status)).toEqual(Array(10).fill(201))
    expect(pool.stats().inWorkers - before.inWorkers).toBe(10)
    // the active set is parsed again (in a worker) when the first decision loads it
    expect((await sync(apiKey, valid(10), true)).status).toBe(201)
    const agentId = await createAgent(app, developerId, ["email:read", "email:send"])
    const allowed = await authorize(app, apiKey, agentId, "user_1", ["email:read"])
    expect([allowed.status, allowed.body.policyId]).toEqual([201, "reads"])
    expect((await authorize(app, apiKey, agentId, "user_1", ["email:send"])).body.code).toBe("POLICY_DENIED")
    expect(pool.stats().inWorkers - before.inWorkers).toBe(12)
    expect(pool.stats().here).toBe(before.here)
  })

  test("an engine trap inside a worker refuses that set alone; the worker's engine is re-created and serves the next", async () => {
    const pool = await parser()
    const before = pool.stats()
    // what the pre-scan refuses on the main thread, sent straight to a worker's engine
    expect(await pool.check(deep)).toEqual(ENGINE_FAILURE)
    expect(pool.stats()).toMatchObject({ workerEngineFailures: before.workerEngineFailures + 1, replaced: before.replaced, ready: before.ready })
    const { apiKey } = await app.signup()
    expect((await sync(apiKey, valid(1))).status).toBe(201)
    const refused = await sync(apiKey, deep)
    expect([refused.status, refused.body.code]).toEqual([422, "POLICY_INVALID"])
  })
})

describe("the pool survives its workers", () => {
  beforeAll(() => initCedar())
  const crashing = new URL("./crashingCedarWorker.ts", import.meta.url).href

  test("a worker that dies over a set costs only that set, and is replaced", async () => {
    const pool = makeCedarParser({ workerUrl: crashing, size: 2 })
    try {
      expect(await pool.started()).toBe(2)
      const [crashed, ...others] = await Promise.all([
        pool.parse(`${valid(0)}\n// crash the worker`),
        ...Array.from({ length: 6 }, (_, i) => pool.parse(valid(i + 1)))
      ])
      expect(crashed).toEqual(ENGINE_FAILURE)
      expect(others.map((o) => o.ok)).toEqual(Array(6).fill(true))
      expect(pool.stats()).toMatchObject({ replaced: 1, here: 0, inWorkers: 6 })
      expect(await pool.started()).toBe(2)
      expect((await pool.parse(valid(9))).ok).toBe(true)
      expect(pool.stats()).toMatchObject({ ready: 2, inWorkers: 7, here: 0 })
    } finally {
      pool.close()
    }
  })

  test("a worker silent past the answer timeout is replaced and its set refused", async () => {
    const pool = makeCedarParser({ workerUrl: crashing, size: 1, answerTimeoutMs: 300 })
    try {
      expect(await pool.started()).toBe(1)
      const [hung, next] = await Promise.all([pool.parse(`${valid(0)}\n// hang the worker`), pool.parse(valid(1))])
      expect(hung).toEqual(ENGINE_FAILURE)
      expect(next.ok).toBe(true)
      expect(pool.stats()).toMatchObject({ replaced: 1, inWorkers: 1, here: 0 })
    } finally {
      pool.close()
    }
  })

  test("with no worker that loads, sets are parsed on this thread", async () => {
    const pool = makeCedarParser({ workerUrl: new URL("./no-such-worker.ts", import.meta.url).href, size: 2 })
    try {
      expect(await pool.started()).toBe(0)
      expect((await pool.parse(valid(0))).ok).toBe(true)
      expect((await pool.parse(deep)).ok).toBe(false)
      expect(pool.stats()).toMatchObject({ ready: 0, inWorkers: 0, here: 1 })
    } finally {
      pool.close()
    }
  })
})
