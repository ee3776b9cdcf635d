/**
 * PostgreSQL goes away under load (its connections cut, new ones refused) and comes back:
 * clear 503s while it is away, never a 500 or a hang, every acknowledged write still there
 * afterwards, and recovery without restarting the service.
 */
import { expect, test } from "bun:test"
import pg from "pg"
import { createDatabase, startTestApp, usingRealPostgres } from "../support/app.ts"
import { startProxy } from "../support/proxy.ts"

test.skipIf(!usingRealPostgres)("PostgreSQL restarted under load", async () => {
  const db = await createDatabase()
  const direct = new URL(db.url)
  const proxy = await startProxy(direct.hostname, Number(direct.port || 5432))
  const viaProxy = new URL(db.url)
  viaProxy.hostname = "127.0.0.1"
  viaProxy.port = String(proxy.port)
  const app = await startTestApp({ databaseUrl: viaProxy.toString(), env: { RATE_LIMIT_SCALE: "100" } })
  const acknowledged: Array<string> = []
  const statuses = new Map<number, number>()
  let running = true
  let maxLatency = 0
  const writer = async () => {
    while (running) {
      const started = performance.now()
      const res = await app.request("POST", "/v1/signup", { body: { name: "load" } })
      maxLatency = Math.max(maxLatency, performance.now() - started)
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
      if (res.status === 201) acknowledged.push(res.body.developerId)
      else {
        expect(res.status).toBe(503)
        expect(res.body.code).toBe("DATABASE_UNAVAILABLE")
        expect(res.body.requestId).toBe(res.headers.get("x-request-id"))
        await Bun.sleep(20)
      }
    }
  }
  try {
    const writers = Array.from({ length: 4 }, writer)
    await Bun.sleep(300)
    await proxy.cut()
    await Bun.sleep(1000)
    const health = await app.request("GET", "/health")
    expect(health.status).toBe(503)
    expect(health.body).toEqual({ status: "degraded", failing: ["db"] })
    await proxy.restore()
    // recovery without restart
    let recovered = false
    for (let i = 0; i < 100 && !recovered; i++) {
      recovered = (await app.request("POST", "/v1/signup", { body: { name: "after" } })).status === 201
      if (!recovered) await Bun.sleep(50)
    }
    running = false
    await Promise.all(writers)
    expect(recovered).toBe(true)
    expect(statuses.get(503) ?? 0).toBeGreaterThan(0)
    expect(statuses.get(500) ?? 0).toBe(0)
    expect(maxLatency).toBeLessThan(5000)
    // every acknowledged write is there
    const check = new pg.Client({ connectionString: db.url })
    await check.connect()
    const rows = await check.query("SELECT id FROM developers WHERE id = ANY($1)", [acknowledged])
    await check.end()
    expect(rows.rowCount).toBe(acknowledged.length)
    expect(acknowledged.length).toBeGreaterThan(0)
  } finally {
    running = false
    await app.stop()
    await proxy.close()
    await db.drop()
  }
}, 120_000)
