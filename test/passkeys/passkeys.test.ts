import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Clock, Effect } from "effect"
import { generateKeyPairSync } from "node:crypto"
import { newId } from "../../src/platform/Ids.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { SoftAuthenticator } from "./softAuthenticator.ts"

const ORIGIN = "https://id.example.test"
const RP_ID = "example.test"
const START = Date.parse("2026-11-22T10:00:00.000Z")

let app: TestApp
let dev: { apiKey: string; developerId: string }
let other: { apiKey: string; developerId: string }
let agentId: string

beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: START, env: { WEBAUTHN_ORIGIN: ORIGIN, WEBAUTHN_RP_ID: RP_ID, WEBAUTHN_RP_NAME: "Acme Auth" } })
  dev = await app.signup({ plan: "enterprise" })
  other = await app.signup({ plan: "enterprise" })
  agentId = await createAgent(app, dev.developerId, ["email:read"])
}, 120_000)
afterAll(async () => {
  await app.stop()
}, 120_000)

const post = (path: string, body: unknown, apiKey = dev.apiKey) => app.request("POST", path, { apiKey, body })

/** a pending authorization request, as POST /v1/authorize leaves it */
const pendingRequest = async (principalId: string, developerId = dev.developerId, agent = agentId) => {
  const now = await app.run(Effect.map(Clock.currentTimeMillis, (ms) => ms))
  const id = newId("areq", now)
  await app.query(
    `INSERT INTO auth_requests (id, developer_id, agent_id, principal_id, scopes, grant_ttl_seconds, status, expires_at, created_at)
     VALUES ($1, $2, $3, $4, $5, 86400, 'pending', $6, $7)`,
    [id, developerId, agent, principalId, ["email:read"], new Date(now + 10 * 60_000), new Date(now)]
  )
  return id
}

/** registers a passkey for the principal; returns the authenticator */
const enrol = async (principalId: string, apiKey = dev.apiKey) => {
  const authenticator = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  const options = await post("/v1/webauthn/register/options", { principalId }, apiKey)
  expect(options.status).toBe(200)
  const res = await post("/v1/webauthn/register/verify", {
    challengeId: options.body.challengeId,
    response: authenticator.register(options.body.publicKey),
    deviceName: "Test key"
  }, apiKey)
  expect(res.status).toBe(201)
  return { authenticator, credential: res.body }
}

const assertOptions = (authRequestId: string, apiKey = dev.apiKey) => post("/v1/webauthn/assert/options", { authRequestId }, apiKey)

