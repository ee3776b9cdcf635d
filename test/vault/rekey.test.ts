/**
 * Key rotation: credentials and a webhook secret written under k1; the service restarts with
 * `k2,k1`; `vault rekey` runs while exchanges and upserts keep going; nothing is lost, every row
 * ends under k2, a second run does nothing, and the service then works with k2 alone (the webhook
 * secret included: deliveries are signed with it).
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { operatorCommands } from "../../src/operator.ts"
import { openSecrets, VaultKeys } from "../../src/vault/Crypto.ts"
import { Webhooks } from "../../src/webhooks/Service.ts"
import { createDatabase, startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"

const key = () => randomBytes(32).toString("base64")
const k1 = `k1:${key()}`
const k2 = `k2:${key()}`
const k3 = `k3:${key()}`
const COUNT = 240

let databaseUrl: string
let cleanup: () => Promise<void>

beforeAll(async () => {
  if (usingRealPostgres) {
    const db = await createDatabase()
    databaseUrl = db.url
    cleanup = db.drop
  } else {
    // embedded: a PGlite directory, so the data outlives a restart
    const dir = mkdtempSync(join(tmpdir(), "aas-rekey-"))
    databaseUrl = `pglite://${dir}`
    cleanup = async () => rmSync(dir, { recursive: true, force: true })
  }
})
afterAll(async () => {
  await cleanup()
})

const allSecrets = (app: TestApp) =>
  app.run(Effect.gen(function*() {
    const ring = yield* VaultKeys
    const rows = yield* Effect.promise(() => app.query("SELECT * FROM vault_credentials ORDER BY principal_id"))
    const out: Record<string, string> = {}
    for (const row of rows) out[row.principalId] = (yield* openSecrets(ring, row, row)).accessToken
    return { out, keyIds: [...new Set(rows.map((r: any) => r.keyId))].sort() }
  }))

const webhookKeyIds = async (app: TestApp) =>
  [...new Set((await app.query("SELECT secret_ciphertext FROM webhook_endpoints")).map((r) => JSON.parse(r.secretCiphertext).keyId))]

/** the endpoint's signing secret as the delivery worker opens it (undefined when no key opens it) */
const openWebhookSecret = async (app: TestApp) => {
  const [row] = await app.query("SELECT id, developer_id, secret_ciphertext FROM webhook_endpoints")
  return app.run(Effect.map(Webhooks, (w) => w.secretOf(row)))
}

