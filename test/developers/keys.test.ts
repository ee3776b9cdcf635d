/**
 * Several API keys (decisions §2, revised; issue 36 item 1): named `full` and `read` keys, at most
 * 10 live ones, a read key refused anything but GETs and token verification, rotation of the
 * calling key with a grace period on the service's clock, and every key change on the audit chain.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { readKeyRefusal } from "../../src/platform/Auth.ts"
import { runMigrations } from "../../src/platform/Migrate.ts"
import { startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"
import { within } from "../support/wait.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
})
afterAll(() => app.stop())

const KEY_ID = /^key_[0-9A-Z]{26}$/
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

const listKeys = async (apiKey: string) => {
  const res = await app.request("GET", "/v1/keys", { apiKey })
  expect(res.status).toBe(200)
  return res.body.keys as Array<{ id: string; name: string; scope: string; prefix: string; createdAt: string; lastUsedAt: string | null }>
}
const createKey = (apiKey: string, body: unknown) => app.request("POST", "/v1/keys", { apiKey, body })
const status = async (apiKey: string) => (await app.request("GET", "/v1/me", { apiKey })).status
const keyAudit = async (developerId: string) =>
  app.query<{ action: string; metadata: Record<string, unknown> }>(
    "SELECT action, metadata FROM audit_log WHERE developer_id = $1 AND action LIKE 'service.key.%' ORDER BY seq",
    [developerId]
  )

describe("creating and listing keys", () => {
  test("POST /v1/keys answers 201 with the key once; GET /v1/keys lists it without the key; both keys work", async () => {
    const dev = await app.signup()
    // lists are newest first; keys made in the same millisecond would tie
    await app.adjust("1 second")
    const created = await createKey(dev.apiKey, { name: "CI deploys", scope: "full" })
    expect(created.status).toBe(201)
    expect(Object.keys(created.body).sort()).toEqual(["apiKey", "createdAt", "id", "name", "prefix", "scope"])
    expect(created.body).toMatchObject({ name: "CI deploys", scope: "full", createdAt: new Date(await app.now()).toISOString() })
    expect(created.body.id).toMatch(KEY_ID)
    expect(created.body.apiKey).toMatch(/^sk_live_[A-Za-z0-9_-]{43}$/)
    expect(created.body.prefix).toBe(created.body.apiKey.slice(0, 12))
    expect(await status(created.body.apiKey)).toBe(200)
    expect(await status(dev.apiKey)).toBe(200)

    const listed = await app.request("GET", "/v1/keys", { apiKey: created.body.apiKey })
    expect(listed.status).toBe(200)
    expect(listed.text).not.toContain(created.body.apiKey)
    expect(listed.text).not.toContain(dev.apiKey.slice(12))
    const [newest, first] = listed.body.keys
    expect(listed.body.keys).toHaveLength(2)
    expect(newest).toEqual({ id: created.body.id, name: "CI deploys", scope: "full", prefix: created.body.prefix, createdAt: created.body.createdAt, lastUsedAt: expect.stringMatching(ISO) })
    // the sign-up key is the developer's first full key
    expect(first).toEqual({ id: expect.stringMatching(KEY_ID), name: "Default", scope: "full", prefix: dev.apiKey.slice(0, 12), createdAt: expect.stringMatching(ISO), lastUsedAt: expect.stringMatching(ISO) })

    const stored = await app.query<{ keyHash: string }>("SELECT key_hash FROM api_keys WHERE id = $1", [created.body.id])
    expect(stored[0]!.keyHash).toMatch(/^[0-9a-f]{64}$/)
    expect(await keyAudit(dev.developerId)).toEqual([{ action: "service.key.created", metadata: { keyId: created.body.id } }])
  })

  test("a sandbox developer's keys start sk_test_", async () => {
    const dev = await app.signup({ mode: "sandbox" })
    const created = await createKey(dev.apiKey, { name: "reader", scope: "read" })
    expect(created.status).toBe(201)
    expect(created.body.apiKey).toStartWith("sk_test_")
  })

  test("a name of 1-100 characters and a scope of full or read, else 400 BAD_REQUEST naming the field", async () => {
    const dev = await app.signup()
    for (const [body, field] of [[{ name: "", scope: "full" }, "name"], [{ name: "x".repeat(101), scope: "full" }, "name"], [{ name: "x", scope: "admin" }, "scope"], [{ name: "x" }, "scope"]] as const) {
      const res = await createKey(dev.apiKey, body)
      expect(res.status).toBe(400)
      expect(res.body.code).toBe("BAD_REQUEST")
      expect(res.body.details.map((d: { path: string }) => d.path)).toContain(field)
    }
    expect((await createKey(dev.apiKey, { name: "x".repeat(100), scope: "read" })).status).toBe(201)
    expect(await listKeys(dev.apiKey)).toHaveLength(2)
  })

  test("at most 10 live keys: the 11th answers 409 CONFLICT and is not made", async () => {
    const dev = await app.signup()
    for (let i = 2; i <= 10; i++) expect((await createKey(dev.apiKey, { name: `key ${i}`, scope: i % 2 === 0 ? "read" : "full" })).status).toBe(201)
    const eleventh = await createKey(dev.apiKey, { name: "key 11", scope: "read" })
    expect(eleventh.status).toBe(409)
    expect(eleventh.body).toEqual({ code: "CONFLICT", message: "A developer holds at most 10 API keys; delete one first", requestId: expect.any(String) })
    expect(await listKeys(dev.apiKey)).toHaveLength(10)
    expect((await keyAudit(dev.developerId)).length).toBe(9)
    // a deleted key frees its place
    const victim = (await listKeys(dev.apiKey)).find((k) => k.name === "key 10")!
    expect((await app.request("DELETE", `/v1/keys/${victim.id}`, { apiKey: dev.apiKey })).status).toBe(204)
    expect((await createKey(dev.apiKey, { name: "key 11", scope: "read" })).status).toBe(201)
  })
})

describe("deleting keys", () => {
  test("DELETE /v1/keys/:id answers 204; the key stops working at once; on the audit chain with its id", async () => {
    const dev = await app.signup()
    const reader = await createKey(dev.apiKey, { name: "auditor", scope: "read" })
    expect(await status(reader.body.apiKey)).toBe(200)
    const deleted = await app.request("DELETE", `/v1/keys/${reader.body.id}`, { apiKey: dev.apiKey })
    expect(deleted.status).toBe(204)
    expect(deleted.text).toBe("")
    expect(await status(reader.body.apiKey)).toBe(401)
    expect((await listKeys(dev.apiKey)).map((k) => k.id)).not.toContain(reader.body.id)
    expect((await app.request("DELETE", `/v1/keys/${reader.body.id}`, { apiKey: dev.apiKey })).status).toBe(404)
    expect(await keyAudit(dev.developerId)).toEqual([
      { action: "service.key.created", metadata: { keyId: reader.body.id } },
      { action: "service.key.deleted", metadata: { keyId: reader.body.id } }
    ])
  })

  test("another developer's key and an unknown id answer 404 NOT_FOUND, and the key keeps working", async () => {
    const owner = await app.signup()
    const other = await app.signup()
    const key = await createKey(owner.apiKey, { name: "owner's", scope: "full" })
    for (const id of [key.body.id, "key_01JDQ96A2B3C4D5E6F7G8H9J0K"]) {
      const res = await app.request("DELETE", `/v1/keys/${id}`, { apiKey: other.apiKey })
      expect(res.status).toBe(404)
      expect(res.body).toEqual({ code: "NOT_FOUND", message: "No such API key", requestId: expect.any(String) })
    }
    expect(await status(key.body.apiKey)).toBe(200)
  })

  test("the last full key cannot be deleted (409 CONFLICT), read keys do not count; with another full key it can", async () => {
    const dev = await app.signup()
    const reader = await createKey(dev.apiKey, { name: "auditor", scope: "read" })
    const first = (await listKeys(dev.apiKey)).find((k) => k.name === "Default")!
    const refused = await app.request("DELETE", `/v1/keys/${first.id}`, { apiKey: dev.apiKey })
    expect(refused.status).toBe(409)
    expect(refused.body).toEqual({ code: "CONFLICT", message: "This is your last full API key; create another full key before deleting it", requestId: expect.any(String) })
    expect(await status(dev.apiKey)).toBe(200)

    const second = await createKey(dev.apiKey, { name: "second", scope: "full" })
    // a key may delete itself when another full key remains
    expect((await app.request("DELETE", `/v1/keys/${first.id}`, { apiKey: dev.apiKey })).status).toBe(204)
    expect(await status(dev.apiKey)).toBe(401)
    expect((await app.request("DELETE", `/v1/keys/${second.body.id}`, { apiKey: second.body.apiKey })).status).toBe(409)
    expect((await app.request("DELETE", `/v1/keys/${reader.body.id}`, { apiKey: second.body.apiKey })).status).toBe(204)
  })
})

describe("read keys", () => {
  test("a read key is refused every POST, PATCH and DELETE with 403 INSUFFICIENT_KEY_SCOPE, and nothing changes", async () => {
    const dev = await app.signup()
    const reader = await createKey(dev.apiKey, { name: "auditor", scope: "read" })
    const agents = async () => (await app.request("GET", "/v1/agents", { apiKey: dev.apiKey })).body.agents.length
    const before = await agents()
    const attempts: Array<[string, string, unknown]> = [
      ["POST", "/v1/agents", { name: "sneaky" }],
      ["PATCH", "/v1/me", { name: "renamed" }],
      ["POST", "/v1/keys", { name: "escalate", scope: "full" }],
      ["DELETE", `/v1/keys/${reader.body.id}`, undefined],
      ["POST", "/v1/webhooks", { url: "https://example.com/hook", events: ["grant.revoked"] }]
    ]
    for (const [method, path, body] of attempts) {
      const res = await app.request(method, path, { apiKey: reader.body.apiKey, body })
      expect(res.status).toBe(403)
      expect(res.body).toEqual({ code: "INSUFFICIENT_KEY_SCOPE", message: readKeyRefusal, requestId: res.headers.get("x-request-id") })
      // counted like any API-key request: the plan budget's headers
      expect(res.headers.get("x-ratelimit-limit")).toBe("100")
    }
    expect(await agents()).toBe(before)
    const me = await app.request("GET", "/v1/me", { apiKey: dev.apiKey })
    expect(me.body.name).not.toBe("renamed")
    expect((await listKeys(dev.apiKey)).map((k) => k.name).sort()).toEqual(["Default", "auditor"])
  })

  test("a read key may call GET operations and POST /v1/tokens/verify", async () => {
    const dev = await app.signup()
    const reader = await createKey(dev.apiKey, { name: "auditor", scope: "read" })
    for (const path of ["/v1/me", "/v1/keys", "/v1/agents", "/v1/audit/entries", "/v1/audit/verify", "/v1/webhooks"]) {
      expect([path, (await app.request("GET", path, { apiKey: reader.body.apiKey })).status]).toEqual([path, 200])
    }
    const agentId = await createAgent(app, dev.developerId)
    const { token } = await issueGrant(app, { developerId: dev.developerId, agentId, scopes: ["email:read"] })
    const verified = await app.request("POST", "/v1/tokens/verify", { apiKey: reader.body.apiKey, body: { token: token.grantToken } })
    expect(verified.status).toBe(200)
    expect(verified.body.valid).toBe(true)
  })
})

describe("rotation", () => {
  test("with a grace period both keys answer until it ends, then the old one answers 401 (TestClock)", async () => {
    const dev = await app.signup()
    const [first] = await listKeys(dev.apiKey)
    await app.adjust("1 second")
    const rotated = await app.request("POST", "/v1/keys/rotate", { apiKey: dev.apiKey, body: { gracePeriodSeconds: 600 } })
    expect(rotated.status).toBe(200)
    expect(rotated.body).toEqual({ apiKey: expect.stringMatching(/^sk_live_/), rotatedAt: new Date(await app.now()).toISOString() })
    expect(await status(dev.apiKey)).toBe(200)
    expect(await status(rotated.body.apiKey)).toBe(200)
    // the replacement keeps the name and scope; both are listed while the old one is in its grace period
    const during = await listKeys(rotated.body.apiKey)
    expect(during.map((k) => [k.name, k.scope, k.prefix])).toEqual([["Default", "full", rotated.body.apiKey.slice(0, 12)], ["Default", "full", dev.apiKey.slice(0, 12)]])

    await app.adjust("599999 millis")
    expect(await status(dev.apiKey)).toBe(200)
    await app.adjust("1 millis")
    const refused = await app.request("GET", "/v1/me", { apiKey: dev.apiKey })
    expect(refused.status).toBe(401)
    expect(refused.body.code).toBe("UNAUTHORIZED")
    expect((await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "late" } })).status).toBe(401)
    expect(await status(rotated.body.apiKey)).toBe(200)
    expect((await listKeys(rotated.body.apiKey)).map((k) => k.id)).not.toContain(first!.id)

    const newId = (await listKeys(rotated.body.apiKey))[0]!.id
    const audit = await keyAudit(dev.developerId)
    expect(audit).toEqual([{ action: "service.key.rotated", metadata: { keyId: first!.id, newKeyId: newId, gracePeriodSeconds: 600 } }])
    expect(JSON.stringify(audit)).not.toContain(rotated.body.apiKey)
  })

  test("no body (or a grace period of 0) ends the old key at once", async () => {
    for (const body of [undefined, { gracePeriodSeconds: 0 }, {}]) {
      const dev = await app.signup()
      expect(await status(dev.apiKey)).toBe(200)
      const rotated = await app.request("POST", "/v1/keys/rotate", { apiKey: dev.apiKey, body })
      expect(rotated.status).toBe(200)
      expect(await status(dev.apiKey)).toBe(401)
      expect(await status(rotated.body.apiKey)).toBe(200)
      expect(await listKeys(rotated.body.apiKey)).toHaveLength(1)
    }
  })

  test("a key in its grace period cannot be rotated again (409 CONFLICT); its replacement can", async () => {
    const dev = await app.signup()
    const rotated = await app.request("POST", "/v1/keys/rotate", { apiKey: dev.apiKey, body: { gracePeriodSeconds: 60 } })
    const again = await app.request("POST", "/v1/keys/rotate", { apiKey: dev.apiKey, body: { gracePeriodSeconds: 60 } })
    expect(again.status).toBe(409)
    expect(again.body).toEqual({ code: "CONFLICT", message: "This API key has already been rotated; use the key that replaced it", requestId: expect.any(String) })
    expect((await app.request("POST", "/v1/keys/rotate", { apiKey: rotated.body.apiKey })).status).toBe(200)
  })

  test("a read key rotates itself into a read key", async () => {
    const dev = await app.signup()
    const reader = await createKey(dev.apiKey, { name: "auditor", scope: "read" })
    const rotated = await app.request("POST", "/v1/keys/rotate", { apiKey: reader.body.apiKey, body: { gracePeriodSeconds: 30 } })
    expect(rotated.status).toBe(200)
    expect((await app.request("POST", "/v1/agents", { apiKey: rotated.body.apiKey, body: { name: "x" } })).status).toBe(403)
    const keys = await listKeys(dev.apiKey)
    expect(keys.filter((k) => k.name === "auditor").map((k) => k.scope)).toEqual(["read", "read"])
  })

  test("gracePeriodSeconds outside 0..86400, not whole, or another field: 400 BAD_REQUEST, nothing rotated", async () => {
    const dev = await app.signup()
    for (const body of [{ gracePeriodSeconds: 86_401 }, { gracePeriodSeconds: -1 }, { gracePeriodSeconds: 1.5 }, { gracePeriodSeconds: "60" }, { grace: 60 }]) {
      const res = await app.request("POST", "/v1/keys/rotate", { apiKey: dev.apiKey, body })
      expect(res.status).toBe(400)
      expect(res.body).toMatchObject({ code: "BAD_REQUEST", message: "The body may hold only gracePeriodSeconds: a whole number of seconds from 0 to 86400" })
    }
    expect((await app.request("POST", "/v1/keys/rotate", { apiKey: dev.apiKey, rawBody: "{not json" })).status).toBe(400)
    expect(await status(dev.apiKey)).toBe(200)
    expect(await listKeys(dev.apiKey)).toHaveLength(1)
    expect((await app.request("POST", "/v1/keys/rotate", { apiKey: dev.apiKey, body: { gracePeriodSeconds: 86_400 } })).status).toBe(200)
  })
})

test("lastUsedAt: null until used, then written at most once a minute per key (service clock)", async () => {
  const dev = await app.signup()
  const reader = await createKey(dev.apiKey, { name: "auditor", scope: "read" })
  const lastUsed = async () => (await listKeys(dev.apiKey)).find((k) => k.id === reader.body.id)!.lastUsedAt
  expect(await lastUsed()).toBeNull()
  const t0 = await app.now()
  expect(await status(reader.body.apiKey)).toBe(200)
  expect(await lastUsed()).toBe(new Date(t0).toISOString())
  // a change to the developer drops its cached keys, so the next use reads the database again
  const dropCache = () => app.request("PATCH", "/v1/me", { apiKey: dev.apiKey, body: { name: `n${Math.random()}` } })
  await app.adjust("30 seconds")
  await dropCache()
  expect(await status(reader.body.apiKey)).toBe(200)
  expect(await lastUsed()).toBe(new Date(t0).toISOString())
  await app.adjust("31 seconds")
  await dropCache()
  expect(await status(reader.body.apiKey)).toBe(200)
  expect(await lastUsed()).toBe(new Date(t0 + 61_000).toISOString())
})

test("the migration moves each developer's one key into api_keys as its first full key, which keeps working", async () => {
  const own = await startTestApp()
  try {
    const live = await own.signup()
    const sandbox = await own.signup({ mode: "sandbox" })
    // back to the schema before sql/0037: the key only in developers.api_key_hash
    await own.query(`DROP TRIGGER api_key_changed ON api_keys`)
    await own.query(`DROP FUNCTION notify_api_key_change()`)
    await own.query(`ALTER TABLE developers ADD COLUMN api_key_hash text UNIQUE`)
    await own.query(`UPDATE developers d SET api_key_hash = k.key_hash FROM api_keys k WHERE k.developer_id = d.id`)
    await own.query(`ALTER TABLE developers ALTER COLUMN api_key_hash SET NOT NULL`)
    await own.query(`DROP TABLE api_keys`)
    await own.query(`DELETE FROM schema_migrations WHERE migration_id = 37`)
    await own.run(runMigrations)

    const moved = await own.query<{ id: string; name: string; scope: string; prefix: string }>(
      "SELECT id, name, scope, prefix FROM api_keys WHERE developer_id = $1", [live.developerId])
    expect(moved).toEqual([{ id: `key_${live.developerId.slice(4)}`, name: "Default", scope: "full", prefix: "sk_live_" }])
    for (const dev of [live, sandbox]) {
      expect((await own.request("GET", "/v1/me", { apiKey: dev.apiKey })).status).toBe(200)
      const keys = (await own.request("GET", "/v1/keys", { apiKey: dev.apiKey })).body.keys
      // the first use after the move completes the prefix
      expect(keys).toEqual([expect.objectContaining({ name: "Default", scope: "full", prefix: dev.apiKey.slice(0, 12) })])
    }
    expect((await own.request("POST", "/v1/agents", { apiKey: live.apiKey, body: { name: "after" } })).status).toBe(201)
  } finally {
    await own.stop()
  }
})

test("the OpenAPI document declares 403 INSUFFICIENT_KEY_SCOPE on exactly the API-key operations a read key may not call", async () => {
  const spec = (await app.request("GET", "/openapi.json")).body
  const codesAt403 = (op: any): Array<string> => {
    const schema = op.responses?.["403"]?.content?.["application/json"]?.schema
    const refs: Array<string> = (schema?.anyOf ?? (schema === undefined ? [] : [schema])).map((s: any) => s.$ref)
    return refs.map((ref) => spec.components.schemas[ref.split("/").pop()!].properties.code.enum[0])
  }
  const declares = (method: string, path: string) => codesAt403(spec.paths[path][method]).includes("INSUFFICIENT_KEY_SCOPE")
  expect(spec.components.schemas.InsufficientKeyScope.properties.code.enum).toEqual(["INSUFFICIENT_KEY_SCOPE"])
  for (const [method, path] of [["post", "/v1/agents"], ["patch", "/v1/me"], ["post", "/v1/keys"], ["delete", "/v1/keys/{id}"]]) {
    expect([method, path, declares(method!, path!)]).toEqual([method, path, true])
  }
  for (const [method, path] of [["get", "/v1/agents"], ["get", "/v1/keys"], ["post", "/v1/tokens/verify"], ["post", "/v1/keys/rotate"], ["post", "/v1/signup"]]) {
    expect([method, path, declares(method!, path!)]).toEqual([method, path, false])
  }
  // every write an API key authenticates declares it, every read leaves it out
  for (const [path, item] of Object.entries<any>(spec.paths)) {
    for (const method of ["get", "post", "put", "patch", "delete"]) {
      const op = item[method]
      if (op === undefined || !(op.security ?? []).some((s: Record<string, unknown>) => "apiKey" in s)) continue
      const readMay = method === "get" || (method === "post" && (path === "/v1/tokens/verify" || path === "/v1/keys/rotate"))
      expect([method, path, declares(method, path)]).toEqual([method, path, !readMay])
    }
  }
})

test.skipIf(!usingRealPostgres)("two instances: a rotation's grace and a deletion made on one hold on the other at once, not after its cache runs out", async () => {
  const one = await startTestApp()
  const two = await startTestApp({ databaseUrl: one.databaseUrl })
  try {
    const dev = await one.signup()
    const reader = (await one.request("POST", "/v1/keys", { apiKey: dev.apiKey, body: { name: "auditor", scope: "read" } })).body
    // the other instance has resolved (and cached) both keys
    expect((await two.request("GET", "/v1/me", { apiKey: dev.apiKey })).status).toBe(200)
    expect((await two.request("GET", "/v1/me", { apiKey: reader.apiKey })).status).toBe(200)

    const rotated = await one.request("POST", "/v1/keys/rotate", { apiKey: dev.apiKey, body: { gracePeriodSeconds: 3600 } })
    expect(rotated.status).toBe(200)
    expect((await two.request("GET", "/v1/me", { apiKey: rotated.body.apiKey })).status).toBe(200)
    expect((await two.request("GET", "/v1/me", { apiKey: dev.apiKey })).status).toBe(200)
    // deleting the old key ends its grace early, everywhere; so does deleting the read key
    const [, old] = (await one.request("GET", "/v1/keys", { apiKey: rotated.body.apiKey })).body.keys.filter((k: any) => k.name === "Default")
    expect((await one.request("DELETE", `/v1/keys/${old.id}`, { apiKey: rotated.body.apiKey })).status).toBe(204)
    expect((await one.request("DELETE", `/v1/keys/${reader.id}`, { apiKey: rotated.body.apiKey })).status).toBe(204)
    const gone = await within(1000, async () =>
      (await two.request("GET", "/v1/me", { apiKey: dev.apiKey })).status === 401 &&
      (await two.request("GET", "/v1/me", { apiKey: reader.apiKey })).status === 401)
    expect(gone).toBeDefined()
    expect((await two.request("GET", "/v1/me", { apiKey: rotated.body.apiKey })).status).toBe(200)
  } finally {
    await two.server.stop()
    await one.stop()
  }
})
