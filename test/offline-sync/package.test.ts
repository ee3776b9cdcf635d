/**
 * The on-device kit as a package (issue 17 item 5): the build emits it as JavaScript with type
 * declarations; the checkout, packed with `npm pack` and unpacked into a scratch project (no
 * registry), is imported as `agent-auth-service/offline` by plain Node; and the README's kit
 * example runs as written: the device code under Node, through the README's relay on a backend
 * that holds the API key, against the real service.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { buildKit } from "../../scripts/buildKit.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"

const ROOT = join(import.meta.dir, "../..")
let app: TestApp
let scratch: string

const run = async (cmd: Array<string>, cwd: string, env: Record<string, string> = {}) => {
  const child = Bun.spawn(cmd, { cwd, stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } })
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { stdout, stderr, code }
}

/** the fenced ts block that follows `marker` in the README */
const readmeBlock = (marker: string): string => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8")
  const from = readme.indexOf(marker)
  expect(from).toBeGreaterThan(-1)
  const match = /```ts\n([\s\S]*?)```/.exec(readme.slice(from))
  return match![1]!
}

beforeAll(async () => {
  app = await startTestApp()
  await buildKit(join(ROOT, "dist/offline"))
  scratch = mkdtempSync(join(tmpdir(), "aas-kit-"))
  const packed = await run(["npm", "pack", "--pack-destination", scratch, "--ignore-scripts", "--offline", "--silent"], ROOT)
  expect(packed.code).toBe(0)
  const installed = join(scratch, "node_modules", "agent-auth-service")
  mkdirSync(installed, { recursive: true })
  const untar = await run(["tar", "-xzf", join(scratch, packed.stdout.trim().split("\n").pop()!), "-C", installed, "--strip-components=1"], scratch)
  expect(untar.code).toBe(0)
  writeFileSync(join(scratch, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }))
}, 120_000)
afterAll(async () => {
  await app.stop()
  rmSync(scratch, { recursive: true, force: true })
})

