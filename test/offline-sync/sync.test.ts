/** Offline audit sync: per-entry outcomes, idempotency, chain continuity, concurrency, the device kit. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import fc from "fast-check"
import { createHash } from "node:crypto"
import { canonicalInputWithMetadata } from "../../src/offline/canonical.ts"
import { hashEntry, OfflineAgent, type ConsentBundle, type SignedAuditEntry, verifyGrantToken } from "../../src/offline/index.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
let agentId: string

beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "1000" } })
  dev = await app.signup({ plan: "enterprise" })
  agentId = await createAgent(app, dev.developerId, ["email:read"])
})
afterAll(() => app.stop())

const newBundle = async (): Promise<ConsentBundle> =>
  (await app.request("POST", "/v1/consent-bundles", { apiKey: dev.apiKey, body: { agentId, userId: "user_1", scopes: ["email:read"] } })).body

const sync = (bundleId: string, entries: ReadonlyArray<unknown>, apiKey = dev.apiKey) =>
  app.request("POST", "/v1/audit/offline-sync", { apiKey, body: { bundleId, entries } })

const agentWith = async (n: number) => {
  const bundle = await newBundle()
  const agent = await OfflineAgent.load(bundle)
  for (let i = 0; i < n; i++) agent.record(`email.read`, "success", i % 2 ? { i, nested: { z: 1, a: [1, "x"] } } : undefined)
  return { bundle, agent, entries: agent.batches(1000)[0] ?? [] }
}

/** re-sign an entry after changing it, so only the intended check fails */
const resign = (bundle: ConsentBundle, e: SignedAuditEntry, change: Partial<SignedAuditEntry>): SignedAuditEntry => {
  const { hash: _h, signature: _s, ...fields } = { ...e, ...change }
  const hash = hashEntry(fields)
  const { ed25519 } = require("@noble/curves/ed25519.js")
  const { ed25519SeedFromPkcs8 } = require("../../src/offline/index.ts")
  const signature = Buffer.from(ed25519.sign(new TextEncoder().encode(hash), ed25519SeedFromPkcs8(bundle.offlineAuditKey.privateKey))).toString("hex")
  return { ...fields, hash, signature } as SignedAuditEntry
}

