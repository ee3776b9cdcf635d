/**
 * Tokens never reach the logs: the real binary (`bun src/main.ts serve`) runs as a child with
 * LOG_LEVEL=debug, goes through store, exchange, upstream refresh (ok and failing), a tampered row
 * and rejected requests, and its whole stdout and stderr are searched for every secret.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createDatabase, startTestApp, testPrivateKey, usingRealPostgres } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"

const secret = (label: string) => `${label}_${randomBytes(12).toString("hex")}`
const vaultKey = `k1:${randomBytes(32).toString("base64")}`
const tamperedAccess = secret("TAMPERED")

let upstreamMode: "ok" | "fail" = "ok"
const freshAccess = secret("FRESHACCESS")
const freshRefresh = secret("FRESHREFRESH")
const upstream = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: async (request) => {
    const form = new URLSearchParams(await request.text())
    if (upstreamMode === "fail") {
      // a hostile upstream echoing the refresh token in its error
      return Response.json({ error: "invalid_grant", error_description: `refresh token ${form.get("refresh_token")} is bad` }, { status: 400 })
    }
    return Response.json({ access_token: freshAccess, refresh_token: freshRefresh, expires_in: 3600, token_type: "bearer" })
  }
})

let databaseUrl: string
let cleanup: () => Promise<void>
beforeAll(async () => {
  if (usingRealPostgres) {
    const db = await createDatabase()
    databaseUrl = db.url
    cleanup = db.drop
  } else {
    const dir = mkdtempSync(join(tmpdir(), "aas-vault-logs-"))
    databaseUrl = `pglite://${dir}`
    cleanup = async () => rmSync(dir, { recursive: true, force: true })
  }
})
afterAll(async () => {
  upstream.stop(true)
  await cleanup()
})

test("with LOG_LEVEL=debug no token, refresh token, client secret, grant token or API key is ever logged", async () => {
  // Set-up in-process (agent and grants have no HTTP route here), then hand the database to the binary.
  const setup = await startTestApp({ databaseUrl, env: { VAULT_ENCRYPTION_KEYS: vaultKey } })
  let apiKey: string, grantToken: string, revokedToken: string, narrowToken: string, otherToken: string
  try {
    const dev = await setup.signup()
    apiKey = dev.apiKey
    const agent = await createAgent(setup, dev.developerId, ["*"])
    grantToken = (await issueGrant(setup, { developerId: dev.developerId, agentId: agent, principalId: "user_1", scopes: ["*"] })).token.grantToken
    narrowToken = (await issueGrant(setup, { developerId: dev.developerId, agentId: agent, principalId: "user_1", scopes: ["gitlab:read"] })).token.grantToken
    otherToken = (await issueGrant(setup, { developerId: dev.developerId, agentId: agent, principalId: "user_2", scopes: ["*"] })).token.grantToken
    const revoked = await issueGrant(setup, { developerId: dev.developerId, agentId: agent, principalId: "user_1", scopes: ["*"] })
    revokedToken = revoked.token.grantToken
    await setup.query("UPDATE grants SET status = 'revoked', revoked_at = now() WHERE id = $1", [revoked.grant.id])
    // a row whose ciphertext was moved from another row: decryption fails in the child
    for (const service of ["gitlab", "bitbucket"]) {
      const res = await setup.request("POST", "/v1/vault/credentials", { apiKey, body: { principalId: "user_1", service, accessToken: tamperedAccess } })
      expect(res.status).toBe(201)
    }
    await setup.query(`UPDATE vault_credentials t SET iv = s.iv, ciphertext = s.ciphertext FROM vault_credentials s
                       WHERE t.principal_id = 'user_1' AND t.service = 'gitlab' AND s.principal_id = 'user_1' AND s.service = 'bitbucket'`)
  } finally {
    await setup.stop()
  }

  const secrets = {
    access: secret("ACCESS"),
    refresh: secret("REFRESH"),
    clientSecret: secret("CLIENTSECRET"),
    clientId: secret("CLIENTID"),
    expiringAccess: secret("EXPIRINGACCESS"),
    failingRefresh: secret("FAILINGREFRESH")
  }

  const child = Bun.spawn([process.execPath, "src/main.ts", "serve"], {
    env: {
      PATH: process.env.PATH ?? "",
      DATABASE_URL: databaseUrl,
      REDIS_URL: "memory://",
      RSA_PRIVATE_KEY: testPrivateKey(),
      VAULT_ENCRYPTION_KEYS: vaultKey,
      WEBHOOK_ALLOW_PRIVATE_HOSTS: "true",
      HOST: "127.0.0.1",
      PORT: "0",
      LOG_LEVEL: "debug"
    },
    stdout: "pipe",
    stderr: "pipe"
  })
  let stdout = ""
  let stderr = ""
  const pump = async (stream: ReadableStream<Uint8Array>, onText: (t: string) => void) => {
    const decoder = new TextDecoder()
    for await (const chunk of stream) onText(decoder.decode(chunk, { stream: true }))
  }
  const pumping = Promise.all([pump(child.stdout, (t) => (stdout += t)), pump(child.stderr, (t) => (stderr += t))])
  try {
    let base: string | undefined
    for (let i = 0; i < 600 && base === undefined; i++) {
      const line = stdout.split("\n").find((l) => l.includes('"listening"'))
      if (line !== undefined) base = JSON.parse(line).url
      else await Bun.sleep(50)
    }
    expect(base).toBeDefined()
    const call = async (method: string, path: string, auth: string | undefined, body?: unknown) => {
      const res = await fetch(base + path, {
        method,
        headers: { ...(auth ? { authorization: `Bearer ${auth}` } : {}), ...(body !== undefined ? { "content-type": "application/json" } : {}) },
        body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body)
      })
      return { status: res.status, body: await res.json().catch(() => undefined) as any }
    }
    // a fixed past date: the child process keeps its own clock, which need not be this process's
    const past = "2020-01-01T00:00:00.000Z"
    const tokenEndpoint = `http://127.0.0.1:${upstream.port}/token`

    expect((await call("POST", "/v1/vault/credentials", apiKey, {
      principalId: "user_1", service: "github", accessToken: secrets.access, refreshToken: secrets.refresh,
      clientId: secrets.clientId, clientSecret: secrets.clientSecret, tokenEndpoint, tokenExpiresAt: "2099-01-01T00:00:00Z"
    })).status).toBe(201)
    expect((await call("POST", "/v1/vault/credentials", apiKey, {
      principalId: "user_1", service: "slack", accessToken: secrets.expiringAccess, refreshToken: secrets.refresh,
      clientId: secrets.clientId, clientSecret: secrets.clientSecret, tokenEndpoint, tokenExpiresAt: past
    })).status).toBe(201)
    const failing = await call("POST", "/v1/vault/credentials", apiKey, {
      principalId: "user_2", service: "github", accessToken: secrets.access, refreshToken: secrets.failingRefresh,
      tokenEndpoint, tokenExpiresAt: past
    })
    expect(failing.status).toBe(201)
    // a validation failure whose body carries a secret
    expect((await call("POST", "/v1/vault/credentials", apiKey, { principalId: "user_1", service: "bad service", accessToken: secrets.access })).status).toBe(400)

    expect((await call("POST", "/v1/vault/credentials/exchange", grantToken, { service: "github" })).body.accessToken).toBe(secrets.access)
    expect((await call("POST", "/v1/vault/credentials/exchange", grantToken, { service: "slack" })).body.accessToken).toBe(freshAccess)
    upstreamMode = "fail"
    const refreshFailed = await call("POST", "/v1/vault/credentials/exchange", otherToken, { service: "github" })
    expect(refreshFailed.status).toBe(502)
    expect((await call("POST", "/v1/vault/credentials/exchange", revokedToken, { service: "github" })).status).toBe(401)
    expect((await call("POST", "/v1/vault/credentials/exchange", narrowToken, { service: "github" })).status).toBe(403)
    expect((await call("POST", "/v1/vault/credentials/exchange", grantToken, "{broken")).status).toBe(400)
    expect((await call("POST", "/v1/vault/credentials/exchange", `${grantToken}x`, { service: "github" })).status).toBe(401)
    expect((await call("GET", "/v1/vault/credentials", apiKey)).status).toBe(200)

    expect((await call("POST", "/v1/vault/credentials/exchange", grantToken, { service: "gitlab" })).body.code).toBe("CREDENTIAL_UNREADABLE")
  } finally {
    child.kill("SIGTERM")
    await child.exited
    await pumping
  }

  const logs = stdout + stderr
  if (process.env.VAULT_LOG_DUMP) console.log(logs)
  // logging is really on: the vault's own debug and warning lines are there
  expect(logs).toContain('"vault credential stored"')
  expect(logs).toContain('"vault credential exchanged"')
  expect(logs).toContain('"vault upstream token refreshed"')
  expect(logs).toContain('"vault upstream refresh failed"')
  expect(logs).toContain('"vault credential cannot be decrypted"')
  for (const value of [...Object.values(secrets), tamperedAccess, freshAccess, freshRefresh, apiKey!, grantToken!, revokedToken!, narrowToken!, otherToken!]) {
    expect({ leaked: logs.includes(value) ? value : null }).toEqual({ leaked: null })
  }
  // no JWT-looking string at all
  expect(logs).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\./)
}, 120_000)