describe("registration", () => {
  test("options: challenge, RP, user handle, user verification required, attestation none", async () => {
    const res = await post("/v1/webauthn/register/options", { principalId: "alice" })
    expect(res.status).toBe(200)
    expect(res.body.challengeId).toMatch(/^wac_[0-9A-Z]{26}$/)
    const pk = res.body.publicKey
    expect(pk.rp).toEqual({ name: "Acme Auth", id: RP_ID })
    expect(pk.user.name).toBe("alice")
    expect(pk.user.id).not.toContain("alice")
    expect(pk.challenge).toMatch(/^[A-Za-z0-9_-]{32,}$/)
    expect(pk.authenticatorSelection.userVerification).toBe("required")
    expect(pk.attestation).toBe("none")
    expect(pk.pubKeyCredParams.map((p: any) => p.alg)).toContain(-7)
    const rows = await app.query(`SELECT kind, principal_id, expires_at FROM webauthn_challenges WHERE id = $1`, [res.body.challengeId])
    expect(rows[0]).toMatchObject({ kind: "registration", principalId: "alice" })
    expect(new Date(rows[0].expiresAt).getTime()).toBe(START + 5 * 60_000)
  })

  test("verify: 201 credential; listed for the principal only; excluded from the next options", async () => {
    const { authenticator, credential } = await enrol("bob")
    expect(credential).toEqual({
      id: expect.stringMatching(/^pkc_/),
      credentialId: authenticator.id,
      principalId: "bob",
      deviceName: "Test key",
      providerName: null,
      aaguid: "00000000-0000-0000-0000-000000000000",
      authenticatorType: "platform",
      deviceType: "singleDevice",
      backupEligible: false,
      backedUp: false,
      transports: ["internal"],
      useCount: 0,
      createdAt: new Date(START).toISOString(),
      lastUsedAt: null
    })
    const list = await app.request("GET", "/v1/webauthn/credentials?principalId=bob", { apiKey: dev.apiKey })
    expect(list.status).toBe(200)
    expect(list.body).toEqual({ credentials: [credential], nextCursor: null })
    expect((await app.request("GET", "/v1/webauthn/credentials?principalId=alice", { apiKey: dev.apiKey })).body.credentials).toEqual([])
    expect((await app.request("GET", "/v1/webauthn/credentials?principalId=bob", { apiKey: other.apiKey })).body.credentials).toEqual([])
    const next = await post("/v1/webauthn/register/options", { principalId: "bob" })
    expect(next.body.publicKey.excludeCredentials).toEqual([{ id: authenticator.id, type: "public-key", transports: ["internal"] }])
  })

  test("409 CONFLICT when the credential is registered again", async () => {
    const { authenticator } = await enrol("carol")
    const options = await post("/v1/webauthn/register/options", { principalId: "carol" })
    const res = await post("/v1/webauthn/register/verify", { challengeId: options.body.challengeId, response: authenticator.register(options.body.publicKey) })
    expect(res.status).toBe(409)
    expect(res.body.code).toBe("CONFLICT")
  })

  test.each([
    ["wrong origin", { origin: "https://evil.example" }],
    ["wrong RP ID", { rpId: "evil.example" }],
    ["user not verified", { uv: false }],
    ["wrong ceremony type", { type: "webauthn.get" }]
  ])("400 VERIFICATION_FAILED: %s; nothing stored", async (_, overrides) => {
    const authenticator = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    const options = await post("/v1/webauthn/register/options", { principalId: "mallory" })
    const res = await post("/v1/webauthn/register/verify", { challengeId: options.body.challengeId, response: authenticator.register(options.body.publicKey, overrides) })
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("VERIFICATION_FAILED")
    expect(await app.query(`SELECT 1 FROM webauthn_credentials WHERE credential_id = $1`, [authenticator.id])).toHaveLength(0)
  })

  test("400 INVALID_CHALLENGE: replayed, expired, unknown, another developer's, of the assertion ceremony", async () => {
    const authenticator = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    const options = await post("/v1/webauthn/register/options", { principalId: "dave" })
    const response = authenticator.register(options.body.publicKey)
    // a failed attempt uses the challenge up too
    const wrong = await post("/v1/webauthn/register/verify", { challengeId: options.body.challengeId, response: authenticator.register(options.body.publicKey, { origin: "https://evil.example" }) })
    expect(wrong.body.code).toBe("VERIFICATION_FAILED")
    const replay = await post("/v1/webauthn/register/verify", { challengeId: options.body.challengeId, response })
    expect(replay.status).toBe(400)
    expect(replay.body.code).toBe("INVALID_CHALLENGE")

    const fresh = await post("/v1/webauthn/register/options", { principalId: "dave" })
    await app.adjust("5 minutes")
    const expired = await post("/v1/webauthn/register/verify", { challengeId: fresh.body.challengeId, response: authenticator.register(fresh.body.publicKey) })
    expect(expired.status).toBe(400)
    expect(expired.body.code).toBe("INVALID_CHALLENGE")

    const unknown = await post("/v1/webauthn/register/verify", { challengeId: "wac_01ARZ3NDEKTSV4RRFFQ69G5FAV", response })
    expect(unknown.body.code).toBe("INVALID_CHALLENGE")

    const theirs = await post("/v1/webauthn/register/options", { principalId: "dave" }, other.apiKey)
    const crossTenant = await post("/v1/webauthn/register/verify", { challengeId: theirs.body.challengeId, response: authenticator.register(theirs.body.publicKey) })
    expect(crossTenant.status).toBe(400)
    expect(crossTenant.body.code).toBe("INVALID_CHALLENGE")

    await enrol("erin")
    const { authenticator: erinKey } = await enrol("erin2")
    void erinKey
    const areq = await pendingRequest("erin")
    const assertion = await assertOptions(areq)
    const crossCeremony = await post("/v1/webauthn/register/verify", { challengeId: assertion.body.challengeId, response: authenticator.register(assertion.body.publicKey) })
    expect(crossCeremony.body.code).toBe("INVALID_CHALLENGE")
  })

  test("400 BAD_REQUEST for missing fields", async () => {
    const a = await post("/v1/webauthn/register/options", {})
    expect(a.status).toBe(400)
    expect(a.body.code).toBe("BAD_REQUEST")
    const b = await post("/v1/webauthn/register/verify", { challengeId: "wac_x" })
    expect(b.status).toBe(400)
    expect(b.body.code).toBe("BAD_REQUEST")
    const c = await post("/v1/webauthn/register/verify", { challengeId: "wac_x", response: { id: "a", rawId: "a", type: "public-key", response: {} } })
    expect(c.status).toBe(400)
    expect(c.body.code).toBe("BAD_REQUEST")
  })
})

