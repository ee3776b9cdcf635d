/**
 * AuditedEvents: an event and its audit-chain entry written in one statement on the chain head
 * this instance last wrote. Whatever else moves the head in between (another instance, `append`),
 * the chain stays one unbroken chain and every event keeps its entry; a statement that fails
 * leaves neither.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { AuditChain, canonicalJson, entryHash } from "../../src/platform/AuditChain.ts"
import { type AuditedEvent, AuditedEvents } from "../../src/platform/AuditedEvents.ts"
import { startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.stop())

const items = (developerId: string, n: number, tag: string): Array<AuditedEvent> =>
  Array.from({ length: n }, (_, i) => ({
    developerId,
    type: "vault.credential.exchanged",
    data: { tag, i },
    audit: { action: "service.vault.credential_exchanged", principalId: `user_${i}`, metadata: { tag, i } }
  }))

const record = (on: TestApp, batch: ReadonlyArray<AuditedEvent>) => on.run(Effect.flatMap(AuditedEvents, (a) => a.recordMany(batch)))
const append = (on: TestApp, developerId: string, action: string) =>
  on.run(Effect.flatMap(AuditChain, (a) => a.append({ developerId, action })))
const verify = (on: TestApp, developerId: string) => on.run(Effect.flatMap(AuditChain, (a) => a.verify(developerId)))

/**
 * Two batches: the first starts the chain (no head yet: the locking path), the second is written
 * on the head the first left, so this instance now knows a head it may find moved.
 */
const startChain = async (developerId: string) => {
  await record(app, items(developerId, 1, "first"))
  await record(app, items(developerId, 1, "second"))
}

/** the chain's seqs are 1..n with each prev_hash the hash before it; the events match the recorded entries */
const expectChain = async (developerId: string, entries: number, events: number) => {
  expect(await verify(app, developerId)).toEqual({ valid: true, checkedEntries: entries, firstBrokenAt: null, erasedEntries: 0, linkOnlyEntries: 0 })
  const [head] = await app.query("SELECT seq::int AS seq, hash FROM audit_heads WHERE developer_id = $1", [developerId])
  const [last] = await app.query("SELECT seq::int AS seq, hash FROM audit_log WHERE developer_id = $1 ORDER BY seq DESC LIMIT 1", [developerId])
  expect(head).toEqual(last)
  const [{ n }] = await app.query("SELECT count(*)::int AS n FROM events WHERE developer_id = $1", [developerId])
  expect(n).toBe(events)
}

test("entryHash is SHA-256 of the canonical JSON of the entry, byte for byte", () => {
  const entries = [
    { id: "alog_1", agentId: null, agentDid: null, grantId: null, principalId: null, developerId: "dev_1", action: "a", metadata: {},
      timestamp: "2026-11-22T10:00:00.000Z", prevHash: null, status: "success" },
    { id: "alog_2", agentId: "ag_\"q\"", agentDid: "did:x:ag", grantId: "grnt_é", principalId: "user\n1\u2028", developerId: "dev_1",
      action: "email.send", metadata: { z: [3, { y: null, b: "\\" }], a: 1.5, "ünï": true }, timestamp: "2026-11-22T10:00:00.001Z",
      prevHash: "ab".repeat(32), status: "blocked" }
  ]
  for (const e of entries) {
    expect(entryHash(e)).toBe(createHash("sha256").update(canonicalJson(e)).digest("hex"))
  }
  // a field left undefined is left out, as canonicalJson leaves it out
  const partial = { ...entries[0]!, agentId: undefined as unknown as null }
  expect(entryHash(partial)).toBe(createHash("sha256").update(canonicalJson(partial)).digest("hex"))
})

