/** Shared set-up for the compliance tests: a developer with chained audit entries and grants. */
import { expect } from "bun:test"
import { Effect } from "effect"
import { AuditChain, type AppendInput } from "../../src/platform/AuditChain.ts"
import type { TestApp } from "../support/app.ts"

/** appends `n` entries to the developer's chain in batches (the chain's own writer, so hashes are real) */
export const seedAudit = async (app: TestApp, developerId: string, n: number, make?: (i: number) => Partial<AppendInput>) => {
  const batch = 5000
  for (let start = 0; start < n; start += batch) {
    const inputs: Array<AppendInput> = []
    for (let i = start; i < Math.min(n, start + batch); i++) {
      inputs.push({
        developerId,
        action: i % 3 === 0 ? "email.read" : "calendar.write",
        agentId: `ag_${i % 7}`,
        agentDid: `did:service:ag_${i % 7}`,
        grantId: i % 5 === 0 ? null : `grnt_${i % 11}`,
        principalId: `user_${i % 13}`,
        metadata: { i, note: i % 17 === 0 ? "comma, \"quote\"\nnewline #hash" : "plain", nested: { z: 1, a: [i, null] } },
        status: i % 10 === 0 ? "failure" : "success",
        ...make?.(i)
      })
    }
    await app.run(Effect.flatMap(AuditChain, (c) => c.appendMany(inputs)))
  }
}

export const jwksOf = async (app: TestApp) => (await app.request("GET", "/.well-known/jwks.json")).body

export const download = async (app: TestApp, apiKey: string, path: string) => {
  const res = await fetch(app.url + path, { headers: { authorization: `Bearer ${apiKey}` } })
  return { status: res.status, headers: res.headers, bytes: new Uint8Array(await res.arrayBuffer()) }
}

/** a streamed export read to its end, then its detached proof from GET /v1/compliance/exports/:Export-Id */
export const streamedExport = async (app: TestApp, apiKey: string, path: string) => {
  const r = await download(app, apiKey, path)
  expect(r.status).toBe(200)
  const proof = await app.request("GET", `/v1/compliance/exports/${r.headers.get("export-id")}`, { apiKey })
  expect(proof.status).toBe(200)
  return { ...r, proof: proof.body }
}

/**
 * The service as its own process (`agent-auth serve`) on an existing database, so its memory can
 * be read from outside (a client in the same process would count its own buffers) and it can be
 * killed with SIGKILL.
 */
export const spawnServer = async (databaseUrl: string, privateKeyPem: string, env: Record<string, string> = {}) => {
  const child = Bun.spawn([process.execPath, "src/main.ts", "serve"], {
    cwd: new URL("../..", import.meta.url).pathname,
    env: {
      PATH: process.env.PATH ?? "", DATABASE_URL: databaseUrl, REDIS_URL: "memory://", RSA_PRIVATE_KEY: privateKeyPem, PORT: "0",
      // info: the "listening" line (which carries the URL) is an info line; the rest is drained below
      HOST: "127.0.0.1", LOG_LEVEL: "info", ...env
    },
    stdout: "pipe",
    stderr: "inherit"
  })
  const reader = child.stdout.getReader()
  let buffered = ""
  for (;;) {
    const { done, value } = await reader.read()
    if (done) throw new Error("the server exited before listening")
    buffered += new TextDecoder().decode(value)
    const match = /"url":"(http:\/\/[^"]+)"/.exec(buffered)
    if (match) {
      // keep reading (and dropping) the log, so a full pipe never blocks the server's writes
      void (async () => {
        for (;;) if ((await reader.read().catch(() => ({ done: true }))).done) return
      })()
      return {
        url: match[1]!,
        pid: child.pid,
        /** resident set size in bytes, from /proc */
        rss: () => {
          const status = require("node:fs").readFileSync(`/proc/${child.pid}/status`, "utf8") as string
          return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024
        },
        kill: (signal: NodeJS.Signals = "SIGTERM") => child.kill(signal),
        exited: child.exited
      }
    }
  }
}