describe("credentials list and delete", () => {
  test("400 BAD_REQUEST without principalId", async () => {
    const res = await app.request("GET", "/v1/webauthn/credentials", { apiKey: dev.apiKey })
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("BAD_REQUEST")
  })

  test("204 delete; 404 for another developer's or an unknown id", async () => {
    const { credential } = await enrol("frank")
    const foreign = await app.request("DELETE", `/v1/webauthn/credentials/${credential.id}`, { apiKey: other.apiKey })
    expect(foreign.status).toBe(404)
    expect(foreign.body.code).toBe("NOT_FOUND")
    const res = await app.request("DELETE", `/v1/webauthn/credentials/${credential.id}`, { apiKey: dev.apiKey })
    expect(res.status).toBe(204)
    expect((await app.request("GET", "/v1/webauthn/credentials?principalId=frank", { apiKey: dev.apiKey })).body.credentials).toEqual([])
    const again = await app.request("DELETE", `/v1/webauthn/credentials/${credential.id}`, { apiKey: dev.apiKey })
    expect(again.status).toBe(404)
  })

  test("401 UNAUTHORIZED on every route without a key", async () => {
    for (const [method, path] of [
      ["POST", "/v1/webauthn/register/options"], ["POST", "/v1/webauthn/register/verify"], ["GET", "/v1/webauthn/credentials?principalId=x"],
      ["DELETE", "/v1/webauthn/credentials/pkc_x"], ["POST", "/v1/webauthn/assert/options"], ["POST", "/v1/webauthn/assert/verify"]
    ] as const) {
      const res = await app.request(method, path, { body: method === "POST" ? {} : undefined })
      expect([method, path, res.status, res.body.code]).toEqual([method, path, 401, "UNAUTHORIZED"])
    }
  })
})

describe("assertion options", () => {
  test("bound to the pending request: its principal's credentials, user verification required, 5 minutes", async () => {
    const { authenticator } = await enrol("gina")
    const areq = await pendingRequest("gina")
    const res = await assertOptions(areq)
    expect(res.status).toBe(200)
    expect(res.body.publicKey).toMatchObject({
      rpId: RP_ID,
      userVerification: "required",
      allowCredentials: [{ id: authenticator.id, type: "public-key", transports: ["internal"] }]
    })
    const rows = await app.query(`SELECT kind, principal_id, auth_request_id, expires_at, created_at FROM webauthn_challenges WHERE id = $1`, [res.body.challengeId])
    expect(rows[0]).toMatchObject({ kind: "authentication", principalId: "gina", authRequestId: areq })
    expect(new Date(rows[0].expiresAt).getTime() - new Date(rows[0].createdAt).getTime()).toBe(5 * 60_000)
  })

  test("404 NOT_FOUND: unknown, another developer's, decided or expired request", async () => {
    await enrol("hank")
    expect((await assertOptions("areq_01ARZ3NDEKTSV4RRFFQ69G5FAV")).body.code).toBe("NOT_FOUND")
    const areq = await pendingRequest("hank")
    const foreign = await assertOptions(areq, other.apiKey)
    expect(foreign.status).toBe(404)
    expect(foreign.body.code).toBe("NOT_FOUND")
    const denied = await pendingRequest("hank")
    await app.query(`UPDATE auth_requests SET status = 'denied' WHERE id = $1`, [denied])
    expect((await assertOptions(denied)).status).toBe(404)
    const expiring = await pendingRequest("hank")
    await app.adjust("11 minutes")
    expect((await assertOptions(expiring)).status).toBe(404)
  })

  test("422 NO_CREDENTIALS when the principal has no passkey", async () => {
    const res = await assertOptions(await pendingRequest("nobody"))
    expect(res.status).toBe(422)
    expect(res.body.code).toBe("NO_CREDENTIALS")
  })

  test("400 BAD_REQUEST without authRequestId", async () => {
    const res = await post("/v1/webauthn/assert/options", {})
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("BAD_REQUEST")
  })
})

