/**
 * GET /v1/events/stream (decisions §23): server-sent events from the outbox, resumable with
 * Last-Event-ID without a gap or a repeat, across instances, scoped to the key's developer, at most
 * 5 open streams per developer, heartbeats on the service's clock.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { Effect } from "effect"
import { Events } from "../../src/platform/Events.ts"
import { startTestApp, type TestApp, usingRealPostgres, usingRealRedis } from "../support/app.ts"

interface SseEvent { id: string; event: string; data: any }

/** A minimal EventSource: reads frames until `stopAfter` events (then aborts) or `until` says done. */
const openStream = async (app: TestApp, apiKey: string, options: { lastEventId?: string; types?: string } = {}) => {
  const controller = new AbortController()
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey}` }
  if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId
  const query = options.types === undefined ? "" : `?types=${encodeURIComponent(options.types)}`
  const response = await fetch(`${app.url}/v1/events/stream${query}`, { headers, signal: controller.signal })
  const events: Array<SseEvent> = []
  const comments: Array<string> = []
  let done: Promise<void> = Promise.resolve()
  if (response.status === 200) {
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let buffer = ""
    done = (async () => {
      try {
        while (true) {
          const { value, done } = await reader.read()
          if (done) return
          buffer += decoder.decode(value, { stream: true })
          let at: number
          while ((at = buffer.indexOf("\n\n")) !== -1) {
            const block = buffer.slice(0, at)
            buffer = buffer.slice(at + 2)
            const fields: Record<string, string> = {}
            for (const line of block.split("\n")) {
              if (line.startsWith(":")) comments.push(line.slice(1).trim())
              else {
                const colon = line.indexOf(":")
                fields[line.slice(0, colon)] = line.slice(colon + 1).trimStart()
              }
            }
            if (fields.id !== undefined) events.push({ id: fields.id, event: fields.event!, data: JSON.parse(fields.data!) })
          }
        }
      } catch {
        // aborted
      }
    })()
  }
  return { response, events, comments, close: async () => { controller.abort(); await done } }
}

const until = async (check: () => boolean, ms = 20_000) => {
  const end = Date.now() + ms
  while (!check() && Date.now() < end) await Bun.sleep(10)
  return check()
}

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(async () => {
  await app.stop()
})

const emit = (target: TestApp, developerId: string, n: number, type: "grant.created" | "grant.revoked" = "grant.created") =>
  target.run(Effect.flatMap(Events, (e) => e.emit(developerId, type, { n })))

test("a client that disconnects during a burst of 100 events and reconnects with Last-Event-ID gets each exactly once", async () => {
  const d = await app.signup()
  const first = await openStream(app, d.apiKey)
  expect(first.response.status).toBe(200)
  expect(first.response.headers.get("content-type")).toContain("text/event-stream")
  expect(first.response.headers.get("cache-control")).toBe("no-store")
  // the burst: 100 events in concurrent transactions (some of several events each), commits interleaving
  let disconnected!: () => void
  const closed = new Promise<void>((resolve) => (disconnected = resolve))
  const burst = (async () => {
    for (let i = 0; i < 100; i += 10) {
      // the client drops after it has seen some: the rest of the burst happens while it is away
      if (i === 40) await closed
      await Promise.all([
        ...Array.from({ length: 5 }, (_, k) => emit(app, d.developerId, i + k)),
        app.run(Effect.flatMap(Events, (e) => e.emitMany(Array.from({ length: 5 }, (_, k) => ({
          developerId: d.developerId, type: "grant.created" as const, data: { n: i + 5 + k }
        })))))
      ])
    }
  })()
  expect(await until(() => first.events.length >= 20)).toBe(true)
  await first.close()
  disconnected()
  const seenFirst = first.events.length
  expect(seenFirst).toBeLessThan(100)
  await burst
  const second = await openStream(app, d.apiKey, { lastEventId: first.events[seenFirst - 1]!.id })
  expect(second.response.status).toBe(200)
  expect(await until(() => seenFirst + second.events.length >= 100)).toBe(true)
  await Bun.sleep(300) // a repeat would arrive in this window
  await second.close()
  const all = [...first.events.slice(0, seenFirst), ...second.events]
  const ns = all.map((e) => e.data.data.n).sort((a, b) => a - b)
  expect(ns).toEqual(Array.from({ length: 100 }, (_, i) => i))
  expect(new Set(all.map((e) => e.id)).size).toBe(100)
  // each frame is the webhook payload: id, type, createdAt, data
  const one = all[0]!
  expect(one.event).toBe("grant.created")
  expect(Object.keys(one.data).sort()).toEqual(["createdAt", "data", "id", "type"])
  expect(one.data.id).toBe(one.id)
  // the ids streamed are the outbox's
  const stored = await app.query<{ id: string }>("SELECT id FROM events WHERE developer_id = $1", [d.developerId])
  expect(new Set(stored.map((r) => r.id))).toEqual(new Set(all.map((e) => e.id)))
}, 60_000)

test("a stream carries only its developer's events, and only the asked types", async () => {
  const a = await app.signup()
  const b = await app.signup()
  const streamA = await openStream(app, a.apiKey, { types: "grant.revoked" })
  const streamB = await openStream(app, b.apiKey)
  await emit(app, a.developerId, 1, "grant.created")
  await emit(app, a.developerId, 2, "grant.revoked")
  await emit(app, b.developerId, 3, "grant.created")
  expect(await until(() => streamA.events.length >= 1 && streamB.events.length >= 1)).toBe(true)
  await Bun.sleep(300)
  await streamA.close()
  await streamB.close()
  expect(streamA.events.map((e) => [e.event, e.data.data.n])).toEqual([["grant.revoked", 2]])
  expect(streamB.events.map((e) => e.data.data.n)).toEqual([3])
})

test("an unknown type answers 400; no key 401; a read key may stream", async () => {
  const d = await app.signup()
  const bad = await app.request("GET", "/v1/events/stream?types=grant.created,nope", { apiKey: d.apiKey })
  expect(bad.status).toBe(400)
  expect(bad.body.code).toBe("BAD_REQUEST")
  expect(bad.body.message).toContain("nope")
  const anonymous = await app.request("GET", "/v1/events/stream")
  expect(anonymous.status).toBe(401)
  const key = await app.request("POST", "/v1/keys", { apiKey: d.apiKey, body: { name: "auditor", scope: "read" } })
  expect(key.status).toBe(201)
  const s = await openStream(app, key.body.apiKey)
  expect(s.response.status).toBe(200)
  await emit(app, d.developerId, 7)
  expect(await until(() => s.events.length === 1)).toBe(true)
  await s.close()
})

test("at most 5 open streams per developer: the 6th answers 429 TOO_MANY_CONNECTIONS, and a closed one frees its place", async () => {
  const d = await app.signup()
  const open = await Promise.all(Array.from({ length: 5 }, () => openStream(app, d.apiKey)))
  expect(open.map((s) => s.response.status)).toEqual([200, 200, 200, 200, 200])
  const sixth = await app.request("GET", "/v1/events/stream", { apiKey: d.apiKey })
  expect(sixth.status).toBe(429)
  expect(sixth.body.code).toBe("TOO_MANY_CONNECTIONS")
  // another developer is not limited by this one
  const other = await app.signup()
  const theirs = await openStream(app, other.apiKey)
  expect(theirs.response.status).toBe(200)
  await theirs.close()
  await open[0]!.close()
  let again: Awaited<ReturnType<typeof openStream>> | undefined
  expect(await until(() => false, 300)).toBe(false)
  for (let i = 0; i < 50; i++) {
    again = await openStream(app, d.apiKey)
    if (again.response.status === 200) break
    await Bun.sleep(50)
  }
  expect(again!.response.status).toBe(200)
  await again!.close()
  for (const s of open.slice(1)) await s.close()
})

test("a quiet stream sends a comment line every 15 s of the service's clock", async () => {
  const clocked = await startTestApp({ testClock: true })
  try {
    const d = await clocked.signup()
    const s = await openStream(clocked, d.apiKey)
    expect(await until(() => s.comments.includes("connected"))).toBe(true)
    expect(s.comments).not.toContain("keep-alive")
    await Bun.sleep(100)
    await clocked.adjust("15 seconds")
    expect(await until(() => s.comments.includes("keep-alive"))).toBe(true)
    await s.close()
  } finally {
    await clocked.stop()
  }
})

test.skipIf(!usingRealPostgres)("across instances: a stream on one instance gets what the other commits, and resumes on it", async () => {
  const two = await startTestApp({ databaseUrl: app.databaseUrl })
  try {
    const d = await app.signup()
    const s = await openStream(app, d.apiKey)
    await Promise.all(Array.from({ length: 20 }, (_, i) => emit(two, d.developerId, i)))
    expect(await until(() => s.events.length >= 20)).toBe(true)
    await s.close()
    const last = s.events[9]!.id
    const resumed = await openStream(two, d.apiKey, { lastEventId: last })
    expect(await until(() => resumed.events.length >= 10)).toBe(true)
    await Bun.sleep(300)
    await resumed.close()
    expect(resumed.events.map((e) => e.id)).toEqual(s.events.slice(10).map((e) => e.id))
  } finally {
    await two.stop()
  }
}, 60_000)

test("GET /v1/events/:id answers one event as its webhook body; another developer's is 404", async () => {
  const a = await app.signup()
  const b = await app.signup()
  const event = await app.run(Effect.flatMap(Events, (e) => e.emit(a.developerId, "grant.created", { grantId: "g1" })))
  const own = await app.request("GET", `/v1/events/${event.id}`, { apiKey: a.apiKey })
  expect(own.status).toBe(200)
  expect(own.body).toEqual({ id: event.id, type: "grant.created", createdAt: event.createdAt, data: { grantId: "g1" } })
  const theirs = await app.request("GET", `/v1/events/${event.id}`, { apiKey: b.apiKey })
  expect(theirs.status).toBe(404)
  expect(theirs.body.code).toBe("NOT_FOUND")
})

test.skipIf(!usingRealPostgres || !usingRealRedis)("the 5 streams are counted across instances sharing Redis", async () => {
  const prefix = `t_streams_${Date.now()}:`
  const one = await startTestApp({ redisKeyPrefix: prefix })
  const two = await startTestApp({ databaseUrl: one.databaseUrl, redisKeyPrefix: prefix })
  try {
    const d = await one.signup()
    const open = [
      ...await Promise.all(Array.from({ length: 3 }, () => openStream(one, d.apiKey))),
      ...await Promise.all(Array.from({ length: 2 }, () => openStream(two, d.apiKey)))
    ]
    expect(open.map((s) => s.response.status)).toEqual([200, 200, 200, 200, 200])
    for (const target of [one, two]) {
      const sixth = await target.request("GET", "/v1/events/stream", { apiKey: d.apiKey })
      expect(sixth.status).toBe(429)
      expect(sixth.body.code).toBe("TOO_MANY_CONNECTIONS")
    }
    await open[0]!.close() // one closed on the first instance: the second may open one
    let again: Awaited<ReturnType<typeof openStream>> | undefined
    for (let i = 0; i < 50; i++) {
      again = await openStream(two, d.apiKey)
      if (again.response.status === 200) break
      await Bun.sleep(50)
    }
    expect(again!.response.status).toBe(200)
    await again!.close()
    for (const s of open.slice(1)) await s.close()
  } finally {
    await two.stop()
    await one.stop()
  }
}, 60_000)
