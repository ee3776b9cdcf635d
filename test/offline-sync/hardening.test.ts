/**
 * Issue 16 items 9 and 10 (decisions §19): an offline entry cannot be re-shaped under its own hash
 * (delimiters inside fields are refused), metadata is bounded, and the on-device kit keeps its queue
 * through every answer that is not a SyncResult for the batch it sent.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { ed25519 } from "@noble/curves/ed25519.js"
import { createServer, type Server } from "node:net"
import { ed25519SeedFromPkcs8, hashEntry, OfflineAgent, OfflineEntryError, type ConsentBundle, type SignedAuditEntry } from "../../src/offline/index.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
let agentId: string

beforeAll(async () => {
  app = await startTestApp()
  dev = await app.signup({ plan: "enterprise" })
  agentId = await createAgent(app, dev.developerId, ["email:read", "email:send"])
})
afterAll(() => app.stop())

const newBundle = async (): Promise<ConsentBundle> =>
  (await app.request("POST", "/v1/consent-bundles", { apiKey: dev.apiKey, body: { agentId, userId: "user_1", scopes: ["email:read", "email:send"] } })).body

const sync = (bundleId: string, entries: ReadonlyArray<unknown>, apiKey = dev.apiKey) =>
  app.request("POST", "/v1/audit/offline-sync", { apiKey, body: { bundleId, entries } })

const stored = async (bundleId: string) =>
  (await app.query<{ seq: string }>("SELECT seq FROM offline_audit_entries WHERE bundle_id = $1 ORDER BY seq", [bundleId])).map((r) => Number(r.seq))

/** signs fields with the device key the way a device would, bypassing the kit's own refusals */
const signed = (bundle: ConsentBundle, fields: Omit<SignedAuditEntry, "hash" | "signature">): SignedAuditEntry => {
  const hash = hashEntry(fields)
  const signature = Buffer.from(ed25519.sign(new TextEncoder().encode(hash), ed25519SeedFromPkcs8(bundle.offlineAuditKey.privateKey))).toString("hex")
  return { ...fields, hash, signature }
}

describe("item 9: delimiters and metadata size", () => {
  test("scopes [a, b] re-sent as [\"a,b\"] under the same hash and signature: INVALID_HASH, not stored", async () => {
    const bundle = await newBundle()
    const agent = await OfflineAgent.load(bundle)
    const [entry] = [agent.record("email.read", "success")]
    expect(entry!.scopes).toEqual(["email:read", "email:send"])
    const forged = { ...entry!, scopes: ["email:read,email:send"] }
    const res = await sync(bundle.bundleId, [forged])
    expect(res.status).toBe(200)
    expect(res.body).toEqual({
      accepted: 0, rejected: 1, revocationStatus: "active", revokedAt: null,
      errors: [{ seq: 1, code: "INVALID_HASH", message: expect.stringContaining("scopes") }]
    })
    expect(await stored(bundle.bundleId)).toEqual([])
    // the genuine entry still goes in
    expect((await sync(bundle.bundleId, [entry])).body).toMatchObject({ accepted: 1, rejected: 0 })
    expect(await stored(bundle.bundleId)).toEqual([1])
  })

  test("a correctly signed entry with | inside a joined field, or a , | or empty scope, is INVALID_HASH; the rest of the chain is judged", async () => {
    const bundle = await newBundle()
    const agent = await OfflineAgent.load(bundle)
    const good = agent.record("email.read", "success")
    const base = { ...good, seq: 2, prevHash: good.hash } as Omit<SignedAuditEntry, "hash" | "signature">
    const cases: Array<Partial<SignedAuditEntry>> = [
      { action: "email.read|x" },
      { timestamp: `${good.timestamp}|` },
      { agentDID: `${good.agentDID}|x` },
      { grantId: `|${good.grantId}` },
      { scopes: ["email:read|email:send"] },
      { scopes: ["email:read", ""] },
      { scopes: [""] }
    ]
    for (const change of cases) {
      const bad = signed(bundle, { ...base, ...change } as Omit<SignedAuditEntry, "hash" | "signature">)
      const res = await sync(bundle.bundleId, [good, bad])
      expect(res.body.errors).toEqual([{ seq: 2, code: "INVALID_HASH", message: expect.any(String) }])
      expect(res.body.accepted).toBe(1)
    }
    // a | inside metadata is fine: every field after it is free of one
    const withPipe = signed(bundle, { ...base, metadata: { note: "a|b" } })
    expect((await sync(bundle.bundleId, [withPipe])).body).toMatchObject({ accepted: 1, rejected: 0 })
    expect(await stored(bundle.bundleId)).toEqual([1, 2])
  })

  test("metadata over 16 KiB of UTF-8 JSON: 400 INVALID_REQUEST, nothing stored; exactly 16 KiB accepted", async () => {
    const bundle = await newBundle()
    const agent = await OfflineAgent.load(bundle)
    // {"p":"…"} is 8 bytes around the value; é is 2 bytes in UTF-8
    const exact = agent.record("email.read", "success", { p: "é".repeat(8188) })
    expect(new TextEncoder().encode(JSON.stringify(exact.metadata)).length).toBe(16_384)
    const over = signed(bundle, { ...exact, seq: 2, prevHash: exact.hash, metadata: { p: "é".repeat(8188) + "x" } })
    const res = await sync(bundle.bundleId, [exact, over])
    expect([res.status, res.body.code]).toEqual([400, "INVALID_REQUEST"])
    expect(res.body.message).toContain("entries[1].metadata")
    expect(await stored(bundle.bundleId)).toEqual([])
    expect((await sync(bundle.bundleId, [exact])).body).toMatchObject({ accepted: 1, rejected: 0 })
  })

  test("the kit refuses to record such entries, and records nothing", async () => {
    const agent = await OfflineAgent.load(await newBundle())
    expect(() => agent.record("send|now", "success")).toThrow(/action/)
    expect(() => agent.record("email.read", "success", { p: "x".repeat(16_377) })).toThrow(/metadata/)
    expect(agent.state.pending).toEqual([])
    expect(agent.record("email.read", "success", { p: "x".repeat(16_376) }).seq).toBe(1)
  })
})

