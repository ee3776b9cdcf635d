/** Consent bundles: every operation, field, state move and error row of the interface. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { createLocalJWKSet, jwtVerify } from "jose"
import { publicKeyMatches } from "../../src/offline/index.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
let agentId: string

beforeAll(async () => {
  app = await startTestApp({ testClock: true, env: { RATE_LIMIT_SCALE: "100" } })
  dev = await app.signup({ plan: "enterprise" })
  agentId = await createAgent(app, dev.developerId, ["email:read", "calendar:read"])
})
afterAll(() => app.stop())

const create = (body: Record<string, unknown> = {}, apiKey = dev.apiKey) =>
  app.request("POST", "/v1/consent-bundles", { apiKey, body: { agentId, userId: "user_7", scopes: ["email:read"], ...body } })

describe("create", () => {
  test("201 with every field of the create shape", async () => {
    const res = await create({ offlineTTL: "48h" })
    expect(res.status).toBe(201)
    const b = res.body
    expect(b.bundleId).toMatch(/^bundle_[0-9A-Z]{26}$/)
    expect(b.syncEndpoint).toBe(`${app.config.publicBaseUrl}/v1/audit/offline-sync`)
    expect(b.offlineAuditKey.algorithm).toBe("Ed25519")
    expect(b.offlineAuditKey.publicKey).toStartWith("-----BEGIN PUBLIC KEY-----")
    expect(b.offlineAuditKey.privateKey).toStartWith("-----BEGIN PRIVATE KEY-----")
    expect(publicKeyMatches(b)).toBe(true)
    expect(b.checkpointAt).toBe(Date.parse("2026-11-22T10:00:00.000Z"))
    expect(b.offlineExpiresAt).toBe("2026-11-24T10:00:00.000Z")
    expect(b.jwksSnapshot).toMatchObject({ fetchedAt: "2026-11-22T10:00:00.000Z", validUntil: b.offlineExpiresAt })
    expect(b.jwksSnapshot.keys[0]).toMatchObject({ kty: "RSA", alg: "RS256", use: "sig" })
    const { payload } = await jwtVerify(b.grantToken, createLocalJWKSet(b.jwksSnapshot), { currentDate: new Date("2026-11-22T10:00:00Z") })
    expect(payload).toMatchObject({ sub: "user_7", dev: dev.developerId, scp: ["email:read"] })
    expect(payload.exp! * 1000).toBe(Date.parse(b.offlineExpiresAt))
    // the private key is never stored
    const stored = JSON.stringify(await app.query("SELECT * FROM consent_bundles WHERE id = $1", [b.bundleId]))
    expect(stored).not.toContain("PRIVATE KEY")
    const events = await app.query<{ type: string }>("SELECT type FROM events WHERE developer_id = $1 ORDER BY created_at, id", [dev.developerId])
    expect(events.map((e) => e.type)).toContain("consent_bundle.created")
  })

  test("error rows: 400 INVALID_REQUEST, 401, 404 AGENT_NOT_FOUND, 422 INVALID_SCOPES, 422 INVALID_TTL", async () => {
    for (const body of [{ agentId: undefined }, { userId: 5 }, { scopes: "email:read" }, { offlineTTL: "72" }, { offlineTTL: "0h" }, { offlineTTL: "3w" }, { offlineAuditKeyAlgorithm: "RSA" }]) {
      const res = await create(body)
      expect(res.status).toBe(400)
      expect(res.body.code).toBe("INVALID_REQUEST")
    }
    expect((await app.request("POST", "/v1/consent-bundles", { body: { agentId, userId: "u", scopes: ["email:read"] } })).body.code).toBe("UNAUTHORIZED")
    expect((await create({ agentId: "ag_missing" })).body.code).toBe("AGENT_NOT_FOUND")
    const other = await app.signup()
    expect((await create({}, other.apiKey)).body.code).toBe("AGENT_NOT_FOUND")
    const scopes = await create({ scopes: ["email:read", "drive:write"] })
    expect(scopes.status).toBe(422)
    expect(scopes.body.code).toBe("INVALID_SCOPES")
    const ttl = await create({ offlineTTL: "169h" })
    expect(ttl.status).toBe(422)
    expect(ttl.body.code).toBe("INVALID_TTL")
    expect((await create({ offlineTTL: "168h" })).status).toBe(201)
    expect((await create({ offlineTTL: "7d" })).status).toBe(201)
    expect((await create({ offlineTTL: "8d" })).body.code).toBe("INVALID_TTL")
    // well formed, however large: still 422, not 400
    for (const offlineTTL of ["99999999h", "123456789012345678901234567890d"]) {
      const big = await create({ offlineTTL })
      expect(big.status).toBe(422)
      expect(big.body.code).toBe("INVALID_TTL")
    }
  })
})

describe("state moves", () => {
  test("revoke → 200 with revokedAt; again 409 ALREADY_REVOKED; refresh 409 BUNDLE_REVOKED; status revoked; the grant is revoked online", async () => {
    const b = (await create()).body
    const revoked = await app.request("POST", `/v1/consent-bundles/${b.bundleId}/revoke`, { apiKey: dev.apiKey })
    expect(revoked.status).toBe(200)
    expect(revoked.body).toEqual({ bundleId: b.bundleId, status: "revoked", revokedAt: "2026-11-22T10:00:00.000Z" })
    const again = await app.request("POST", `/v1/consent-bundles/${b.bundleId}/revoke`, { apiKey: dev.apiKey })
    expect(again.status).toBe(409)
    expect(again.body.code).toBe("ALREADY_REVOKED")
    const refresh = await app.request("POST", `/v1/consent-bundles/${b.bundleId}/refresh`, { apiKey: dev.apiKey })
    expect(refresh.status).toBe(409)
    expect(refresh.body.code).toBe("BUNDLE_REVOKED")
    expect((await app.request("GET", `/v1/consent-bundles/${b.bundleId}/revocation-status`, { apiKey: dev.apiKey })).body)
      .toEqual({ bundleId: b.bundleId, status: "revoked", revokedAt: "2026-11-22T10:00:00.000Z" })
    expect((await app.request("POST", "/v1/tokens/verify", { apiKey: dev.apiKey, body: { token: b.grantToken } })).body).toEqual({ valid: false })
    const types = (await app.query<{ type: string }>("SELECT type FROM events WHERE developer_id = $1", [dev.developerId])).map((e) => e.type)
    expect(types).toContain("consent_bundle.revoked")
    expect(types).toContain("grant.revoked")
  })

  test("the bundle's grant token opens the vault until the bundle is revoked, then 401", async () => {
    const b = (await create({ userId: "user_vault" })).body
    const stored = await app.request("POST", "/v1/vault/credentials", {
      apiKey: dev.apiKey,
      body: { principalId: "user_vault", service: "email", accessToken: "upstream-token-1" }
    })
    expect(stored.status).toBe(201)
    const exchange = () =>
      app.request("POST", "/v1/vault/credentials/exchange", { headers: { authorization: `Bearer ${b.grantToken}` }, body: { service: "email" } })
    const before = await exchange()
    expect(before.status).toBe(200)
    expect(before.body.accessToken).toBe("upstream-token-1")
    expect((await app.request("POST", `/v1/consent-bundles/${b.bundleId}/revoke`, { apiKey: dev.apiKey })).status).toBe(200)
    const after = await exchange()
    expect(after.status).toBe(401)
    expect(after.body.code).toBe("UNAUTHORIZED")
  })

  test("a bundle whose grant is revoked elsewhere (DELETE /v1/grants/:id) is revoked everywhere", async () => {
    const b = (await create()).body
    const grantId = JSON.parse(Buffer.from(b.grantToken.split(".")[1], "base64url").toString()).grnt
    await app.adjust("1 second")
    expect((await app.request("DELETE", `/v1/grants/${grantId}`, { apiKey: dev.apiKey })).status).toBe(204)
    const revokedAt = "2026-11-22T10:00:01.000Z"
    const got = await app.request("GET", `/v1/consent-bundles/${b.bundleId}`, { apiKey: dev.apiKey })
    expect(got.body.status).toBe("revoked")
    const listed = await app.request("GET", "/v1/consent-bundles?status=revoked", { apiKey: dev.apiKey })
    expect(listed.body.bundles.map((x: any) => x.id)).toContain(b.bundleId)
    const active = await app.request("GET", "/v1/consent-bundles?status=active&limit=100", { apiKey: dev.apiKey })
    expect(active.body.bundles.map((x: any) => x.id)).not.toContain(b.bundleId)
    expect((await app.request("GET", `/v1/consent-bundles/${b.bundleId}/revocation-status`, { apiKey: dev.apiKey })).body)
      .toEqual({ bundleId: b.bundleId, status: "revoked", revokedAt })
    const again = await app.request("POST", `/v1/consent-bundles/${b.bundleId}/revoke`, { apiKey: dev.apiKey })
    expect(again.status).toBe(409)
    expect(again.body.code).toBe("ALREADY_REVOKED")
    expect((await app.request("POST", `/v1/consent-bundles/${b.bundleId}/refresh`, { apiKey: dev.apiKey })).body.code).toBe("BUNDLE_REVOKED")
    const events = await app.query<{ data: any }>(
      "SELECT data FROM events WHERE developer_id = $1 AND type = 'consent_bundle.revoked'",
      [dev.developerId]
    )
    expect(events.map((e) => (typeof e.data === "string" ? JSON.parse(e.data) : e.data)))
      .toContainEqual({ bundleId: b.bundleId, grantId, revokedAt })
  })

  test("expired is derived; refresh of an expired bundle answers 409 BUNDLE_EXPIRED; revoke still works", async () => {
    const b = (await create({ offlineTTL: "30m" })).body
    const active = await app.request("GET", `/v1/consent-bundles/${b.bundleId}`, { apiKey: dev.apiKey })
    expect(active.body.status).toBe("active")
    await app.adjust("31 minutes")
    const expired = await app.request("GET", `/v1/consent-bundles/${b.bundleId}`, { apiKey: dev.apiKey })
    expect(expired.body.status).toBe("expired")
    const listed = await app.request("GET", "/v1/consent-bundles?status=expired", { apiKey: dev.apiKey })
    expect(listed.body.bundles.map((x: any) => x.id)).toContain(b.bundleId)
    expect((await app.request("GET", `/v1/consent-bundles/${b.bundleId}/revocation-status`, { apiKey: dev.apiKey })).body.status).toBe("active")
    const refresh = await app.request("POST", `/v1/consent-bundles/${b.bundleId}/refresh`, { apiKey: dev.apiKey })
    expect(refresh.status).toBe(409)
    expect(refresh.body.code).toBe("BUNDLE_EXPIRED")
    expect((await app.request("POST", `/v1/consent-bundles/${b.bundleId}/revoke`, { apiKey: dev.apiKey })).status).toBe(200)
  })

  test("refresh extends expiry, rotates the key, issues a new token; checkpointAt moves", async () => {
    const b = (await create({ offlineTTL: "1h" })).body
    await app.adjust("10 minutes")
    const r = await app.request("POST", `/v1/consent-bundles/${b.bundleId}/refresh`, { apiKey: dev.apiKey })
    expect(r.status).toBe(200)
    expect(r.body.bundleId).toBe(b.bundleId)
    expect(r.body.grantToken).not.toBe(b.grantToken)
    expect(r.body.offlineAuditKey.publicKey).not.toBe(b.offlineAuditKey.publicKey)
    expect(Date.parse(r.body.offlineExpiresAt)).toBe(Date.parse(b.offlineExpiresAt) + 10 * 60_000)
    expect(r.body.checkpointAt).toBe(b.checkpointAt + 10 * 60_000)
    expect(r.body.jwksSnapshot.validUntil).toBe(r.body.offlineExpiresAt)
  })
})

describe("list, get, isolation", () => {
  test("summary shape without secrets; filters; cursor; limit bounds; 404 BUNDLE_NOT_FOUND across tenants", async () => {
    const d = await app.signup({ plan: "enterprise" })
    const a = await createAgent(app, d.developerId, ["x:read"])
    const ids: Array<string> = []
    for (let i = 0; i < 5; i++) {
      ids.push((await app.request("POST", "/v1/consent-bundles", { apiKey: d.apiKey, body: { agentId: a, userId: `u${i}`, scopes: ["x:read"] } })).body.bundleId)
      await app.adjust("1 second")
    }
    const page1 = await app.request("GET", "/v1/consent-bundles?limit=2", { apiKey: d.apiKey })
    expect(page1.body.bundles).toHaveLength(2)
    const item = page1.body.bundles[0]
    expect(Object.keys(item).sort()).toEqual(["agentId", "auditEntryCount", "createdAt", "id", "lastSyncAt", "offlineExpiresAt", "scopes", "status", "userId"])
    expect(item).toMatchObject({ id: ids[4], lastSyncAt: null, auditEntryCount: 0, status: "active" })
    const seen = [...page1.body.bundles.map((x: any) => x.id)]
    let cursor = page1.body.nextCursor
    while (cursor) {
      const next = await app.request("GET", `/v1/consent-bundles?limit=2&cursor=${cursor}`, { apiKey: d.apiKey })
      seen.push(...next.body.bundles.map((x: any) => x.id))
      cursor = next.body.nextCursor
    }
    expect(seen).toEqual([...ids].reverse())
    expect((await app.request("GET", `/v1/consent-bundles?agentId=${a}&status=active`, { apiKey: d.apiKey })).body.bundles).toHaveLength(5)
    for (const q of ["limit=101", "limit=0", "limit=x", "status=gone", "cursor=@@"]) {
      const res = await app.request("GET", `/v1/consent-bundles?${q}`, { apiKey: d.apiKey })
      expect(res.status).toBe(400)
      expect(res.body.code).toBe("INVALID_REQUEST")
    }
    for (const [method, path] of [["GET", ""], ["POST", "/revoke"], ["GET", "/revocation-status"], ["POST", "/refresh"]]) {
      const res = await app.request(method!, `/v1/consent-bundles/${ids[0]}${path}`, { apiKey: dev.apiKey })
      expect(res.status).toBe(404)
      expect(res.body.code).toBe("BUNDLE_NOT_FOUND")
    }
    expect((await app.request("GET", "/v1/consent-bundles", { apiKey: dev.apiKey })).body.bundles.map((x: any) => x.id)).not.toContain(ids[0])
  })
})

test("route limits: POST /v1/consent-bundles allows 10 per minute per address", async () => {
  const limited = await startTestApp({ testClock: true })
  try {
    const d = await limited.signup({ plan: "enterprise" })
    const a = await createAgent(limited, d.developerId, ["x:read"])
    const statuses = []
    for (let i = 0; i < 11; i++) {
      statuses.push((await limited.request("POST", "/v1/consent-bundles", { apiKey: d.apiKey, body: { agentId: a, userId: "u", scopes: ["x:read"] } })).status)
    }
    expect(statuses.slice(0, 10).every((s) => s === 201)).toBe(true)
    expect(statuses[10]).toBe(429)
  } finally {
    await limited.stop()
  }
})
