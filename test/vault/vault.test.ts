import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { Grants } from "../../src/grants/Service.ts"
import { AuditChain } from "../../src/platform/AuditChain.ts"
import { Keys } from "../../src/platform/Keys.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
let agentId: string

beforeAll(async () => {
  app = await startTestApp()
  dev = await app.signup()
  agentId = await createAgent(app, dev.developerId, ["github:read"])
})
afterAll(async () => {
  await app.stop()
})

const store = (body: Record<string, unknown>, apiKey = dev.apiKey) =>
  app.request("POST", "/v1/vault/credentials", { apiKey, body })

const exchange = (token: string | undefined, body: unknown = { service: "github" }) =>
  app.request("POST", "/v1/vault/credentials/exchange", {
    ...(token === undefined ? {} : { bearer: token }),
    ...(typeof body === "string" ? { rawBody: body } : { body })
  })

const grantFor = async (scopes: ReadonlyArray<string>, principalId = "user_1", developer = dev, agent = agentId) =>
  issueGrant(app, { developerId: developer.developerId, agentId: agent, principalId, scopes })

describe("store, list, get, delete", () => {
  test("POST stores and answers 201 without any secret; a second POST upserts the same row", async () => {
    const first = await store({
      principalId: "user_store",
      service: "github",
      accessToken: "gho_first_SECRET",
      refreshToken: "ghr_refresh_SECRET",
      tokenExpiresAt: "2030-01-01T00:00:00Z",
      metadata: { login: "octo" },
      tokenEndpoint: "https://github.com/login/oauth/access_token",
      clientId: "Iv1.client",
      clientSecret: "client_SECRET"
    })
    expect(first.status).toBe(201)
    expect(first.body).toMatchObject({
      principalId: "user_store",
      service: "github",
      credentialType: "oauth2",
      tokenExpiresAt: "2030-01-01T00:00:00.000Z",
      metadata: { login: "octo" },
      hasRefreshToken: true,
      tokenEndpoint: "https://github.com/login/oauth/access_token",
      refreshedAt: null
    })
    expect(first.body.id).toMatch(/^vcred_[0-9A-Z]{26}$/)
    expect(first.text).not.toContain("SECRET")
    expect(first.text).not.toContain("Iv1.client")

    const second = await store({ principalId: "user_store", service: "github", accessToken: "gho_second_SECRET", credentialType: "pat" })
    expect(second.status).toBe(201)
    expect(second.body.id).toBe(first.body.id)
    expect(second.body).toMatchObject({ credentialType: "pat", hasRefreshToken: false, tokenEndpoint: null, metadata: {}, tokenExpiresAt: null })
    expect(second.body.createdAt).toBe(first.body.createdAt)

    const rows = await app.query("SELECT id, key_id, iv, ciphertext FROM vault_credentials WHERE principal_id = 'user_store'")
    expect(rows).toHaveLength(1)
    expect(JSON.stringify(rows)).not.toContain("SECRET")
    expect(Buffer.from(rows[0].iv, "base64")).toHaveLength(12)

    const got = await app.request("GET", `/v1/vault/credentials/${first.body.id}`, { apiKey: dev.apiKey })
    expect(got.status).toBe(200)
    expect(got.body).toEqual(second.body)
    expect(got.text).not.toContain("SECRET")
  })

  test("validation errors → 400 BAD_REQUEST", async () => {
    const cases: Array<Record<string, unknown>> = [
      { service: "github", accessToken: "t" },
      { principalId: "u", accessToken: "t" },
      { principalId: "u", service: "github" },
      { principalId: "u", service: "", accessToken: "t" },
      { principalId: "u", service: "git hub", accessToken: "t" },
      { principalId: "u", service: "github", accessToken: "" },
      { principalId: "u", service: "github", accessToken: 5 },
      { principalId: "u", service: "github", accessToken: "t", tokenExpiresAt: "tomorrow" },
      { principalId: "u", service: "github", accessToken: "t", metadata: [1] },
      { principalId: "u", service: "github", accessToken: "t", tokenEndpoint: "not a url", refreshToken: "r" },
      { principalId: "u", service: "github", accessToken: "t", tokenEndpoint: "ftp://x.test/token", refreshToken: "r" },
      { principalId: "u", service: "github", accessToken: "t", clientSecret: "s" }
    ]
    for (const body of cases) {
      const res = await store(body)
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status: 400, code: "BAD_REQUEST" })
      expect(res.body.requestId).toBeString()
    }
    expect((await app.request("POST", "/v1/vault/credentials", { apiKey: dev.apiKey, rawBody: "{nope" })).status).toBe(400)
  })

  test("without an API key → 401", async () => {
    const res = await app.request("POST", "/v1/vault/credentials", { body: { principalId: "u", service: "x", accessToken: "t" } })
    expect(res.status).toBe(401)
    expect(res.body.code).toBe("UNAUTHORIZED")
    expect((await app.request("GET", "/v1/vault/credentials")).status).toBe(401)
  })

  test("list filters by principal and service, pages newest first with a cursor, and never shows tokens", async () => {
    const other = await app.signup()
    for (let i = 0; i < 5; i++) {
      expect((await store({ principalId: "user_list", service: `svc${i}`, accessToken: `tok_${i}_SECRET` })).status).toBe(201)
    }
    await store({ principalId: "user_list2", service: "svc0", accessToken: "x_SECRET" })
    await store({ principalId: "user_list", service: "svc0", accessToken: "y_SECRET" }, other.apiKey)

    const seen: Array<string> = []
    let cursor: string | null = null
    do {
      const q: string = `/v1/vault/credentials?principalId=user_list&limit=2${cursor ? `&cursor=${cursor}` : ""}`
      const page = await app.request("GET", q, { apiKey: dev.apiKey })
      expect(page.status).toBe(200)
      expect(page.text).not.toContain("SECRET")
      expect(page.body.credentials.length).toBeLessThanOrEqual(2)
      seen.push(...page.body.credentials.map((c: any) => c.service))
      cursor = page.body.nextCursor
    } while (cursor !== null)
    // pages concatenate to exactly the unpaged order (newest first, id as tie-breaker)
    const all = await app.request("GET", "/v1/vault/credentials?principalId=user_list&limit=100", { apiKey: dev.apiKey })
    expect(seen).toEqual(all.body.credentials.map((c: any) => c.service))
    expect([...seen].sort()).toEqual(["svc0", "svc1", "svc2", "svc3", "svc4"])
    const created = all.body.credentials.map((c: any) => `${c.createdAt}|${c.id}`)
    expect(created).toEqual([...created].sort().reverse())

    const byService = await app.request("GET", "/v1/vault/credentials?service=svc0", { apiKey: dev.apiKey })
    expect(byService.body.credentials.map((c: any) => c.principalId).sort()).toEqual(["user_list", "user_list2"])
    const both = await app.request("GET", "/v1/vault/credentials?service=svc0&principalId=user_list2", { apiKey: dev.apiKey })
    expect(both.body.credentials).toHaveLength(1)
    expect(both.body.nextCursor).toBeNull()

    for (const bad of ["limit=0", "limit=101", "limit=-1", "limit=abc", "cursor=%%%", "cursor=bm9wZQ"]) {
      const res = await app.request("GET", `/v1/vault/credentials?${bad}`, { apiKey: dev.apiKey })
      expect({ bad, status: res.status, code: res.body.code }).toEqual({ bad, status: 400, code: "BAD_REQUEST" })
    }
  })

  test("another developer's credential answers 404 NOT_FOUND on get and delete; delete removes it", async () => {
    const other = await app.signup()
    const mine = await store({ principalId: "user_del", service: "slack", accessToken: "xoxb_SECRET" })
    for (const method of ["GET", "DELETE"]) {
      const res = await app.request(method, `/v1/vault/credentials/${mine.body.id}`, { apiKey: other.apiKey })
      expect(res.status).toBe(404)
      expect(res.body.code).toBe("NOT_FOUND")
    }
    const listed = await app.request("GET", "/v1/vault/credentials?service=slack", { apiKey: other.apiKey })
    expect(listed.body.credentials).toEqual([])
    const deleted = await app.request("DELETE", `/v1/vault/credentials/${mine.body.id}`, { apiKey: dev.apiKey })
    expect(deleted.status).toBe(204)
    expect((await app.request("GET", `/v1/vault/credentials/${mine.body.id}`, { apiKey: dev.apiKey })).status).toBe(404)
    expect((await app.request("DELETE", `/v1/vault/credentials/${mine.body.id}`, { apiKey: dev.apiKey })).status).toBe(404)
    expect(await app.query("SELECT 1 FROM vault_credentials WHERE id = $1", [mine.body.id])).toHaveLength(0)
  })
})

