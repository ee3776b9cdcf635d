/**
 * The service killed with SIGKILL in the middle of offline syncs and webhook deliveries, then
 * started again on the same database: no acknowledged entry is lost, and every event is delivered.
 */
import { expect, test } from "bun:test"
import { spawn, type ChildProcess } from "node:child_process"
import { createPrivateKey, sign } from "node:crypto"
import { GENESIS_HASH, hashEntry } from "../../src/offline/index.ts"
import { createDatabase, testPrivateKey, usingRealPostgres } from "../support/app.ts"
import { freePort } from "../support/net.ts"

const startService = async (env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> => {
  const port = await freePort()
  const child = spawn(process.execPath, ["src/main.ts", "serve"], {
    env: { ...process.env, ...env, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "error" },
    stdio: "ignore"
  })
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; i < 200; i++) {
    const ok = await fetch(`${url}/health`).then((r) => r.ok).catch(() => false)
    if (ok) return { child, url }
    await Bun.sleep(50)
  }
  throw new Error("service did not start")
}

test.skipIf(!usingRealPostgres)("SIGKILL during syncs and deliveries loses no acknowledged entry and no event", async () => {
  const db = await createDatabase()
  const received = new Set<string>()
  const receiver = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (r) => {
      received.add(JSON.parse(await r.text()).id)
      return new Response(null, { status: 204 })
    }
  })
  const env = {
    DATABASE_URL: db.url,
    REDIS_URL: process.env.TEST_REDIS_URL ?? "memory://",
    REDIS_KEY_PREFIX: `kill_${Date.now()}:`,
    RSA_PRIVATE_KEY: testPrivateKey(),
    // the same vault key across the restart, as in production (webhook secrets are sealed with it)
    VAULT_ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 7).toString("base64")}`,
    WEBHOOK_ALLOW_PRIVATE_HOSTS: "true",
    WEBHOOK_POLL_INTERVAL_SECONDS: "1",
    WEBHOOK_TIMEOUT_SECONDS: "1",
    RATE_LIMIT_SCALE: "1000"
  }
  let service = await startService(env)
  try {
    const call = (path: string, body: unknown, apiKey?: string) =>
      fetch(service.url + path, {
        method: "POST",
        headers: { "content-type": "application/json", ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
        body: JSON.stringify(body)
      })
    const { apiKey } = await (await call("/v1/signup", { name: "kill" })).json() as any
    await call("/v1/webhooks", { url: `http://127.0.0.1:${receiver.port}/hook`, events: ["consent_bundle.created", "grant.created", "token.issued"] }, apiKey)
    const agent = await (await call("/v1/agents", { name: "a", scopes: ["email:read"] }, apiKey)).json() as any

    // four devices syncing batches of 25 entries; bundles created meanwhile emit events
    const acknowledged: Array<{ bundleId: string; seq: number }> = []
    let running = true
    const device = async () => {
      // a device whose bundle was not made before the kill has nothing to sync
      const made = await call("/v1/consent-bundles", { agentId: agent.agentId, userId: "u", scopes: ["email:read"] }, apiKey).catch(() => undefined)
      if (made?.status !== 201) return
      const bundle = await made.json() as any
      const claims = JSON.parse(Buffer.from(bundle.grantToken.split(".")[1], "base64url").toString())
      const key = createPrivateKey(bundle.offlineAuditKey.privateKey)
      let seq = 0
      let prevHash = GENESIS_HASH
      while (running) {
        const entries = []
        for (let i = 0; i < 25; i++) {
          const fields = { seq: ++seq, timestamp: new Date().toISOString(), action: "a.b", agentDID: claims.agt, grantId: claims.grnt, scopes: claims.scp, result: "success" as const, prevHash }
          const hash = hashEntry(fields)
          entries.push({ ...fields, hash, signature: sign(null, Buffer.from(hash), key).toString("hex") })
          prevHash = hash
        }
        const res = await call("/v1/audit/offline-sync", { bundleId: bundle.bundleId, entries }, apiKey).catch(() => undefined)
        if (res?.status === 200) {
          const body = await res.json() as any
          if (body.accepted === 25) for (const e of entries) acknowledged.push({ bundleId: bundle.bundleId, seq: e.seq })
        } else return
      }
    }
    const devices = Array.from({ length: 4 }, device)
    const creators = (async () => {
      while (running) {
        const res = await call("/v1/consent-bundles", { agentId: agent.agentId, userId: "v", scopes: ["email:read"] }, apiKey).catch(() => undefined)
        if (res === undefined) return
      }
    })()
    // killed while work is in flight: once batches are being acknowledged (a loaded machine takes longer to get there)
    for (let i = 0; i < 600 && acknowledged.length < 100; i++) await Bun.sleep(50)
    await Bun.sleep(200)
    service.child.kill("SIGKILL")
    running = false
    await Promise.all([...devices, creators])
    expect(acknowledged.length).toBeGreaterThan(0)

    service = await startService(env)
    // every acknowledged entry is stored
    const pg = (await import("pg")).default
    const client = new pg.Client({ connectionString: db.url })
    await client.connect()
    try {
      const stored = await client.query("SELECT bundle_id, seq FROM offline_audit_entries")
      const keys = new Set(stored.rows.map((r: any) => `${r.bundle_id}:${r.seq}`))
      const lost = acknowledged.filter((a) => !keys.has(`${a.bundleId}:${a.seq}`))
      expect(lost).toEqual([])
      // every event committed before the kill is delivered after the restart
      const events = (await client.query("SELECT id FROM events")).rows.map((r: any) => r.id as string)
      expect(events.length).toBeGreaterThan(0)
      const until = Date.now() + 20_000
      while (events.some((id) => !received.has(id)) && Date.now() < until) await Bun.sleep(100)
      const missing = events.filter((id) => !received.has(id))
      expect(missing).toEqual([])
      const pending = await client.query("SELECT count(*)::int AS n FROM webhook_deliveries WHERE status <> 'delivered'")
      const settle = Date.now() + 10_000
      let n = pending.rows[0].n
      while (n > 0 && Date.now() < settle) {
        await Bun.sleep(100)
        n = (await client.query("SELECT count(*)::int AS n FROM webhook_deliveries WHERE status <> 'delivered'")).rows[0].n
      }
      expect(n).toBe(0)
    } finally {
      await client.end()
    }
  } finally {
    service.child.kill("SIGKILL")
    receiver.stop(true)
    await db.drop()
  }
}, 90_000)