test("a first batch starts the chain; later batches continue it, each event beside its entry", async () => {
  const d = await app.signup()
  await record(app, items(d.developerId, 3, "one"))
  await record(app, items(d.developerId, 4, "two"))
  await expectChain(d.developerId, 7, 7)
  const rows = await app.query<{ seq: number; metadata: any }>(
    "SELECT seq::int AS seq, metadata FROM audit_log WHERE developer_id = $1 ORDER BY seq", [d.developerId])
  expect(rows.map((r) => `${r.metadata.tag}${r.metadata.i}`)).toEqual(["one0", "one1", "one2", "two0", "two1", "two2", "two3"])
})

test("entries appended elsewhere between batches: the next batch chains onto the moved head", async () => {
  const d = await app.signup()
  await startChain(d.developerId)
  await append(app, d.developerId, "other.writer")
  await append(app, d.developerId, "other.writer")
  await record(app, items(d.developerId, 2, "b"))
  await expectChain(d.developerId, 6, 4)
})

test("concurrent batches and appends on one chain: no fork, no loss", async () => {
  const d = await app.signup()
  await startChain(d.developerId)
  await Promise.all([
    ...Array.from({ length: 20 }, (_, i) => record(app, items(d.developerId, 5, `r${i}`))),
    ...Array.from({ length: 20 }, (_, i) => append(app, d.developerId, `plain.n${i}`))
  ])
  await expectChain(d.developerId, 122, 102)
})

test("a batch across developers writes each developer's chain", async () => {
  const [a, b] = [await app.signup(), await app.signup()]
  await record(app, [...items(a.developerId, 2, "a"), ...items(b.developerId, 3, "b"), ...items(a.developerId, 1, "a2")])
  await expectChain(a.developerId, 3, 3)
  await expectChain(b.developerId, 3, 3)
})

test("a subscribed endpoint gets a delivery row for each recorded event", async () => {
  const d = await app.signup()
  await record(app, items(d.developerId, 1, "start"))
  const hook = await app.request("POST", "/v1/webhooks", {
    apiKey: d.apiKey,
    body: { url: "http://127.0.0.1:9/hook", events: ["vault.credential.exchanged"] }
  })
  expect(hook.status).toBe(201)
  await record(app, items(d.developerId, 3, "hooked"))
  const rows = await app.query<{ tag: string; status: string }>(
    `SELECT e.data->>'tag' AS tag, w.status FROM webhook_deliveries w JOIN events e ON e.id = w.event_id
     WHERE w.developer_id = $1`, [d.developerId])
  expect(rows.map((r) => r.tag)).toEqual(["hooked", "hooked", "hooked"])
})

test("a statement that fails writes neither the entries nor the events", async () => {
  const d = await app.signup()
  await startChain(d.developerId)
  // a row squatting on the next seq (not through the chain) makes the insert of the next batch fail
  await app.query(
    `INSERT INTO audit_log (id, developer_id, seq, action, metadata, status, timestamp, hash, created_at)
     VALUES ('alog_squat', $1, 3, 'squat', '{}', 'success', 'x', 'x', now())`, [d.developerId])
  const failed = await record(app, items(d.developerId, 2, "lost")).then(() => "written", () => "failed")
  expect(failed).toBe("failed")
  const [{ n }] = await app.query("SELECT count(*)::int AS n FROM events WHERE developer_id = $1", [d.developerId])
  expect(n).toBe(2)
  const [head] = await app.query("SELECT seq::int AS seq FROM audit_heads WHERE developer_id = $1", [d.developerId])
  expect(head.seq).toBe(2)
  const [{ m }] = await app.query("SELECT count(*)::int AS m FROM audit_log WHERE developer_id = $1 AND action <> 'squat'", [d.developerId])
  expect(m).toBe(2)
})

test.skipIf(!usingRealPostgres)("two instances recording on one chain at once keep one chain", async () => {
  const second = await startTestApp({ databaseUrl: app.databaseUrl })
  try {
    const d = await app.signup()
    await startChain(d.developerId)
    await Promise.all(Array.from({ length: 30 }, (_, i) => record(i % 2 ? app : second, items(d.developerId, 4, `i${i}`))))
    await expectChain(d.developerId, 122, 122)
  } finally {
    await second.server.stop()
  }
})
