/**
 * CI check of the compiled binary (issue 16 item 14): one real request of every capability that
 * has its own runtime piece, against `dist/agent-auth serve` started by .ci/run with `env -i`.
 *
 *   bun scripts/ci/binary-smoke.ts <baseUrl> [databaseUrl] [serveLog]
 *
 * - migrations: every migration of sql/index.ts is recorded as applied (databaseUrl)
 * - signup, an agent and a consent bundle over HTTP
 * - offline sync of 1000 signed entries (one with a bad signature) through the verifier workers,
 *   and the binary's log says the workers came up (serveLog)
 * - /docs and every asset it references from this origin, and /openapi.json
 * Every request has a time limit: a hang fails the check instead of stalling CI.
 */
import pg from "pg"
import { migrations } from "../../sql/index.ts"
import { OfflineAgent, type ConsentBundle } from "../../src/offline/index.ts"

const [baseUrl, databaseUrl, serveLog] = process.argv.slice(2)
if (baseUrl === undefined) {
  console.error("usage: bun scripts/ci/binary-smoke.ts <baseUrl> [databaseUrl] [serveLog]")
  process.exit(2)
}

const fail = (step: string, why: string): never => {
  console.error(`binary smoke: ${step} FAILED: ${why}`)
  process.exit(1)
}
const ok = (step: string, detail = "") => console.log(`binary smoke: ${step} ok${detail ? ` (${detail})` : ""}`)

const call = async (step: string, method: string, path: string, options: { body?: unknown; apiKey?: string; timeoutMs?: number } = {}) => {
  const started = performance.now()
  try {
    const response = await fetch(baseUrl + path, {
      method,
      headers: {
        ...(options.body !== undefined ? { "content-type": "application/json" } : {}),
        ...(options.apiKey !== undefined ? { authorization: `Bearer ${options.apiKey}` } : {})
      },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: AbortSignal.timeout(options.timeoutMs ?? 10_000)
    })
    const text = await response.text()
    let json: any
    try {
      json = JSON.parse(text)
    } catch {
      json = undefined
    }
    return { status: response.status, text, json, headers: response.headers, ms: Math.round(performance.now() - started) }
  } catch (e) {
    return fail(step, `${method} ${path}: ${e instanceof Error ? e.message : String(e)}`)
  }
}

// health (the service listens only once every layer, migrations included, is up)
const health = await call("health", "GET", "/health")
if (health.status !== 200 || health.json?.status !== "ok") fail("health", `${health.status} ${health.text.slice(0, 200)}`)
ok("health")

// migrations
if (databaseUrl) {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  const { rows } = await client.query<{ name: string }>("SELECT name FROM schema_migrations ORDER BY migration_id")
  await client.end()
  const expected = Object.keys(migrations).map((k) => k.replace(/^\d+_/, ""))
  const applied = rows.map((r) => r.name)
  if (JSON.stringify(applied) !== JSON.stringify(expected)) fail("migrations", `applied ${applied.join(",")}; expected ${expected.join(",")}`)
  ok("migrations", `${applied.length} applied`)
}

// signup, agent, consent bundle
const signup = await call("signup", "POST", "/v1/signup", { body: { name: "binary smoke" } })
if (signup.status !== 201 || typeof signup.json?.apiKey !== "string") fail("signup", `${signup.status} ${signup.text.slice(0, 200)}`)
const apiKey: string = signup.json.apiKey
ok("signup")
const agent = await call("agent", "POST", "/v1/agents", { apiKey, body: { name: "smoke agent", scopes: ["email:read"] } })
if (agent.status !== 201) fail("agent", `${agent.status} ${agent.text.slice(0, 200)}`)
const bundleRes = await call("consent bundle", "POST", "/v1/consent-bundles", { apiKey, body: { agentId: agent.json.agentId ?? agent.json.id, userId: "smoke-user", scopes: ["email:read"] } })
if (bundleRes.status !== 201) fail("consent bundle", `${bundleRes.status} ${bundleRes.text.slice(0, 200)}`)
const bundle: ConsentBundle = { ...bundleRes.json, syncEndpoint: `${baseUrl}/v1/audit/offline-sync` }
ok("consent bundle")