test("rekey under concurrent exchanges and upserts loses nothing; idempotent; old key can then be dropped", async () => {
  // 1. Written under k1.
  let app = await startTestApp({ databaseUrl, env: { VAULT_ENCRYPTION_KEYS: k1 } })
  const expected: Record<string, string> = {}
  let dev: { apiKey: string; developerId: string }
  const tokens: Array<{ principal: string; token: string }> = []
  let webhookSecret = ""
  try {
    dev = await app.signup({ plan: "enterprise" })
    const agent = await createAgent(app, dev.developerId, ["*"])
    for (let i = 0; i < COUNT; i++) {
      const principal = `p_${String(i).padStart(4, "0")}`
      expected[principal] = `access_${i}_${randomBytes(6).toString("hex")}`
      const res = await app.request("POST", "/v1/vault/credentials", {
        apiKey: dev.apiKey,
        body: { principalId: principal, service: "github", accessToken: expected[principal] }
      })
      expect(res.status).toBe(201)
    }
    for (let i = 0; i < 12; i++) {
      const principal = `p_${String(i * 17).padStart(4, "0")}`
      for (let j = 0; j < 3; j++) {
        const { token } = await issueGrant(app, { developerId: dev.developerId, agentId: agent, principalId: principal, scopes: ["github:read"] })
        tokens.push({ principal, token: token.grantToken })
      }
    }
    expect((await allSecrets(app)).keyIds).toEqual(["k1"])
    const hook = await app.request("POST", "/v1/webhooks", {
      apiKey: dev.apiKey,
      body: { url: "http://127.0.0.1:9/hook", events: ["vault.credential.exchanged"] }
    })
    expect(hook.status).toBe(201)
    webhookSecret = hook.body.secret
    expect(await webhookKeyIds(app)).toEqual(["k1"])
  } finally {
    await app.stop()
  }

  // 2. Restart with k2 active, k1 still known; rekey while exchanging and upserting.
  app = await startTestApp({ databaseUrl, env: { VAULT_ENCRYPTION_KEYS: `${k2},${k1}` } })
  try {
    let done = false
    const failures: Array<string> = []
    let exchanges = 0
    let upserts = 0
    const exchanger = async (offset: number) => {
      let i = offset
      while (!done) {
        const { principal, token } = tokens[i++ % tokens.length]!
        const res = await app.request("POST", "/v1/vault/credentials/exchange", { bearer: token, body: { service: "github" } })
        if (res.status === 429) continue
        exchanges++
        if (res.status !== 200 || res.body.accessToken !== expected[principal]) failures.push(`${principal}: ${res.status} ${res.text}`)
      }
    }
    const upserter = async () => {
      let i = 0
      while (!done) {
        const principal = `p_${String((i++ * 7) % COUNT).padStart(4, "0")}`
        // principals being exchanged are not upserted, so each exchange has one right answer
        if (tokens.some((t) => t.principal === principal)) continue
        const value = `upserted_${i}_${randomBytes(4).toString("hex")}`
        const res = await app.request("POST", "/v1/vault/credentials", {
          apiKey: dev!.apiKey,
          body: { principalId: principal, service: "github", accessToken: value }
        })
        if (res.status === 201) {
          expected[principal] = value
          upserts++
        } else failures.push(`upsert ${principal}: ${res.status}`)
      }
    }
    const load = Promise.all([exchanger(0), exchanger(5), exchanger(11), upserter()])
    const message = await app.run(operatorCommands["vault rekey"]!(["--batch-size", "25"], app.config)).finally(() => {
      done = true
    })
    await load
    expect(failures).toEqual([])
    expect(exchanges).toBeGreaterThan(0)
    expect(upserts).toBeGreaterThan(0)
    expect(message).toMatch(/^re-encrypted \d+ vault credential\(s\), 1 webhook secret\(s\) and 0 SSO client secret\(s\) under key k2$/)

    const after = await allSecrets(app)
    expect(after.keyIds).toEqual(["k2"])
    expect(after.out).toEqual(expected)

    // idempotent
    expect(await webhookKeyIds(app)).toEqual(["k2"])
    expect(await app.run(operatorCommands["vault rekey"]!([], app.config))).toBe(
      "re-encrypted 0 vault credential(s), 0 webhook secret(s) and 0 SSO client secret(s) under key k2"
    )
  } finally {
    await app.stop()
  }

  // 3. k1 dropped: everything still exchanges.
  app = await startTestApp({ databaseUrl, env: { VAULT_ENCRYPTION_KEYS: k2 } })
  try {
    for (const { principal, token } of tokens.filter((_, i) => i % 3 === 2)) {
      const res = await app.request("POST", "/v1/vault/credentials/exchange", { bearer: token, body: { service: "github" } })
      expect(res.status).toBe(200)
      expect(res.body.accessToken).toBe(expected[principal])
    }
    expect(await openWebhookSecret(app)).toBe(webhookSecret)
  } finally {
    await app.stop()
  }

  // 4. The binary: `agent-auth vault rekey` to k3; with an unrelated key only, it reports unreadable rows and exits 1.
  const run = async (keys: string) => {
    const proc = Bun.spawn([process.execPath, "src/main.ts", "vault", "rekey"], {
      env: { PATH: process.env.PATH ?? "", DATABASE_URL: databaseUrl, VAULT_ENCRYPTION_KEYS: keys },
      stdout: "pipe",
      stderr: "pipe"
    })
    const code = await proc.exited
    return { code, stdout: await new Response(proc.stdout).text(), stderr: await new Response(proc.stderr).text() }
  }
  const rotated = await run(`${k3},${k2}`)
  expect(rotated).toEqual({ code: 0, stdout: `re-encrypted ${COUNT} vault credential(s), 1 webhook secret(s) and 0 SSO client secret(s) under key k3\n`, stderr: "" })
  const wrong = await run(`k4:${key()}`)
  expect(wrong.code).toBe(1)
  expect(wrong.stderr).toContain(
    `re-encrypted 0 vault credential(s), 0 webhook secret(s) and 0 SSO client secret(s) under key k4; ${COUNT + 1} could not be decrypted`
  )
  expect(wrong.stderr.trim().split("\n")).toHaveLength(1)

  app = await startTestApp({ databaseUrl, env: { VAULT_ENCRYPTION_KEYS: k3 } })
  try {
    const final = await allSecrets(app)
    expect(final.keyIds).toEqual(["k3"])
    expect(final.out).toEqual(expected)
    expect(await webhookKeyIds(app)).toEqual(["k3"])
    expect(await openWebhookSecret(app)).toBe(webhookSecret)
  } finally {
    await app.stop()
  }
}, 180_000)