describe("the kit as a package", () => {
  test("the built kit uses no Node API and has its declarations", () => {
    const js = readFileSync(join(ROOT, "dist/offline/index.js"), "utf8")
    expect(js).not.toMatch(/from\s*["']node:|require\(/)
    expect(js).not.toMatch(/\bprocess\.|\bBuffer\b/)
    expect(readFileSync(join(ROOT, "dist/offline/index.d.ts"), "utf8")).toContain("export declare class OfflineAgent")
  })

  test("plain Node imports agent-auth-service/offline and /webhooks/verify from the installed package", async () => {
    writeFileSync(join(scratch, "imports.mjs"), `
      import { OfflineAgent, BATCH_SIZES, hashEntry } from "agent-auth-service/offline"
      import { verifyWebhook } from "agent-auth-service/webhooks/verify"
      console.log(JSON.stringify({ load: typeof OfflineAgent.load, wifi: BATCH_SIZES.wifi, hash: typeof hashEntry, verify: typeof verifyWebhook,
        resolved: import.meta.resolve("agent-auth-service/offline").replace(/^.*node_modules/, "") }))`)
    const res = await run(["node", "imports.mjs"], scratch)
    expect(res.stderr).toBe("")
    expect(JSON.parse(res.stdout)).toEqual({ load: "function", wifi: 100, hash: "function", verify: "function", resolved: "/agent-auth-service/dist/offline/index.js" })
    expect((await run(["node", "--version"], scratch)).stdout).toMatch(/^v2\d\./)
  })

  test("a TypeScript consumer type-checks against the declarations (node16 resolution)", async () => {
    writeFileSync(join(scratch, "check.ts"), `
      import { OfflineAgent, type ConsentBundle, type SignedAuditEntry } from "agent-auth-service/offline"
      export const load: (b: ConsentBundle) => Promise<OfflineAgent> = (b) => OfflineAgent.load(b)
      export const seqs = (batch: ReadonlyArray<SignedAuditEntry>): Array<number> => batch.map((e) => e.seq)
      // @ts-expect-error a result the kit does not know
      export const wrong: "synced" | "wiped" | "kept" = "nope"`)
    const res = await run([join(ROOT, "node_modules/.bin/tsc"), "--ignoreConfig", "--noEmit", "--strict", "--module", "node16", "--moduleResolution", "node16",
      "--target", "es2022", "--lib", "es2022,dom", "--types", "", "check.ts"], scratch)
    expect(res.stdout + res.stderr).toBe("")
    expect(res.code).toBe(0)
  })
})

describe("the README's kit example, as written", () => {
  test("the device (under Node) syncs through the backend relay, which alone holds the API key", async () => {
    const dev = await app.signup({ plan: "enterprise" })
    const agentId = await createAgent(app, dev.developerId, ["email:read"])
    // the developer's backend creates the bundle and hands it to the device
    const bundle = (await app.request("POST", "/v1/consent-bundles", { apiKey: dev.apiKey, body: { agentId, userId: "user_1", scopes: ["email:read"] } })).body

    // the backend: the README's relay, served here
    const backendCode = readmeBlock("On your backend").replace(`"http://localhost:3001"`, JSON.stringify(app.url))
    const backendFile = join(scratch, "backend.ts")
    writeFileSync(backendFile, backendCode)
    process.env.AGENT_AUTH_API_KEY = dev.apiKey
    const { relaySync } = await import(backendFile)
    const seen: Array<{ path: string; authorization: string | null; status: number; answer: any }> = []
    const backend = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (request) => {
        const authorization = request.headers.get("authorization")
        const response: Response = await relaySync(request)
        const text = await response.text()
        seen.push({ path: new URL(request.url).pathname, authorization, status: response.status, answer: JSON.parse(text) })
        return new Response(text, { status: response.status, headers: response.headers })
      }
    })
    try {
      // the device: the README's code, types stripped, run by plain Node against the installed package
      const deviceCode = new Bun.Transpiler({ loader: "ts" }).transformSync(
        readmeBlock("On the device").replace(`"https://api.your-app.example"`, JSON.stringify(`http://127.0.0.1:${backend.port}`))
      )
      writeFileSync(join(scratch, "device.mjs"), deviceCode)
      writeFileSync(join(scratch, "bundle.json"), JSON.stringify(bundle))
      writeFileSync(join(scratch, "main.mjs"), `
        import { readFileSync } from "node:fs"
        import { runAgent } from "./device.mjs"
        const state = await runAgent(JSON.parse(readFileSync("bundle.json", "utf8")), "device-session-1")
        console.log(JSON.stringify({ seq: state.seq, pending: state.pending.length, wiped: state.bundle === null }))`)
      const res = await run(["node", "main.mjs"], scratch, { AGENT_AUTH_API_KEY: "" })
      expect(res.stderr).toBe("")
      expect(JSON.parse(res.stdout)).toEqual({ seq: 1, pending: 0, wiped: false })
      // the device sent its own session, never the API key; the backend passed the service's answer on
      expect(seen).toEqual([{
        path: "/agent-audit/sync",
        authorization: "Bearer device-session-1",
        status: 200,
        answer: { accepted: 1, rejected: 0, revocationStatus: "active", revokedAt: null, errors: [] }
      }])
      expect(deviceCode).not.toContain(dev.apiKey)
      const stored = await app.query("SELECT seq::int AS seq, action FROM offline_audit_entries WHERE bundle_id = $1", [bundle.bundleId])
      expect(stored).toEqual([{ seq: 1, action: "email.read" }])
    } finally {
      backend.stop(true)
      delete process.env.AGENT_AUTH_API_KEY
    }
  })
})