describe("exchange", () => {
  beforeAll(async () => {
    await store({
      principalId: "user_1",
      service: "github",
      accessToken: "gho_exchange_TOKEN",
      tokenExpiresAt: "2031-05-01T12:00:00.000Z",
      metadata: { login: "octo" }
    })
    await store({ principalId: "user_1", service: "gitlab", accessToken: "glpat_TOKEN" })
  })

  test("a scoped grant token receives the VaultCredential; event and audit entry carry no token", async () => {
    const { grant, token } = await grantFor(["github:read"])
    const res = await exchange(token.grantToken)
    expect(res.status).toBe(200)
    expect(res.body).toEqual({
      accessToken: "gho_exchange_TOKEN",
      service: "github",
      credentialType: "oauth2",
      tokenExpiresAt: "2031-05-01T12:00:00.000Z",
      metadata: { login: "octo" }
    })
    const events = await app.query("SELECT type, data FROM events WHERE developer_id = $1 AND type = 'vault.credential.exchanged'", [dev.developerId])
    const mine = events.find((e) => e.data.grantId === grant.id)
    expect(mine.data).toMatchObject({ service: "github", principalId: "user_1", grantId: grant.id, agentId, tokenId: token.jti, refreshed: false })
    expect(mine.data.credentialId).toMatch(/^vcred_/)
    const audit = await app.query("SELECT action, grant_id, principal_id, agent_id, metadata FROM audit_log WHERE grant_id = $1", [grant.id])
    expect(audit).toHaveLength(1)
    expect(audit[0]).toMatchObject({ action: "service.vault.credential_exchanged", principalId: "user_1", agentId })
    expect(JSON.stringify([events, audit])).not.toContain("gho_exchange_TOKEN")
    expect(JSON.stringify([events, audit])).not.toContain(token.grantToken)
    const chain = await app.run(Effect.flatMap(AuditChain, (a) => a.verify(dev.developerId)))
    expect(chain.valid).toBe(true)
  })

  test("401: no token, malformed token, foreign signature, wrong issuer, expired token", async () => {
    const { token } = await grantFor(["github:read"])
    const [, payload] = token.grantToken.split(".")
    const tampered = token.grantToken.replace(payload!, Buffer.from(JSON.stringify({
      ...JSON.parse(Buffer.from(payload!, "base64url").toString()),
      scp: ["*"]
    })).toString("base64url"))
    const { makeKeys, generateRsaPrivateKeyPem } = await import("../../src/platform/Keys.ts")
    const foreign = await makeKeys({ privateKeyPem: generateRsaPrivateKeyPem(), previousPublicKeys: [], issuer: app.config.jwtIssuer })
    const claims = JSON.parse(Buffer.from(payload!, "base64url").toString())
    const foreignToken = await Effect.runPromise(foreign.sign(claims))
    const wrongIssuer = await makeKeys({ privateKeyPem: (await import("../support/app.ts")).testPrivateKey(), previousPublicKeys: [], issuer: "https://evil.test" })
    const wrongIssuerToken = await Effect.runPromise(wrongIssuer.sign(claims))
    const now = Math.floor(Date.now() / 1000)
    const expiredToken = await app.run(Effect.flatMap(Keys, (k) => k.sign({ ...claims, iat: now - 7200, exp: now - 3600 })))
    for (const [label, bearer] of [
      ["none", undefined],
      ["garbage", "not.a.jwt"],
      ["tampered", tampered],
      ["foreign", foreignToken],
      ["issuer", wrongIssuerToken],
      ["expired", expiredToken],
      ["api key", dev.apiKey]
    ] as const) {
      const res = await exchange(bearer)
      expect({ label, status: res.status, code: res.body.code }).toEqual({ label, status: 401, code: "UNAUTHORIZED" })
    }
  })

  test("401 when the grant is revoked, or the single token is revoked, even with a bad body", async () => {
    const revokedGrant = await grantFor(["github:read"])
    expect((await exchange(revokedGrant.token.grantToken)).status).toBe(200)
    await app.run(Effect.flatMap(Grants, (g) => g.revoke(dev.developerId, revokedGrant.grant.id)))
    for (const body of [{ service: "github" }, {}, "{broken"]) {
      const res = await exchange(revokedGrant.token.grantToken, body)
      expect(res.status).toBe(401)
      expect(res.body.code).toBe("UNAUTHORIZED")
    }

    const revokedToken = await grantFor(["github:read"])
    expect((await exchange(revokedToken.token.grantToken)).status).toBe(200)
    expect(await app.run(Effect.flatMap(Grants, (g) => g.revokeToken(dev.developerId, revokedToken.token.jti)))).toBe(true)
    const res = await exchange(revokedToken.token.grantToken, {})
    expect(res.status).toBe(401)
    expect(res.body.code).toBe("UNAUTHORIZED")
    // a second token of the same grant still works
    const again = await app.run(Effect.flatMap(Grants, (g) => Effect.flatMap(g.find(dev.developerId, revokedToken.grant.id), (gr) => g.issueToken(gr!))))
    expect((await exchange(again.grantToken)).status).toBe(200)
  })

  test("400 BAD_REQUEST when service is missing, empty or not a string (after auth, before scope)", async () => {
    const { token } = await grantFor(["calendar:read"]) // no vault scope at all: 400 still comes first
    for (const body of [{}, { service: "" }, { service: "   " }, { service: 42 }, { service: null }, [], "{broken", ""]) {
      const res = await exchange(token.grantToken, body)
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status: 400, code: "BAD_REQUEST" })
    }
  })

  test("each accepted scope form is accepted", async () => {
    for (const scope of ["*", "github:*", "github:read", "github:credentials:read", "vault:github:*", "vault:github:read", "vault:credentials:exchange"]) {
      const { token } = await grantFor(["calendar:read", scope])
      const res = await exchange(token.grantToken)
      expect({ scope, status: res.status, accessToken: res.body.accessToken }).toEqual({ scope, status: 200, accessToken: "gho_exchange_TOKEN" })
    }
  })

  test("near misses → 403 FORBIDDEN", async () => {
    for (const scope of ["github:write", "vault:gitlab:read", "gitlab:*", "github", "github:read:extra", "vault:*", "vault:github", "GitHub:read", "github:credentials:write", "vault:credentials:*", "**", "github*"]) {
      const { token } = await grantFor([scope])
      const res = await exchange(token.grantToken)
      expect({ scope, status: res.status, code: res.body.code }).toEqual({ scope, status: 403, code: "FORBIDDEN" })
    }
    const gitlab = await grantFor(["vault:gitlab:read"])
    expect((await exchange(gitlab.token.grantToken, { service: "gitlab" })).body.accessToken).toBe("glpat_TOKEN")
  })

  test("404 NOT_FOUND: no credential for this principal and service, or another developer's", async () => {
    const { token } = await grantFor(["*"], "user_without_credentials")
    const res = await exchange(token.grantToken)
    expect(res.status).toBe(404)
    expect(res.body.code).toBe("NOT_FOUND")
    const scoped = await grantFor(["vault:slack:read"])
    expect((await exchange(scoped.token.grantToken, { service: "slack" })).status).toBe(404)
    // another developer's token for the same principal and service finds nothing of ours
    const other = await app.signup()
    const otherAgent = await createAgent(app, other.developerId, ["github:read"])
    const foreign = await issueGrant(app, { developerId: other.developerId, agentId: otherAgent, principalId: "user_1", scopes: ["github:read"] })
    const res2 = await exchange(foreign.token.grantToken)
    expect(res2.status).toBe(404)
    expect(res2.body.code).toBe("NOT_FOUND")
  })

  test("odd service values answer 404 and do not disturb concurrent exchanges", async () => {
    const { token } = await grantFor(["*"])
    const odd = ["git\u0000hub", "x".repeat(5000), "github ", "../github", "GitHub"]
    const results = await Promise.all([
      ...odd.map((service) => exchange(token.grantToken, { service })),
      ...Array.from({ length: 5 }, () => exchange(token.grantToken))
    ])
    expect(results.slice(0, 5).map((r) => [r.status, r.body.code])).toEqual(Array(5).fill([404, "NOT_FOUND"]))
    expect(results.slice(5).map((r) => r.status)).toEqual(Array(5).fill(200))
  })

  test("a ciphertext moved to another row fails to decrypt: a clean error, no internals", async () => {
    await store({ principalId: "user_aad", service: "github", accessToken: "gho_victim_TOKEN" })
    await store({ principalId: "user_aad", service: "gitlab", accessToken: "glpat_attacker_TOKEN" })
    // move the github ciphertext onto the gitlab row
    await app.query(`UPDATE vault_credentials t SET key_id = s.key_id, iv = s.iv, ciphertext = s.ciphertext
                     FROM vault_credentials s
                     WHERE t.developer_id = $1 AND t.principal_id = 'user_aad' AND t.service = 'gitlab'
                       AND s.developer_id = $1 AND s.principal_id = 'user_aad' AND s.service = 'github'`, [dev.developerId])
    const { token } = await grantFor(["gitlab:read", "github:read"], "user_aad")
    const res = await exchange(token.grantToken, { service: "gitlab" })
    expect(res.status).toBe(500)
    expect(res.body).toEqual({ code: "CREDENTIAL_UNREADABLE", message: "The stored credential cannot be decrypted; store it again", requestId: res.body.requestId })
    expect(res.text).not.toContain("TOKEN")
    // a flipped byte in place fails the same way; the untouched row still works
    await app.query(`UPDATE vault_credentials SET iv = $2 WHERE developer_id = $1 AND principal_id = 'user_aad' AND service = 'github'`,
      [dev.developerId, Buffer.alloc(12).toString("base64")])
    expect((await exchange(token.grantToken, { service: "github" })).body.code).toBe("CREDENTIAL_UNREADABLE")
    expect((await exchange((await grantFor(["github:read"])).token.grantToken)).status).toBe(200)
    // and no event for a failed exchange
    const events = await app.query("SELECT data FROM events WHERE type = 'vault.credential.exchanged' AND data->>'principalId' = 'user_aad'")
    expect(events).toHaveLength(0)
  })

  test("concurrent exchanges: each one's event, webhook delivery and chained audit entry are committed", async () => {
    const other = await app.signup()
    const otherAgent = await createAgent(app, other.developerId, ["github:read"])
    await app.request("POST", "/v1/vault/credentials", { apiKey: other.apiKey, body: { principalId: "user_1", service: "github", accessToken: "other_TOKEN" } })
    const endpointId = `wh_vault_${Date.now()}`
    await app.query(
      `INSERT INTO webhook_endpoints (id, developer_id, url, events, secret_ciphertext, created_at)
       VALUES ($1, $2, 'http://127.0.0.1:9/hook', $3, 'x', now())`,
      [endpointId, dev.developerId, ["vault.credential.exchanged"]]
    )
    const mine = await Promise.all(Array.from({ length: 6 }, () => grantFor(["github:read"])))
    const theirs = await Promise.all(Array.from({ length: 6 }, () =>
      issueGrant(app, { developerId: other.developerId, agentId: otherAgent, principalId: "user_1", scopes: ["github:read"] })))
    const results = await Promise.all([...mine, ...theirs].flatMap((g) => [exchange(g.token.grantToken), exchange(g.token.grantToken)]))
    expect(results.map((r) => r.status)).toEqual(Array(24).fill(200))
    expect(results.slice(0, 12).every((r) => r.body.accessToken === "gho_exchange_TOKEN")).toBe(true)
    expect(results.slice(12).every((r) => r.body.accessToken === "other_TOKEN")).toBe(true)
    for (const [developer, grants] of [[dev.developerId, mine], [other.developerId, theirs]] as const) {
      const ids = grants.map((g) => g.grant.id)
      const events = await app.query(
        "SELECT id FROM events WHERE developer_id = $1 AND type = 'vault.credential.exchanged' AND data->>'grantId' = ANY($2)", [developer, ids])
      expect(events).toHaveLength(12)
      const entries = await app.query("SELECT id FROM audit_log WHERE developer_id = $1 AND grant_id = ANY($2)", [developer, ids])
      expect(entries).toHaveLength(12)
      const chain = await app.run(Effect.flatMap(AuditChain, (a) => a.verify(developer)))
      expect(chain.valid).toBe(true)
      const deliveries = await app.query(
        "SELECT d.endpoint_id, d.status FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE e.data->>'grantId' = ANY($1)", [ids])
      if (developer === dev.developerId) {
        expect(deliveries).toHaveLength(12)
        expect(deliveries.every((d) => d.endpointId === endpointId && d.status === "pending")).toBe(true)
      } else {
        expect(deliveries).toHaveLength(0)
      }
    }
    await app.query("UPDATE webhook_endpoints SET deleted_at = now() WHERE id = $1", [endpointId])
  })

  test("20 exchanges per minute per grant token, then 429; another token is counted apart", async () => {
    const { grant, token } = await grantFor(["github:read"])
    const statuses: Array<number> = []
    for (let i = 0; i < 21; i++) statuses.push((await exchange(token.grantToken)).status)
    expect(statuses.slice(0, 20).every((s) => s === 200)).toBe(true)
    expect(statuses[20]).toBe(429)
    const limited = await exchange(token.grantToken)
    expect(limited.status).toBe(429)
    expect(limited.headers.get("retry-after")).not.toBeNull()
    expect(limited.headers.get("x-ratelimit-limit")).toBe("20")
    const second = await app.run(Effect.flatMap(Grants, (g) => g.issueToken(grant)))
    expect((await exchange(second.grantToken)).status).toBe(200)
  })
})