// offline sync of 1000 signed entries; entry 500's signature is spoiled, so the workers must really check
const device = await OfflineAgent.load(bundle)
for (let i = 0; i < 1000; i++) device.record("email.read", "success", { i })
const entries = device.batches(1000)[0]!.map((e) =>
  e.seq === 500 ? { ...e, signature: (e.signature[0] === "a" ? "b" : "a") + e.signature.slice(1) } : e
)
const sync = await call("offline sync", "POST", "/v1/audit/offline-sync", { apiKey, body: { bundleId: bundle.bundleId, entries }, timeoutMs: 30_000 })
const errors = sync.json?.errors ?? []
if (sync.status !== 200 || sync.json.accepted !== 999 || sync.json.rejected !== 1 || errors[0]?.seq !== 500 || errors[0]?.code !== "INVALID_SIGNATURE") {
  fail("offline sync", `${sync.status} ${sync.text.slice(0, 300)}`)
}
const stored = await call("offline sync", "GET", `/v1/consent-bundles/${bundle.bundleId}`, { apiKey })
if (stored.json?.auditEntryCount !== 999) fail("offline sync", `auditEntryCount ${stored.json?.auditEntryCount}`)
ok("offline sync", `1000 entries in ${sync.ms} ms`)

if (serveLog) {
  const until = Date.now() + 15_000
  let log = ""
  while (Date.now() < until) {
    log = await Bun.file(serveLog).text().catch(() => "")
    if (/verifier workers (ready|did not start)/.test(log)) break
    await Bun.sleep(200)
  }
  const ready = /verifier workers ready: (\d+)/.exec(log)
  if (ready === null) fail("verifier workers", /did not start/.test(log) ? "the binary verifies on the main thread" : "no readiness line in the log")
  ok("verifier workers", `${ready![1]} ready`)
}

// the API reference page and what it loads from this origin
const docs = await call("docs", "GET", "/docs")
if (docs.status !== 200 || !(docs.headers.get("content-type") ?? "").includes("text/html")) fail("docs", `${docs.status} ${docs.headers.get("content-type")}`)
if (!docs.text.includes("/v1/audit/offline-sync")) fail("docs", "the page does not carry the API description")
const inline = [...docs.text.matchAll(/<script(?![^>]*\bsrc=)[^>]*>([\s\S]*?)<\/script>/g)].reduce((n, m) => n + m[1]!.length, 0)
const assets = [...docs.text.matchAll(/\b(?:src|href)="([^"]+)"/g)]
  .map((m) => new URL(m[1]!.replace(/&amp;/g, "&"), `${baseUrl}/docs`))
  .filter((u) => u.origin === new URL(baseUrl).origin)
for (const asset of assets) {
  const got = await call("docs", "GET", asset.pathname + asset.search)
  if (got.status !== 200 || got.text.length === 0) fail("docs", `asset ${asset.pathname}: ${got.status}`)
}
// the viewer itself is embedded: inline, or served from this origin
if (inline < 100_000 && assets.length === 0) fail("docs", "the page embeds no viewer script")
ok("docs", `${assets.length} assets, ${Math.round(inline / 1024)} KiB inline`)
const openapi = await call("openapi", "GET", "/openapi.json")
if (openapi.status !== 200 || openapi.json?.paths?.["/v1/audit/offline-sync"] === undefined) fail("openapi", `${openapi.status}`)
ok("openapi")

// Cedar policies: cedar-wasm's module is embedded in the executable and loaded at run time
const cedar = '@id("smoke-forbid")\nforbid (principal, action, resource) when { context.scopes.contains("email:read") };\n'
const synced = await call("cedar", "POST", "/v1/policies/sync", {
  apiKey,
  body: { format: "cedar", version: "1", content: Buffer.from(cedar).toString("base64") }
})
if (synced.status !== 201) fail("cedar", `policy sync answered ${synced.status} ${synced.text.slice(0, 200)}`)
const denied = await call("cedar", "POST", "/v1/authorize", { apiKey, body: { agentId: agent.json.agentId, principalId: "smoke-user", scopes: ["email:read"] } })
if (denied.status !== 403 || denied.json?.code !== "POLICY_DENIED") fail("cedar", `authorize answered ${denied.status} ${denied.text.slice(0, 200)}`)
ok("cedar", "a forbid evaluated in the binary")

console.log("binary smoke: all checks passed")