describe("item 10: the kit keeps its queue unless a SyncResult accounts for the batch", () => {
  // bundle creation is limited to 10 a minute per address: the stand-in cases share one bundle
  let shared: ConsentBundle | undefined
  const queued = async (n: number, endpoint?: string) => {
    const bundle = endpoint === undefined ? await newBundle() : (shared ??= await newBundle())
    const loaded = await OfflineAgent.load(bundle)
    for (let i = 0; i < n; i++) loaded.record("email.read", "success", { i })
    const agent = await OfflineAgent.restore({ ...loaded.state, bundle: { ...bundle, syncEndpoint: endpoint ?? `${app.url}/v1/audit/offline-sync` } })
    return { bundle, agent, batch: agent.batches()[0]! }
  }

  const standIn = async (onConnection: (socket: import("node:net").Socket) => void): Promise<{ url: string; server: Server }> => {
    const server = createServer(onConnection)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.address() as { port: number }).port
    return { url: `http://127.0.0.1:${port}/v1/audit/offline-sync`, server }
  }

  test("401 from the service: kept, twice; applySyncResult of the error body keeps it too", async () => {
    const { agent, batch } = await queued(3)
    for (let i = 0; i < 2; i++) {
      expect(await agent.sync(batch, { apiKey: "sk_live_invalidinvalidinvalidinvalid" })).toEqual({ outcome: "kept", reason: "HTTP 401 UNAUTHORIZED", httpStatus: 401 })
    }
    expect(agent.state.pending.map((e) => e.seq)).toEqual([1, 2, 3])
    const errorBody = (await sync(agent.state.bundle!.bundleId, batch, "sk_live_invalidinvalidinvalidinvalid")).body
    expect(agent.applySyncResult(batch, errorBody)).toBe("kept")
    expect(agent.lastSyncProblem).toBe("the server answered UNAUTHORIZED")
    expect(agent.state.pending).toHaveLength(3)
    // then the real answer drops them
    expect(await agent.sync(batch, { apiKey: dev.apiKey })).toMatchObject({ outcome: "synced", result: { accepted: 3, rejected: 0 } })
    expect(agent.state.pending).toEqual([])
    expect(agent.lastSyncProblem).toBeNull()
  })

  test("429 from the service: kept, with Retry-After", async () => {
    const other = await app.signup({ plan: "enterprise" })
    const otherAgentId = await createAgent(app, other.developerId, ["email:read"])
    const bundle = (await app.request("POST", "/v1/consent-bundles", { apiKey: other.apiKey, body: { agentId: otherAgentId, userId: "u", scopes: ["email:read"] } })).body
    // the service's own address (PUBLIC_BASE_URL names no port in tests)
    const agent = await OfflineAgent.load({ ...bundle, syncEndpoint: `${app.url}/v1/audit/offline-sync` })
    agent.record("email.read", "success")
    const batch = agent.batches()[0]!
    let last: Awaited<ReturnType<typeof agent.sync>> | undefined
    for (let i = 0; i < 25 && last?.outcome !== "kept"; i++) {
      // empty batches use up the per-key sync budget without syncing anything
      if (i < 20) expect((await sync(bundle.bundleId, [], other.apiKey)).status).toBe(200)
      else last = await agent.sync(batch, { apiKey: other.apiKey })
    }
    expect(last).toMatchObject({ outcome: "kept", reason: "HTTP 429 RATE_LIMITED", httpStatus: 429, retryAfterSeconds: expect.any(Number) })
    expect(agent.state.pending).toHaveLength(1)
  })

  test("500, a dropped connection, no answer, a 200 that is not a SyncResult, a result for another batch: kept", async () => {
    const answer = (status: number, body: string) => (socket: import("node:net").Socket) =>
      socket.once("data", () => socket.end(`HTTP/1.1 ${status} X\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`))
    const servers: Array<Server> = []
    try {
      const cases: Array<[(s: import("node:net").Socket) => void, Record<string, unknown>, number?]> = [
        [answer(500, JSON.stringify({ code: "INTERNAL_ERROR", message: "x", requestId: "r" })), { reason: "HTTP 500 INTERNAL_ERROR", httpStatus: 500 }],
        [(socket) => socket.once("data", () => socket.destroy()), { reason: expect.stringMatching(/^network error/) }],
        [() => {}, { reason: "no answer in time" }, 300],
        [answer(200, "<html>proxy login</html>"), { reason: "the answer is not a SyncResult", httpStatus: 200 }],
        [answer(200, JSON.stringify({ accepted: 1, rejected: 0, revocationStatus: "active", revokedAt: null, errors: [] })),
          { reason: "the SyncResult does not account for the sent batch", httpStatus: 200 }]
      ]
      for (const [handler, expected, timeoutMs] of cases) {
        const { url, server } = await standIn(handler)
        servers.push(server)
        const { agent, batch } = await queued(4, url)
        const outcome = await agent.sync(batch, { apiKey: dev.apiKey, ...(timeoutMs ? { timeoutMs } : {}) })
        expect(outcome).toEqual({ outcome: "kept", ...expected } as any)
        expect(agent.state.pending.map((e) => e.seq)).toEqual([1, 2, 3, 4])
        expect(agent.wiped).toBe(false)
      }
    } finally {
      for (const s of servers) s.close()
    }
  })
})