describe("sync", () => {
  test("a valid chain is accepted, counters kept, result shape exact; resend is idempotent", async () => {
    const { bundle, agent, entries } = await agentWith(5)
    const res = await sync(bundle.bundleId, entries)
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ accepted: 5, rejected: 0, revocationStatus: "active", revokedAt: null, errors: [] })
    expect(agent.applySyncResult(entries, res.body)).toBe("synced")
    const summary = (await app.request("GET", `/v1/consent-bundles/${bundle.bundleId}`, { apiKey: dev.apiKey })).body
    expect(summary.auditEntryCount).toBe(5)
    expect(summary.lastSyncAt).not.toBeNull()
    const again = await sync(bundle.bundleId, entries)
    expect(again.body).toEqual({ accepted: 5, rejected: 0, revocationStatus: "active", revokedAt: null, errors: [] })
    const [{ n }] = await app.query<{ n: number }>("SELECT count(*)::int AS n FROM offline_audit_entries WHERE bundle_id = $1", [bundle.bundleId]) as any
    expect(n).toBe(5)
    // the chain continues across requests
    for (let i = 0; i < 3; i++) agent.record("calendar.read", "auth_failure")
    const next = await sync(bundle.bundleId, agent.batches()[0]!)
    expect(next.body.accepted).toBe(3)
    expect((await app.request("GET", `/v1/consent-bundles/${bundle.bundleId}`, { apiKey: dev.apiKey })).body.auditEntryCount).toBe(8)
  })

  test("one tampered entry in the middle is rejected and the later consistent entries are kept", async () => {
    const { bundle, entries } = await agentWith(6)
    const tampered = entries.map((e, i) => i === 2 ? { ...e, action: "email.delete" } : e)
    const res = await sync(bundle.bundleId, tampered)
    expect(res.body.accepted).toBe(5)
    expect(res.body.rejected).toBe(1)
    expect(res.body.errors).toEqual([{ seq: 3, code: "INVALID_HASH", message: expect.any(String) }])
  })

  test("each per-entry code: DUPLICATE_SEQ, INVALID_SIGNATURE, SEQ_GAP, BROKEN_CHAIN", async () => {
    const { bundle, entries } = await agentWith(4)
    await sync(bundle.bundleId, entries.slice(0, 2))
    const dup = await sync(bundle.bundleId, [resign(bundle, entries[1]!, { action: "other" })])
    expect(dup.body.errors.map((e: any) => e.code)).toEqual(["DUPLICATE_SEQ"])
    const badSig = await sync(bundle.bundleId, [{ ...entries[2]!, signature: "ab".repeat(64) }])
    expect(badSig.body.errors.map((e: any) => e.code)).toEqual(["INVALID_SIGNATURE"])
    const gap = await sync(bundle.bundleId, [entries[3]!])
    expect(gap.body.errors.map((e: any) => e.code)).toEqual(["SEQ_GAP"])
    const broken = await sync(bundle.bundleId, [resign(bundle, entries[2]!, { prevHash: "f".repeat(64) })])
    expect(broken.body.errors.map((e: any) => e.code)).toEqual(["BROKEN_CHAIN"])
    const ok = await sync(bundle.bundleId, [entries[2]!, entries[3]!])
    expect(ok.body).toMatchObject({ accepted: 2, rejected: 0 })
  })

  test("failed signatures: the rows, head and count stored are exactly those of the accepted entries", async () => {
    // entries are written while signatures are checked; a failed one must leave no trace
    const stored = async (bundleId: string) => {
      const rows = await app.query<{ seq: string }>("SELECT seq FROM offline_audit_entries WHERE bundle_id = $1 ORDER BY seq", [bundleId])
      const [b] = await app.query<{ head: number; headhash: string; count: number }>(
        "SELECT head_seq::int AS head, head_hash AS headhash, audit_entry_count::int AS count FROM consent_bundles WHERE id = $1", [bundleId])
      return { seqs: rows.map((r) => Number(r.seq)), head: b!.head, headHash: b!.headhash, count: b!.count }
    }
    const bad = (e: SignedAuditEntry) => ({ ...e, signature: "ab".repeat(64) })
    // 40 entries (checked on the worker pool), bad signatures in the middle and at the end
    const { bundle, entries } = await agentWith(40)
    const batch = entries.map((e, i) => i === 9 || i === 39 ? bad(e) : e)
    const res = await sync(bundle.bundleId, batch)
    expect(res.body).toMatchObject({ accepted: 38, rejected: 2 })
    expect(res.body.errors.map((e: any) => [e.seq, e.code])).toEqual([[10, "INVALID_SIGNATURE"], [40, "INVALID_SIGNATURE"]])
    const after = await stored(bundle.bundleId)
    expect(after.seqs).toEqual(entries.map((e) => e.seq).filter((seq) => seq !== 10 && seq !== 40))
    expect(after).toMatchObject({ head: 39, headHash: entries[38]!.hash, count: 38 })
    // the summary agrees, and a later sync continues from seq 39
    expect((await app.request("GET", `/v1/consent-bundles/${bundle.bundleId}`, { apiKey: dev.apiKey })).body.auditEntryCount).toBe(38)
    expect((await sync(bundle.bundleId, [entries[39]!])).body).toMatchObject({ accepted: 1, rejected: 0 })
    expect(await stored(bundle.bundleId)).toMatchObject({ head: 40, count: 39 })

    // a failed entry followed by a good copy of it: had every signature held, the failed one would
    // be stored and the copy counted as a resend; judged for real, the failed one is rejected and
    // still serves as prev, so the copy is a SEQ_GAP and neither is stored
    const second = await agentWith(3)
    const replay = [second.entries[0]!, bad(second.entries[1]!), second.entries[1]!, second.entries[2]!]
    const res2 = await sync(second.bundle.bundleId, replay)
    expect(res2.body).toMatchObject({ accepted: 2, rejected: 2 })
    expect(res2.body.errors.map((e: any) => [e.seq, e.code])).toEqual([[2, "INVALID_SIGNATURE"], [2, "SEQ_GAP"]])
    expect(await stored(second.bundle.bundleId)).toMatchObject({ seqs: [1, 3], head: 3, headHash: second.entries[2]!.hash, count: 2 })

    // every signature failed: nothing stored, head untouched
    const third = await agentWith(3)
    const res3 = await sync(third.bundle.bundleId, third.entries.map(bad))
    expect(res3.body).toMatchObject({ accepted: 0, rejected: 3 })
    expect(await stored(third.bundle.bundleId)).toMatchObject({ seqs: [], head: 0, count: 0 })
  })

  test("request errors: 400 INVALID_REQUEST, 401, 404 BUNDLE_NOT_FOUND, 413 over 1000 entries", async () => {
    const { bundle, entries } = await agentWith(1)
    for (const body of [{}, { bundleId: bundle.bundleId }, { bundleId: bundle.bundleId, entries: {} }, { bundleId: 1, entries: [] },
      { bundleId: bundle.bundleId, entries: [{ ...entries[0], seq: "1" }] }, { bundleId: bundle.bundleId, entries: [{ ...entries[0], scopes: [1] }] },
      { bundleId: bundle.bundleId, entries: [{ ...entries[0], hash: undefined }] },
      ...[null, "text", 5, [1, 2]].map((metadata) => ({ bundleId: bundle.bundleId, entries: [{ ...entries[0], metadata }] }))]) {
      const res = await app.request("POST", "/v1/audit/offline-sync", { apiKey: dev.apiKey, body })
      expect(res.status).toBe(400)
      expect(res.body.code).toBe("INVALID_REQUEST")
    }
    expect((await app.request("POST", "/v1/audit/offline-sync", { apiKey: dev.apiKey, rawBody: "{nope" })).body.code).toBe("INVALID_REQUEST")
    expect((await sync(bundle.bundleId, entries, "sk_live_invalidinvalidinvalidinvalid")).status).toBe(401)
    const missing = await sync("bundle_missing", entries)
    expect(missing.status).toBe(404)
    expect(missing.body.code).toBe("BUNDLE_NOT_FOUND")
    const other = await app.signup()
    expect((await sync(bundle.bundleId, entries, other.apiKey)).body.code).toBe("BUNDLE_NOT_FOUND")
    const tooMany = await sync(bundle.bundleId, Array.from({ length: 1001 }, () => ({})))
    expect(tooMany.status).toBe(413)
    expect(tooMany.body.code).toBe("PAYLOAD_TOO_LARGE")
  })

  test("revoked bundle: entries still stored, result says revoked, the kit wipes the bundle", async () => {
    const { bundle, agent, entries } = await agentWith(3)
    const revoked = await app.request("POST", `/v1/consent-bundles/${bundle.bundleId}/revoke`, { apiKey: dev.apiKey })
    const res = await sync(bundle.bundleId, entries)
    expect(res.body).toEqual({ accepted: 3, rejected: 0, revocationStatus: "revoked", revokedAt: revoked.body.revokedAt, errors: [] })
    expect(agent.applySyncResult(entries, res.body)).toBe("wiped")
    expect(agent.wiped).toBe(true)
    expect(agent.state.bundle).toBeNull()
    expect(() => agent.record("x", "success")).toThrow()
  })

  test("10 concurrent identical syncs store each entry once", async () => {
    const { bundle, entries } = await agentWith(50)
    const results = await Promise.all(Array.from({ length: 10 }, () => sync(bundle.bundleId, entries)))
    expect(results.every((r) => r.status === 200 && r.body.accepted === 50 && r.body.rejected === 0)).toBe(true)
    const rows = await app.query<{ n: number; c: number }>(
      "SELECT (SELECT count(*)::int FROM offline_audit_entries WHERE bundle_id = $1) AS n, (SELECT audit_entry_count FROM consent_bundles WHERE id = $1) AS c",
      [bundle.bundleId]
    )
    expect(rows[0]).toEqual({ n: 50, c: 50 })
  })

  test("the kit across two batches and a refresh: entries signed with the old key still accepted", async () => {
    const bundle = await newBundle()
    const agent = await OfflineAgent.load(bundle)
    for (let i = 0; i < 7; i++) agent.record("email.read", "success", { i })
    const [first, second] = agent.batches(5)
    expect(first).toHaveLength(5)
    expect(second).toHaveLength(2)
    expect((await sync(bundle.bundleId, first!)).body.accepted).toBe(5)
    agent.applySyncResult(first!, { accepted: 5, rejected: 0, revocationStatus: "active", revokedAt: null, errors: [] })
    // refresh while two old-key entries are still pending
    const refreshed = (await app.request("POST", `/v1/consent-bundles/${bundle.bundleId}/refresh`, { apiKey: dev.apiKey })).body
    await agent.replaceBundle(refreshed)
    agent.record("email.read", "success")
    const pending = agent.batches()[0]!
    expect(pending.map((e) => e.seq)).toEqual([6, 7, 8])
    const res = await sync(bundle.bundleId, pending)
    expect(res.body).toMatchObject({ accepted: 3, rejected: 0 })
  })

  test("after two refreshes the first key no longer signs for the bundle; the previous one still does", async () => {
    const bundle = await newBundle()
    const agent = await OfflineAgent.load(bundle)
    agent.record("email.read", "success") // seq 1, first key
    const refresh = async () => {
      const r = (await app.request("POST", `/v1/consent-bundles/${bundle.bundleId}/refresh`, { apiKey: dev.apiKey })).body
      await agent.replaceBundle(r)
    }
    await refresh()
    agent.record("email.read", "success") // seq 2, second key
    await refresh()
    agent.record("email.read", "success") // seq 3, third key
    const res = await sync(bundle.bundleId, agent.batches()[0]!)
    expect(res.body.accepted).toBe(2)
    expect(res.body.errors).toEqual([{ seq: 1, code: "INVALID_SIGNATURE", message: expect.any(String) }])
    // seq 2 was judged against seq 1 as its prev (a rejected entry still serves as prev): accepted with the
    // second key; seq 3 with the current one
  })

  test("metadata is hashed in the key order the device wrote, integer-like keys included (decisions §5)", async () => {
    const bundle = await newBundle()
    const claims = JSON.parse(Buffer.from(bundle.grantToken.split(".")[1]!, "base64url").toString())
    // what a device with its own serializer writes and hashes: "2" after "b", 2.50 written long
    const written = '{ "b": 1, "2": { "z": [1, 2.50, "x\\u0041"], "10": true } }'
    const asHashed = '{"b":1,"2":{"z":[1,2.5,"xA"],"10":true}}'
    const fields = {
      seq: 1, timestamp: "2026-11-22T10:00:00.000Z", action: "email.read", agentDID: claims.agt, grantId: claims.grnt,
      scopes: claims.scp, result: "success", prevHash: "0000000000000000"
    }
    const hash = createHash("sha256").update(canonicalInputWithMetadata(fields, asHashed)).digest("hex")
    const { ed25519 } = require("@noble/curves/ed25519.js")
    const { ed25519SeedFromPkcs8 } = require("../../src/offline/index.ts")
    const signature = Buffer.from(ed25519.sign(new TextEncoder().encode(hash), ed25519SeedFromPkcs8(bundle.offlineAuditKey.privateKey))).toString("hex")
    // JSON.parse would put "10" before "z" and "2" before "b": the usual reading cannot match
    expect(JSON.stringify(JSON.parse(written))).not.toBe(asHashed)
    const rawBody = JSON.stringify({ bundleId: bundle.bundleId, entries: [{ ...fields, metadata: "__M__", hash, signature }] })
      .replace('"__M__"', written)
    const res = await app.request("POST", "/v1/audit/offline-sync", { apiKey: dev.apiKey, rawBody })
    expect(res.body).toEqual({ accepted: 1, rejected: 0, revocationStatus: "active", revokedAt: null, errors: [] })
    // stored as hashed, so the stored chain re-hashes to what was signed
    const [row] = await app.query<{ metadata: string }>("SELECT metadata FROM offline_audit_entries WHERE bundle_id = $1", [bundle.bundleId])
    expect(row!.metadata).toBe(asHashed)
    // and a changed value is still INVALID_HASH
    const tampered = rawBody.replace('"b": 1', '"b": 2').replace(`"seq":1`, `"seq":1`)
    const other = await newBundle()
    const again = await app.request("POST", "/v1/audit/offline-sync", { apiKey: dev.apiKey, rawBody: tampered.replace(bundle.bundleId, other.bundleId) })
    expect(again.body.errors.map((e: any) => e.code)).toEqual(["INVALID_HASH"])
  })

  test("the kit answers not valid (never throws) for a snapshot key or signature it cannot read", async () => {
    const bundle = await newBundle()
    const [key] = bundle.jwksSnapshot.keys as Array<any>
    const unreadableKey = { ...bundle, jwksSnapshot: { ...bundle.jwksSnapshot, keys: [{ ...key, n: "%%%" }] } }
    expect(await verifyGrantToken(unreadableKey as ConsentBundle)).toMatchObject({ valid: false })
    const [h, p] = bundle.grantToken.split(".")
    expect(await verifyGrantToken({ ...bundle, grantToken: `${h}.${p}.***` })).toMatchObject({ valid: false })
    expect(await verifyGrantToken(bundle)).toMatchObject({ valid: true })
  })

  test("the kit drops every sent entry once the server has answered, rejected ones included", async () => {
    const { bundle, agent, entries } = await agentWith(3)
    const tampered = [entries[0]!, { ...entries[1]!, action: "email.send" }, entries[2]!]
    const res = await sync(bundle.bundleId, tampered)
    expect(res.body).toMatchObject({ accepted: 2, rejected: 1 })
    expect(agent.applySyncResult(tampered, res.body)).toBe("synced")
    expect(agent.state.pending).toEqual([])
  })

  test("property: any valid chain is fully accepted; any single-field mutation is rejected with the right code", async () => {
    const bundle = await newBundle()
    const agent = await OfflineAgent.load(bundle)
    for (let i = 0; i < 4; i++) agent.record("email.read", "success", { i })
    const chain = agent.batches()[0]!
    // a fresh bundle per run would be slow; each run mutates one entry of a copy and syncs to a new bundle only when needed
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("seq", "timestamp", "action", "agentDID", "grantId", "scopes", "result", "metadata", "prevHash", "hash", "signature"),
        fc.integer({ min: 0, max: 3 }),
        async (field, index) => {
          const target = await newBundle()
          const a = await OfflineAgent.load(target)
          for (let i = 0; i < 4; i++) a.record("email.read", "success", { i })
          const entries = a.batches()[0]!.map((e) => ({ ...e })) as Array<any>
          const e = entries[index]
          const original = e[field]
          e[field] = field === "seq" ? original + 10 : field === "scopes" ? [...original, "x"] : field === "metadata" ? { changed: true }
            : field === "result" ? (original === "success" ? "auth_failure" : "success")
            : field === "signature" ? (original[0] === "a" ? "b" : "a") + original.slice(1)
            : field === "hash" ? (original[0] === "a" ? "b" : "a") + original.slice(1)
            : original + "x"
          const res = await sync(target.bundleId, entries)
          expect(res.status).toBe(200)
          const codes = res.body.errors.filter((x: any) => x.seq === e.seq).map((x: any) => x.code)
          const expected = field === "signature" ? "INVALID_SIGNATURE" : "INVALID_HASH"
          expect(codes).toEqual([expected])
          // a mutated seq or hash is still the next entry's `prev`, so the next one is out of sequence or off the chain
          const knockOn = index < 3 && (field === "seq" || field === "hash")
          expect(res.body.accepted).toBe(knockOn ? 2 : 3)
          if (knockOn) {
            expect(res.body.errors.find((x: any) => x.seq === entries[index + 1].seq).code).toBe(field === "seq" ? "SEQ_GAP" : "BROKEN_CHAIN")
          }
        }
      ),
      { numRuns: 25 }
    )
    expect((await sync(bundle.bundleId, chain)).body.accepted).toBe(4)
  }, 120_000)
})