describe("assertion verification", () => {
  const verify = (challengeId: string, response: unknown, apiKey = dev.apiKey) =>
    post("/v1/webauthn/assert/verify", { challengeId, response }, apiKey)

  test("approves the request: grant created, FidoEvidence answered, authorization code usable once", async () => {
    const { authenticator, credential } = await enrol("ivy")
    const areq = await pendingRequest("ivy")
    const options = await assertOptions(areq)
    const res = await verify(options.body.challengeId, authenticator.assert(options.body.publicKey))
    expect(res.status).toBe(200)
    const now = await app.run(Clock.currentTimeMillis)
    // (a copy: bun's toMatchObject writes its matchers into the object it checks)
    expect(structuredClone(res.body)).toMatchObject({
      verified: true,
      grantId: expect.stringMatching(/^grnt_/),
      fidoEvidence: { credentialId: authenticator.id, authenticatorType: "platform", userVerified: true, assertedAt: new Date(now).toISOString() },
      code: expect.any(String)
    })
    const request = await app.query(`SELECT status, grant_id, fido_verified_at FROM auth_requests WHERE id = $1`, [areq])
    expect(request[0]).toMatchObject({ status: "approved", grantId: res.body.grantId })
    expect(request[0].fidoVerifiedAt).not.toBeNull()
    const grant = await app.query(`SELECT principal_id, agent_id, developer_id FROM grants WHERE id = $1`, [res.body.grantId])
    expect(grant[0]).toEqual({ principalId: "ivy", agentId, developerId: dev.developerId })
    const stored = await app.query(`SELECT counter::int AS counter, last_used_at FROM webauthn_credentials WHERE id = $1`, [credential.id])
    expect(stored[0].counter).toBe(1)
    const token = await post("/v1/token", { code: res.body.code, agentId })
    expect(token.status).toBe(201)
    expect(token.body.grantId).toBe(res.body.grantId)
  })

  test("a replayed challenge is refused: 400 INVALID_CHALLENGE", async () => {
    const { authenticator } = await enrol("jack")
    const areq = await pendingRequest("jack")
    const options = await assertOptions(areq)
    const assertion = authenticator.assert(options.body.publicKey)
    expect((await verify(options.body.challengeId, assertion)).status).toBe(200)
    const replay = await verify(options.body.challengeId, assertion)
    expect(replay.status).toBe(400)
    expect(replay.body.code).toBe("INVALID_CHALLENGE")
  })

  test("concurrent use of one challenge: exactly one attempt proceeds", async () => {
    const { authenticator } = await enrol("jill")
    const areq = await pendingRequest("jill")
    const options = await assertOptions(areq)
    const assertion = authenticator.assert(options.body.publicKey)
    const results = await Promise.all(Array.from({ length: 5 }, () => verify(options.body.challengeId, assertion)))
    expect(results.map((r) => r.status).sort()).toEqual([200, 400, 400, 400, 400])
    expect(results.filter((r) => r.status === 400).every((r) => r.body.code === "INVALID_CHALLENGE")).toBe(true)
    expect(await app.query(`SELECT 1 FROM grants WHERE principal_id = 'jill'`)).toHaveLength(1)
  })

  test("a wrong origin is refused: 400 VERIFICATION_FAILED, and the challenge is spent", async () => {
    const { authenticator } = await enrol("kate")
    const areq = await pendingRequest("kate")
    const options = await assertOptions(areq)
    const res = await verify(options.body.challengeId, authenticator.assert(options.body.publicKey, { origin: "https://phish.example" }))
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("VERIFICATION_FAILED")
    expect(res.body.message).toContain("origin")
    const retry = await verify(options.body.challengeId, authenticator.assert(options.body.publicKey))
    expect(retry.body.code).toBe("INVALID_CHALLENGE")
    expect((await app.query(`SELECT status FROM auth_requests WHERE id = $1`, [areq]))[0].status).toBe("pending")
  })

  test("another principal's credential is refused: 403 CREDENTIAL_NOT_ALLOWED", async () => {
    await enrol("leo")
    const { authenticator: mallory } = await enrol("mallory-principal")
    const areq = await pendingRequest("leo")
    const options = await assertOptions(areq)
    const res = await verify(options.body.challengeId, mallory.assert(options.body.publicKey))
    expect(res.status).toBe(403)
    expect(res.body.code).toBe("CREDENTIAL_NOT_ALLOWED")
    expect((await app.query(`SELECT status FROM auth_requests WHERE id = $1`, [areq]))[0].status).toBe("pending")
  })

  test("another developer's credential (same principal id) is refused", async () => {
    await enrol("mia")
    const { authenticator: foreignKey } = await enrol("mia", other.apiKey)
    const options = await assertOptions(await pendingRequest("mia"))
    const res = await verify(options.body.challengeId, foreignKey.assert(options.body.publicKey))
    expect(res.status).toBe(403)
    expect(res.body.code).toBe("CREDENTIAL_NOT_ALLOWED")
  })

  test("another developer cannot use the challenge: 400 INVALID_CHALLENGE", async () => {
    const { authenticator } = await enrol("nina")
    const options = await assertOptions(await pendingRequest("nina"))
    const res = await verify(options.body.challengeId, authenticator.assert(options.body.publicKey), other.apiKey)
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("INVALID_CHALLENGE")
  })

  test.each([
    ["user not verified", { uv: false }, "user"],
    ["forged signature", { signWith: generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey }, "signature"],
    ["wrong RP ID", { rpId: "evil.example" }, "RP ID"],
    ["wrong ceremony type", { type: "webauthn.create" }, "type"]
  ])("400 VERIFICATION_FAILED: %s", async (_, overrides, word) => {
    const { authenticator } = await enrol(`oscar-${word.replace(/\s/g, "")}`)
    const areq = await pendingRequest(`oscar-${word.replace(/\s/g, "")}`)
    const options = await assertOptions(areq)
    const res = await verify(options.body.challengeId, authenticator.assert(options.body.publicKey, overrides))
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("VERIFICATION_FAILED")
    expect(res.body.message.toLowerCase()).toContain(word.toLowerCase())
  })

  test("an expired challenge (5 minutes) is refused: 400 INVALID_CHALLENGE", async () => {
    const { authenticator } = await enrol("paul")
    const options = await assertOptions(await pendingRequest("paul"))
    await app.adjust("5 minutes")
    const res = await verify(options.body.challengeId, authenticator.assert(options.body.publicKey))
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("INVALID_CHALLENGE")
  })

  test("a request decided meanwhile: 410 REQUEST_NOT_PENDING", async () => {
    const { authenticator } = await enrol("quinn")
    const areq = await pendingRequest("quinn")
    const options = await assertOptions(areq)
    await app.query(`UPDATE auth_requests SET status = 'denied' WHERE id = $1`, [areq])
    const res = await verify(options.body.challengeId, authenticator.assert(options.body.publicKey))
    expect(res.status).toBe(410)
    expect(res.body.code).toBe("REQUEST_NOT_PENDING")
  })

  test("400 BAD_REQUEST when the response lacks fields the interface requires", async () => {
    const res = await post("/v1/webauthn/assert/verify", { challengeId: "wac_x", response: { id: "a", rawId: "a", type: "public-key", response: { clientDataJSON: "x" } } })
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("BAD_REQUEST")
    const noChallenge = await post("/v1/webauthn/assert/verify", { response: {} })
    expect(noChallenge.status).toBe(400)
  })
})
