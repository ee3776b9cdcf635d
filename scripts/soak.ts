/**
 * Memory under a long mixed load (issue 10): runs the service in this process, drives a mix of
 * reads, writes, syncs, exchanges and webhook deliveries for SOAK_MINUTES (default 10), samples RSS
 * every 10 s, and reports the trend of the second half (after warm-up) as MB per minute.
 *   node_modules/.bin/bun scripts/soak.ts            # 10 minutes
 *   SOAK_MINUTES=2 node_modules/.bin/bun scripts/soak.ts
 */
import { createPrivateKey, sign } from "node:crypto"
import { GENESIS_HASH, hashEntry } from "../src/offline/index.ts"
import { startBenchServer } from "./bench/support.ts"

const minutes = Number(process.env.SOAK_MINUTES ?? 10)
const server = await startBenchServer({ WEBHOOK_POLL_INTERVAL_SECONDS: "1" }, { workers: true })
const receiver = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: async (r) => (await r.arrayBuffer(), new Response(null, { status: 204 })) })
const call = (method: string, path: string, body?: unknown, bearer?: string) =>
  fetch(server.url + path, {
    method,
    headers: { "content-type": "application/json", ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body)
  }).then(async (r) => ({ status: r.status, body: await r.json().catch(() => undefined) as any }))

const { apiKey } = (await call("POST", "/v1/signup", { name: "soak", mode: "sandbox" })).body
await call("POST", "/v1/webhooks", { url: `http://127.0.0.1:${receiver.port}/hook`, events: ["grant.created", "token.issued", "consent_bundle.created"] }, apiKey)
const agent = (await call("POST", "/v1/agents", { name: "soak", scopes: ["email:read", "github:read"] }, apiKey)).body
const samples: Array<{ t: number; rss: number }> = []
const started = Date.now()
const until = started + minutes * 60_000
let requests = 0
let errors = 0

const worker = async () => {
  while (Date.now() < until) {
    try {
      const auth = (await call("POST", "/v1/authorize", { agentId: agent.agentId, principalId: `p${requests % 50}`, scopes: ["email:read", "github:read"] }, apiKey)).body
      const token = (await call("POST", "/v1/token", { code: auth.code, agentId: agent.agentId }, apiKey)).body
      await call("POST", "/v1/vault/credentials", { principalId: `p${requests % 50}`, service: "github", accessToken: `gho_${requests}` }, apiKey)
      await call("POST", "/v1/vault/credentials/exchange", { service: "github" }, token.grantToken)
      await call("POST", "/v1/tokens/verify", { token: token.grantToken }, apiKey)
      const bundle = (await call("POST", "/v1/consent-bundles", { agentId: agent.agentId, userId: "u", scopes: ["email:read"] }, apiKey)).body
      const claims = JSON.parse(Buffer.from(bundle.grantToken.split(".")[1], "base64url").toString())
      const key = createPrivateKey(bundle.offlineAuditKey.privateKey)
      let prevHash = GENESIS_HASH
      const entries = []
      for (let seq = 1; seq <= 50; seq++) {
        const fields = { seq, timestamp: new Date().toISOString(), action: "a.b", agentDID: claims.agt, grantId: claims.grnt, scopes: claims.scp, result: "success" as const, prevHash }
        const hash = hashEntry(fields)
        entries.push({ ...fields, hash, signature: sign(null, Buffer.from(hash), key).toString("hex") })
        prevHash = hash
      }
      await call("POST", "/v1/audit/offline-sync", { bundleId: bundle.bundleId, entries }, apiKey)
      await call("GET", "/v1/grants?limit=20", undefined, apiKey)
      await call("GET", "/v1/me", undefined, apiKey)
      requests += 10
    } catch {
      errors++
    }
  }
}
const sampler = setInterval(() => samples.push({ t: (Date.now() - started) / 60_000, rss: process.memoryUsage().rss / 1024 / 1024 }), 10_000)
await Promise.all(Array.from({ length: 8 }, worker))
clearInterval(sampler)
// least-squares slope of RSS over the second half
const late = samples.filter((s) => s.t >= minutes / 2)
const mean = (xs: Array<number>) => xs.reduce((a, b) => a + b, 0) / xs.length
const mt = mean(late.map((s) => s.t))
const mr = mean(late.map((s) => s.rss))
const slope = late.reduce((a, s) => a + (s.t - mt) * (s.rss - mr), 0) / late.reduce((a, s) => a + (s.t - mt) ** 2, 0)
console.log(JSON.stringify({
  minutes,
  requests,
  errors,
  rssStartMb: Math.round(samples[0]?.rss ?? 0),
  rssEndMb: Math.round(samples[samples.length - 1]?.rss ?? 0),
  rssMaxMb: Math.round(Math.max(...samples.map((s) => s.rss))),
  secondHalfSlopeMbPerMinute: Number(slope.toFixed(2)),
  samples: samples.map((s) => [Number(s.t.toFixed(2)), Math.round(s.rss)])
}))
receiver.stop(true)
await server.stop()
process.exit(0)
