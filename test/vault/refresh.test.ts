/**
 * Upstream refresh at exchange time against a local OAuth 2.0 token endpoint (Bun.serve). The
 * service runs on TestClock, so "expired" is decided by the service's clock, not by real time.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test"
import { Clock } from "effect"
import { randomBytes } from "node:crypto"
import { startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"

interface Call {
  readonly form: Record<string, string>
  readonly authorization: string | null
  readonly contentType: string | null
}

let calls: Array<Call> = []
let behaviour: "ok" | "invalid_grant" | "error500" | "html" | "no_token" = "ok"
let delayMs = 0
let issued = 0
const upstream = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: async (request) => {
    const form = Object.fromEntries(new URLSearchParams(await request.text()))
    calls.push({ form, authorization: request.headers.get("authorization"), contentType: request.headers.get("content-type") })
    if (delayMs > 0) await Bun.sleep(delayMs)
    switch (behaviour) {
      case "invalid_grant":
        return Response.json({ error: "invalid_grant", error_description: `bad token ${form.refresh_token}` }, { status: 400 })
      case "error500":
        return new Response("boom", { status: 500 })
      case "html":
        return new Response("<html>hi</html>", { status: 200, headers: { "content-type": "text/html" } })
      case "no_token":
        return Response.json({ token_type: "bearer" })
      default:
        issued++
        return Response.json({ access_token: `fresh_access_${issued}`, token_type: "bearer", expires_in: 3600, refresh_token: `rotated_refresh_${issued}` })
    }
  }
})
const tokenEndpoint = `http://127.0.0.1:${upstream.port}/oauth/token`
const vaultKey = `k1:${randomBytes(32).toString("base64")}`

let app: TestApp
let dev: { apiKey: string; developerId: string }
let agentId: string
let startMs: number

beforeAll(async () => {
  startMs = Date.now()
  app = await startTestApp({ testClock: true, startTime: startMs, env: { VAULT_ENCRYPTION_KEYS: vaultKey } })
  dev = await app.signup()
  agentId = await createAgent(app, dev.developerId, ["github:read"])
})
afterAll(async () => {
  await app.stop()
  upstream.stop(true)
})
beforeEach(() => {
  calls = []
  behaviour = "ok"
  delayMs = 0
})

const nowIso = async () => new Date(await app.run(Clock.currentTimeMillis)).toISOString()

const storeExpiring = async (principalId: string, extra: Record<string, unknown> = {}) => {
  const res = await app.request("POST", "/v1/vault/credentials", {
    apiKey: dev.apiKey,
    body: {
      principalId,
      service: "github",
      accessToken: "stale_access",
      refreshToken: "original_refresh",
      tokenExpiresAt: new Date(Date.parse(await nowIso()) + 60_000).toISOString(),
      tokenEndpoint,
      clientId: "client id/1",
      clientSecret: "client:secret",
      ...extra
    }
  })
  expect(res.status).toBe(201)
  return res.body.id as string
}

const tokenFor = async (principalId: string) =>
  (await issueGrant(app, { developerId: dev.developerId, agentId, principalId, scopes: ["github:read"], expiresInSeconds: 30 * 86400 })).token.grantToken

const exchange = (token: string) =>
  app.request("POST", "/v1/vault/credentials/exchange", { bearer: token, body: { service: "github" } })

const row = async (id: string) => (await app.query("SELECT * FROM vault_credentials WHERE id = $1", [id]))[0]

describe("upstream refresh", () => {
  test("not yet expired: the stored token, no upstream call; expired on the service clock: refreshed once", async () => {
    const id = await storeExpiring("user_ok")
    const token = await tokenFor("user_ok")
    const before = await exchange(token)
    expect(before.status).toBe(200)
    expect(before.body.accessToken).toBe("stale_access")
    expect(calls).toHaveLength(0)

    await app.adjust("2 minutes")
    const res = await exchange(token)
    expect(res.status).toBe(200)
    expect(res.body.accessToken).toMatch(/^fresh_access_\d+$/)
    const at = Date.parse(await nowIso())
    expect(res.body.tokenExpiresAt).toBe(new Date(at + 3600_000).toISOString())
    expect(calls).toHaveLength(1)
    expect(calls[0]!.form).toEqual({ grant_type: "refresh_token", refresh_token: "original_refresh" })
    expect(calls[0]!.contentType).toBe("application/x-www-form-urlencoded")
    // RFC 6749 §2.3.1: form-urlencoded id and secret in HTTP Basic
    expect(calls[0]!.authorization).toBe(`Basic ${Buffer.from("client%20id%2F1:client%3Asecret").toString("base64")}`)

    const stored = await row(id)
    expect(stored.tokenExpiresAt.toISOString()).toBe(res.body.tokenExpiresAt)
    expect(stored.refreshedAt).not.toBeNull()
    expect(JSON.stringify(stored)).not.toContain("fresh_access")

    // the fresh token is kept: the next exchange does not call upstream
    const again = await exchange(token)
    expect(again.body.accessToken).toBe(res.body.accessToken)
    expect(calls).toHaveLength(1)
    const view = await app.request("GET", `/v1/vault/credentials/${id}`, { apiKey: dev.apiKey })
    expect(view.body.refreshedAt).not.toBeNull()
    expect(view.text).not.toContain("fresh_access")

    // once that one expires too, the rotated refresh token is used
    await app.adjust("61 minutes")
    const third = await exchange(token)
    expect(third.body.accessToken).not.toBe(res.body.accessToken)
    expect(calls).toHaveLength(2)
    expect(calls[1]!.form.refresh_token).toMatch(/^rotated_refresh_\d+$/)
  })

  test("10 concurrent exchanges cause exactly one refresh and all get the fresh token", async () => {
    await storeExpiring("user_concurrent")
    const token = await tokenFor("user_concurrent")
    await app.adjust("2 minutes")
    delayMs = 300
    const results = await Promise.all(Array.from({ length: 10 }, () => exchange(token)))
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(200))
    expect(calls).toHaveLength(1)
    const tokens = new Set(results.map((r) => r.body.accessToken))
    expect(tokens.size).toBe(1)
    expect([...tokens][0]).toMatch(/^fresh_access_\d+$/)
    const events = await app.query(
      "SELECT data FROM events WHERE type = 'vault.credential.exchanged' AND data->>'principalId' = 'user_concurrent'"
    )
    expect(events).toHaveLength(10)
    // every exchange reports the refresh it returned; exactly one upstream call was made
    expect(events.every((e) => e.data.refreshed === true)).toBe(true)
  })

  test("a slow upstream holds no database connection: other requests are served while it answers", async () => {
    await storeExpiring("user_slow")
    const token = await tokenFor("user_slow")
    await app.adjust("2 minutes")
    delayMs = 1500
    const started = performance.now()
    let exchangeDone = 0
    const pending = exchange(token).then((r) => {
      exchangeDone = performance.now() - started
      return r
    })
    while (calls.length === 0) await Bun.sleep(10) // the upstream call is under way
    // routes that need the database (embedded mode has exactly one connection)
    const list = await app.request("GET", "/v1/vault/credentials?principalId=user_slow", { apiKey: dev.apiKey })
    const listDone = performance.now() - started
    expect(list.status).toBe(200)
    expect(list.body.credentials).toHaveLength(1)
    const me = await app.request("GET", "/v1/audit/entries?limit=1", { apiKey: dev.apiKey })
    expect(me.status).toBe(200)
    const res = await pending
    expect(res.status).toBe(200)
    expect(res.body.accessToken).toMatch(/^fresh_access_\d+$/)
    expect(listDone).toBeLessThan(1000)
    expect(exchangeDone).toBeGreaterThanOrEqual(1500)
    expect(calls).toHaveLength(1)
  })

  test("a credential stored again while its refresh is under way keeps what was stored", async () => {
    const id = await storeExpiring("user_replaced")
    const token = await tokenFor("user_replaced")
    await app.adjust("2 minutes")
    delayMs = 800
    const pending = exchange(token)
    while (calls.length === 0) await Bun.sleep(10)
    const replaced = await app.request("POST", "/v1/vault/credentials", {
      apiKey: dev.apiKey,
      body: { principalId: "user_replaced", service: "github", accessToken: "stored_meanwhile" }
    })
    expect(replaced.status).toBe(201)
    expect(replaced.body.id).toBe(id)
    const res = await pending
    // the exchange that started before still gets the token its refresh fetched
    expect(res.status).toBe(200)
    expect(res.body.accessToken).toMatch(/^fresh_access_\d+$/)
    // the row keeps the credential stored meanwhile, not the refresh's answer
    const after = await exchange(token)
    expect(after.body.accessToken).toBe("stored_meanwhile")
    const stored = await row(id)
    expect(stored.refreshedAt).toBeNull()
    expect(stored.refreshLease).toBeNull()
  })

  test("a failed refresh answers 502 UPSTREAM_REFRESH_FAILED and keeps the old row", async () => {
    const id = await storeExpiring("user_fail")
    const token = await tokenFor("user_fail")
    await app.adjust("2 minutes")
    const before = await row(id)
    for (const mode of ["invalid_grant", "error500", "html", "no_token"] as const) {
      behaviour = mode
      const res = await exchange(token)
      expect({ mode, status: res.status, code: res.body.code }).toEqual({ mode, status: 502, code: "UPSTREAM_REFRESH_FAILED" })
      expect(res.text).not.toContain("original_refresh")
      expect(res.text).not.toContain("stale_access")
      if (mode === "invalid_grant") expect(res.body.message).toContain("HTTP 400 invalid_grant")
    }
    expect(calls).toHaveLength(4)
    const after = await row(id)
    expect(after).toEqual(before)
    // and once upstream recovers, the old refresh token still works
    behaviour = "ok"
    const ok = await exchange(token)
    expect(ok.status).toBe(200)
    expect(calls[calls.length - 1]!.form.refresh_token).toBe("original_refresh")
  })

  test("an unreachable endpoint answers 502 too; no event is recorded for a failed exchange", async () => {
    const dead = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") })
    const deadUrl = `http://127.0.0.1:${dead.port}/token`
    dead.stop(true)
    await storeExpiring("user_dead", { tokenEndpoint: deadUrl })
    const token = await tokenFor("user_dead")
    await app.adjust("2 minutes")
    const res = await exchange(token)
    expect(res.status).toBe(502)
    expect(res.body.code).toBe("UPSTREAM_REFRESH_FAILED")
    expect(res.body.message).toContain("could not be reached")
    const events = await app.query("SELECT 1 FROM events WHERE type = 'vault.credential.exchanged' AND data->>'principalId' = 'user_dead'")
    expect(events).toHaveLength(0)
  })

  test("client id without a secret goes in the body; expired credentials without a refresh token are returned as stored", async () => {
    await storeExpiring("user_public", { clientSecret: undefined, clientId: "public-client" })
    const token = await tokenFor("user_public")
    await app.adjust("2 minutes")
    expect((await exchange(token)).status).toBe(200)
    expect(calls[0]!.authorization).toBeNull()
    expect(calls[0]!.form).toEqual({ grant_type: "refresh_token", refresh_token: "original_refresh", client_id: "public-client" })

    calls = []
    await storeExpiring("user_norefresh", { refreshToken: undefined })
    const t2 = await tokenFor("user_norefresh")
    await app.adjust("2 minutes")
    const res = await exchange(t2)
    expect(res.status).toBe(200)
    expect(res.body.accessToken).toBe("stale_access")
    expect(calls).toHaveLength(0)
  })
})

describe("token endpoints outside WEBHOOK_ALLOW_PRIVATE_HOSTS", () => {
  test("checked again at refresh time: a stored endpoint now pointing at a private address is not called", async () => {
    const strict = await startTestApp({ testClock: true, env: { VAULT_ENCRYPTION_KEYS: vaultKey, WEBHOOK_ALLOW_PRIVATE_HOSTS: "false" } })
    try {
      const d = await strict.signup()
      const agent = await createAgent(strict, d.developerId, ["github:read"])
      // a trailing dot does not make localhost public
      const refused = await strict.request("POST", "/v1/vault/credentials", {
        apiKey: d.apiKey,
        body: { principalId: "u", service: "github", accessToken: "a", refreshToken: "r", tokenEndpoint: "https://localhost./token" }
      })
      expect(refused.status).toBe(400)
      const now = await strict.run(Clock.currentTimeMillis)
      const stored = await strict.request("POST", "/v1/vault/credentials", {
        apiKey: d.apiKey,
        body: {
          principalId: "u", service: "github", accessToken: "stale", refreshToken: "r",
          tokenExpiresAt: new Date(now + 60_000).toISOString(), tokenEndpoint: "https://oauth.example.com/token"
        }
      })
      expect(stored.status).toBe(201)
      const token = (await issueGrant(strict, { developerId: d.developerId, agentId: agent, principalId: "u", scopes: ["github:read"], expiresInSeconds: 86400 })).token.grantToken
      await strict.adjust("2 minutes")
      // the host the endpoint names now resolves (or here: is) somewhere private: the upstream here would answer
      for (const endpoint of [`https://127.0.0.1:${upstream.port}/oauth/token`, `https://localhost:${upstream.port}/oauth/token`]) {
        await strict.query("UPDATE vault_credentials SET token_endpoint = $1 WHERE id = $2", [endpoint, stored.body.id])
        const res = await strict.request("POST", "/v1/vault/credentials/exchange", { bearer: token, body: { service: "github" } })
        expect(res.status).toBe(502)
        expect(res.body.code).toBe("UPSTREAM_REFRESH_FAILED")
        expect(res.body.message).toMatch(/token endpoint: receiver not allowed or unreachable/)
      }
      expect(calls).toHaveLength(0)
    } finally {
      await strict.stop()
    }
  })
})

describe.if(usingRealPostgres)("two instances", () => {
  test("concurrent exchanges on two instances sharing the database cause one refresh (lease, then re-check)", async () => {
    const second = await startTestApp({
      databaseUrl: app.databaseUrl,
      testClock: true,
      startTime: Date.parse(await nowIso()),
      env: { VAULT_ENCRYPTION_KEYS: vaultKey }
    })
    try {
      await storeExpiring("user_two")
      const token = await tokenFor("user_two")
      await app.adjust("2 minutes")
      await second.adjust("2 minutes")
      delayMs = 300
      // An exchange that finds the other instance's refresh lease looks again every 100 ms of its
      // (test) clock: both clocks move on while the exchanges are in flight.
      let inFlight = true
      const ticking = (async () => {
        while (inFlight) {
          await Promise.all([app.adjust("100 millis"), second.adjust("100 millis")])
          await Bun.sleep(20)
        }
      })()
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) =>
        (i % 2 === 0 ? app : second).request("POST", "/v1/vault/credentials/exchange", { bearer: token, body: { service: "github" } })))
      inFlight = false
      await ticking
      expect(results.map((r) => r.status)).toEqual(Array(10).fill(200))
      expect(calls).toHaveLength(1)
      expect(new Set(results.map((r) => r.body.accessToken)).size).toBe(1)
    } finally {
      await second.stop()
    }
  })
})