describe("@agent-auth/offline-kit, a package of its own (decisions §24)", () => {
  test("npm pack dist/offline-kit installs alone (no dependency, under 200 KB) and plain Node loads a bundle, records and syncs with it", async () => {
    const project = mkdtempSync(join(tmpdir(), "aas-kit-alone-"))
    try {
      const packed = await run(["npm", "pack", join(ROOT, "dist/offline-kit"), "--pack-destination", project, "--ignore-scripts", "--offline", "--silent"], project)
      expect(packed.stderr).toBe("")
      const tarball = join(project, packed.stdout.trim().split("\n").pop()!)
      const manifest = JSON.parse(readFileSync(join(ROOT, "dist/offline-kit/package.json"), "utf8"))
      expect([manifest.name, manifest.dependencies, manifest.type]).toEqual(["@agent-auth/offline-kit", undefined, "module"])
      // an empty project, installed from the tarball alone: npm would fail on any dependency (--offline, no cache of it)
      writeFileSync(join(project, "package.json"), JSON.stringify({ name: "device", private: true, type: "module" }))
      const installed = await run(["npm", "install", tarball, "--offline", "--ignore-scripts", "--no-audit", "--no-fund", "--silent"], project)
      expect(installed.code).toBe(0)
      const dir = join(project, "node_modules/@agent-auth/offline-kit")
      const bytes = readdirSync(dir).reduce((n, f) => n + statSync(join(dir, f)).size, 0)
      expect(bytes).toBeLessThan(200 * 1024)
      expect(readdirSync(join(project, "node_modules")).filter((d) => !d.startsWith("."))).toEqual(["@agent-auth"])

      const dev = await app.signup({ plan: "enterprise" })
      const agentId = await createAgent(app, dev.developerId, ["email:read"])
      const bundle = (await app.request("POST", "/v1/consent-bundles", { apiKey: dev.apiKey, body: { agentId, userId: "user_1", scopes: ["email:read"] } })).body
      writeFileSync(join(project, "bundle.json"), JSON.stringify({ ...bundle, syncEndpoint: `${app.url}/v1/audit/offline-sync` }))
      writeFileSync(join(project, "device.mjs"), `
        import { readFileSync } from "node:fs"
        import { OfflineAgent, OfflineEntryError } from "@agent-auth/offline-kit"
        const agent = await OfflineAgent.load(JSON.parse(readFileSync("bundle.json", "utf8")))
        let refused = null
        try { agent.record("email.read", "failure") } catch (e) { refused = e instanceof OfflineEntryError ? e.field : String(e) }
        agent.record("email.read", "success", { folder: "inbox" })
        const outcome = await agent.sync(agent.batches()[0], { apiKey: process.env.KEY })
        console.log(JSON.stringify({ refused, outcome: outcome.outcome, accepted: outcome.result?.accepted, pending: agent.state.pending.length }))`)
      const res = await run(["node", "device.mjs"], project, { KEY: dev.apiKey })
      expect(res.stderr).toBe("")
      expect(JSON.parse(res.stdout)).toEqual({ refused: "result", outcome: "synced", accepted: 1, pending: 0 })
      expect(await app.query("SELECT seq::int AS seq FROM offline_audit_entries WHERE bundle_id = $1", [bundle.bundleId])).toEqual([{ seq: 1 }])
    } finally {
      rmSync(project, { recursive: true, force: true })
    }
  })

  test("its declarations type-check a consumer (node16 resolution), and name the refused outcome", async () => {
    const types = readFileSync(join(ROOT, "dist/offline-kit/index.d.ts"), "utf8")
    expect(types).toContain("export declare class OfflineAgent")
    expect(types).not.toMatch(/from "\.\/[\w-]+\.ts"/)
    const consumer = mkdtempSync(join(tmpdir(), "aas-kit-types-"))
    try {
      mkdirSync(join(consumer, "node_modules/@agent-auth"), { recursive: true })
      await run(["cp", "-r", join(ROOT, "dist/offline-kit"), join(consumer, "node_modules/@agent-auth/offline-kit")], consumer)
      writeFileSync(join(consumer, "package.json"), JSON.stringify({ name: "c", private: true, type: "module" }))
      writeFileSync(join(consumer, "check.ts"), `
        import { OfflineAgent, OfflineEntryError, type SyncOutcome } from "@agent-auth/offline-kit"
        export const outcomes: Array<ReturnType<OfflineAgent["applySyncResult"]>> = ["synced", "wiped", "kept", "refused"]
        export const field = (e: OfflineEntryError): string => e.field
        export const refusedOf = (o: SyncOutcome) => (o.outcome === "refused" ? o.refused.length : 0)`)
      const res = await run([join(ROOT, "node_modules/.bin/tsc"), "--ignoreConfig", "--noEmit", "--strict", "--module", "node16", "--moduleResolution", "node16",
        "--target", "es2022", "--lib", "es2022,dom", "--types", "", "check.ts"], consumer)
      expect(res.stdout + res.stderr).toBe("")
    } finally {
      rmSync(consumer, { recursive: true, force: true })
    }
  })
})