describe("decisions §24: one bad entry never jams a device", () => {
  test("record() checks at run time what the types only promise: a wrong result or metadata throws OfflineEntryError, nothing queued", async () => {
    const agent = await OfflineAgent.load(await newBundle())
    const cycle: Record<string, unknown> = {}
    cycle.self = cycle
    const cases: Array<[unknown, unknown, string]> = [
      ["failure", undefined, "result"], // a word the old README used
      [undefined, undefined, "result"],
      ["success", ["a"], "metadata"],
      ["success", new Date(0), "metadata"],
      ["success", cycle, "metadata"]
    ]
    for (const [result, metadata, field] of cases) {
      let thrown: unknown
      try {
        agent.record("email.read", result as any, metadata as any)
      } catch (e) {
        thrown = e
      }
      expect([String(result), thrown instanceof OfflineEntryError, (thrown as OfflineEntryError).field]).toEqual([String(result), true, field])
    }
    expect(() => agent.record(42 as any, "success")).toThrow(OfflineEntryError)
    expect(agent.state.pending).toEqual([])
    expect(agent.record("email.read", "execution_error").seq).toBe(1)
  })

  test("an entry the service refuses (queued by an older kit) is set aside with its reason; the rest are chained again and sync; a revoked bundle still wipes the device", async () => {
    const bundle = await newBundle()
    const loaded = await OfflineAgent.load(bundle)
    const good = loaded.record("email.read", "success")
    // what a kit without the run-time check queued: correctly signed, refused by the service as a whole batch
    const bad = signed(bundle, { ...good, seq: 2, prevHash: good.hash, result: "failure" as any, timestamp: new Date().toISOString() })
    const here = { ...bundle, syncEndpoint: `${app.url}/v1/audit/offline-sync` }
    const agent = await OfflineAgent.restore({ ...loaded.state, bundle: here, seq: 2, lastHash: bad.hash, pending: [good, bad] })
    agent.record("email.send", "success")
    const first = await agent.sync(agent.batches()[0]!, { apiKey: dev.apiKey })
    expect(first).toEqual({ outcome: "refused", reason: expect.stringContaining("entries[1].result"), refused: [bad] })
    expect(agent.refusedEntries).toEqual([{ entry: bad, reason: first.outcome === "refused" ? first.reason : "" }])
    // the entry after it is chained again in its place (seq 2, after entry 1), re-signed, and goes through
    const [, rechained] = agent.state.pending
    expect(agent.state.pending.map((e) => [e.seq, e.action])).toEqual([[1, "email.read"], [2, "email.send"]])
    expect([rechained!.prevHash, agent.state.lastHash]).toEqual([good.hash, rechained!.hash])
    const second = await agent.sync(agent.batches()[0]!, { apiKey: dev.apiKey })
    expect(second).toMatchObject({ outcome: "synced", result: { accepted: 2, rejected: 0, errors: [] } })
    expect(await stored(bundle.bundleId)).toEqual([1, 2])
    // revoked later: the next sync still reaches the service and wipes the device
    await app.request("POST", `/v1/consent-bundles/${bundle.bundleId}/revoke`, { apiKey: dev.apiKey })
    agent.record("email.read", "success")
    expect((await agent.sync(agent.batches()[0]!, { apiKey: dev.apiKey })).outcome).toBe("wiped")
    expect(agent.wiped).toBe(true)
    // the refused entries survive a save and restore
    expect((await OfflineAgent.restore(agent.state)).refusedEntries.map((r) => [r.entry.seq, r.entry.result as string])).toEqual([[2, "failure"]])
  })
})
