/**
 * Decisions §2 (revised), issue 36 item 2: every POST with an API key honours Idempotency-Key. The
 * same POST /v1/agents sent twice used to make two agents.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
}, 120_000)
afterAll(() => app.stop())

const post = (apiKey: string, path: string, body: unknown, key?: string) =>
  app.request("POST", path, { apiKey, body, headers: key === undefined ? {} : { "idempotency-key": key } })
const agents = async (developerId: string) =>
  (await app.query<{ n: number }>("SELECT count(*)::int AS n FROM agents WHERE developer_id = $1", [developerId]))[0]!.n
const stored = (developerId: string, key: string) =>
  app.query<{ status: string; committed: boolean }>("SELECT status, committed FROM idempotency_keys WHERE developer_id = $1 AND key = $2", [developerId, key])

describe("Idempotency-Key", () => {
  test("a retry with the same key and body answers the first answer again, replayed, and makes nothing", async () => {
    const dev = await app.signup()
    const body = { name: "mail", scopes: ["email:read"] }
    const first = await post(dev.apiKey, "/v1/agents", body, "create-mail-1")
    const again = await post(dev.apiKey, "/v1/agents", body, "create-mail-1")
    expect(first.status).toBe(201)
    expect([again.status, again.body, again.headers.get("idempotent-replayed")]).toEqual([201, first.body, "true"])
    expect(first.headers.get("idempotent-replayed")).toBeNull()
    expect(await agents(dev.developerId)).toBe(1)
    // the operation's transaction marked the key with its own commit
    expect(await stored(dev.developerId, "create-mail-1")).toEqual([{ status: "done", committed: true }])
    // without a key, two agents (as before); another developer's same key is theirs alone
    await post(dev.apiKey, "/v1/agents", body)
    expect(await agents(dev.developerId)).toBe(2)
    const other = await app.signup()
    expect((await post(other.apiKey, "/v1/agents", body, "create-mail-1")).headers.get("idempotent-replayed")).toBeNull()
    expect(await agents(other.developerId)).toBe(1)
  })

  test("a POST sent without a body honours it too: a retried secret rotation answers the first new secret and rotates once", async () => {
    const dev = await app.signup()
    const hook = (await post(dev.apiKey, "/v1/webhooks", { url: "https://hooks.example.com/in", events: ["grant.created"] })).body
    const rotate = () => app.request("POST", `/v1/webhooks/${hook.id}/rotate-secret`, { apiKey: dev.apiKey, headers: { "idempotency-key": "rotate-1" } })
    const first = await rotate()
    const again = await rotate()
    expect(first.status).toBe(200)
    expect([again.status, again.body.secret, again.headers.get("idempotent-replayed")]).toEqual([200, first.body.secret, "true"])
    // one rotation: the secret before it is the previous one, not the first rotation's
    const [row] = await app.query<{ previous: string | null }>("SELECT previous_secret_ciphertext AS previous FROM webhook_endpoints WHERE id = $1", [hook.id])
    expect(row!.previous).not.toBeNull()
    // (kept as done; "committed" is marked by transactions, and this rotation is one statement outside one)
    expect((await stored(dev.developerId, "rotate-1")).map((r) => r.status)).toEqual(["done"])
    // a different body under the same key is another request
    const withBody = await app.request("POST", `/v1/webhooks/${hook.id}/rotate-secret`, { apiKey: dev.apiKey, body: {}, headers: { "idempotency-key": "rotate-1" } })
    expect([withBody.status, withBody.body.code]).toEqual([422, "IDEMPOTENCY_KEY_REUSED"])
  })

  test("the same key with another body: 422 IDEMPOTENCY_KEY_REUSED; a malformed key: 400", async () => {
    const dev = await app.signup()
    await post(dev.apiKey, "/v1/agents", { name: "a", scopes: ["email:read"] }, "k-2")
    const reused = await post(dev.apiKey, "/v1/agents", { name: "b", scopes: ["email:read"] }, "k-2")
    expect([reused.status, reused.body.code]).toEqual([422, "IDEMPOTENCY_KEY_REUSED"])
    for (const key of ["x".repeat(256), "tab\there"]) {
      const bad = await post(dev.apiKey, "/v1/agents", { name: "c", scopes: ["email:read"] }, key)
      expect([bad.status, bad.body.code]).toEqual([400, "BAD_REQUEST"])
    }
    expect(await agents(dev.developerId)).toBe(1)
  })

  test("while the first runs: 409 IDEMPOTENCY_KEY_IN_USE; after a crash before its commit the lease runs out and a retry runs it", async () => {
    const dev = await app.signup()
    const body = { name: "crashy", scopes: ["email:read"] }
    await post(dev.apiKey, "/v1/agents", body, "probe") // the hash of this body, as the service makes it
    const [{ requestHash }] = await app.query("SELECT request_hash FROM idempotency_keys WHERE developer_id = $1 AND key = 'probe'", [dev.developerId])
    const now = await app.now()
    await app.query(
      `INSERT INTO idempotency_keys (developer_id, key, request_hash, status, locked_until, created_at, expires_at)
       VALUES ($1, 'k-3', $2, 'running', $3, $4, $5)`,
      [dev.developerId, requestHash, new Date(now + 120_000), new Date(now), new Date(now + 86_400_000)]
    )
    const busy = await post(dev.apiKey, "/v1/agents", body, "k-3")
    expect([busy.status, busy.body.code, busy.headers.get("retry-after")]).toEqual([409, "IDEMPOTENCY_KEY_IN_USE", "1"])
    expect(await agents(dev.developerId)).toBe(1)
    await app.adjust("121 seconds")
    const taken = await post(dev.apiKey, "/v1/agents", body, "k-3")
    expect(taken.status).toBe(201)
    expect(await agents(dev.developerId)).toBe(2)
  })

  test("a crash after the operation committed but before its answer was kept: never run again, 409 until the key expires", async () => {
    const dev = await app.signup()
    const body = { name: "done", scopes: ["email:read"] }
    await post(dev.apiKey, "/v1/agents", body, "probe")
    const [{ requestHash }] = await app.query("SELECT request_hash FROM idempotency_keys WHERE developer_id = $1 AND key = 'probe'", [dev.developerId])
    const now = await app.now()
    await app.query(
      `INSERT INTO idempotency_keys (developer_id, key, request_hash, status, committed, locked_until, created_at, expires_at)
       VALUES ($1, 'k-4', $2, 'running', true, $3, $4, $5)`,
      [dev.developerId, requestHash, new Date(now - 1), new Date(now), new Date(now + 86_400_000)]
    )
    const lost = await post(dev.apiKey, "/v1/agents", body, "k-4")
    expect([lost.status, lost.body.code, lost.body.message]).toEqual([409, "IDEMPOTENCY_KEY_IN_USE", expect.stringContaining("carried out")])
    expect(await agents(dev.developerId)).toBe(1)
    await app.adjust("25 hours")
    expect((await post(dev.apiKey, "/v1/agents", body, "k-4")).status).toBe(201)
  })

  test("the operations that make grants and tokens honour it too: a replayed code exchange issues one token", async () => {
    const dev = await app.signup({ plan: "enterprise" })
    const agentId = await createAgent(app, dev.developerId, ["email:read"])
    const authorized = await post(dev.apiKey, "/v1/authorize", { agentId, principalId: "user_1", scopes: ["email:read"] }, "authz-1")
    const code = (await app.request("POST", `/v1/consent/${authorized.body.authRequestId}/approve`)).body.code
    const first = await post(dev.apiKey, "/v1/token", { code, agentId }, "token-1")
    const again = await post(dev.apiKey, "/v1/token", { code, agentId }, "token-1")
    expect(first.status).toBe(201)
    expect([again.status, again.body.grantToken, again.headers.get("idempotent-replayed")]).toEqual([201, first.body.grantToken, "true"])
    expect((await app.query("SELECT count(*)::int AS n FROM grant_tokens WHERE developer_id = $1", [dev.developerId]))[0].n).toBe(1)
    // a lean-path POST with a key goes through the API path and is kept like any other
    const grant = await issueGrant(app, { developerId: dev.developerId, agentId, scopes: ["email:read"] })
    const verify = (k: string) => post(dev.apiKey, "/v1/tokens/verify", { token: grant.token.grantToken }, k)
    expect((await verify("v-1")).body.valid).toBe(true)
    expect((await verify("v-1")).headers.get("idempotent-replayed")).toBe("true")
  })
})
