/**
 * Passkey management (decisions §17) with a software authenticator on TestClock: user handles,
 * discoverable credentials, provider names, backup flags, single get, rename, soft delete, the cap
 * per principal, the Signal API data, counter regression (403, audit entry, AD-011 alert), the attestation policy (with and without
 * local trust anchors) and the cleanup fiber.
 */
import "reflect-metadata"
import * as x509 from "@peculiar/x509"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Clock } from "effect"
import { KeyObject, webcrypto } from "node:crypto"
import { loadConfig } from "../../src/Config.ts"
import { newId } from "../../src/platform/Ids.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { SoftAuthenticator } from "./softAuthenticator.ts"

const ORIGIN = "https://id.example.test"
const RP_ID = "example.test"
const START = Date.parse("2026-11-22T10:00:00.000Z")
const ONE_PASSWORD = "bada5566-a7aa-401f-bd96-45619a55120d"
const ENV = { WEBAUTHN_ORIGIN: ORIGIN, WEBAUTHN_RP_ID: RP_ID }

let app: TestApp
let dev: { apiKey: string; developerId: string }
let other: { apiKey: string; developerId: string }
let agentId: string

beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: START, env: ENV })
  dev = await app.signup({ plan: "enterprise" })
  other = await app.signup({ plan: "enterprise" })
  agentId = await createAgent(app, dev.developerId, ["email:read"])
}, 120_000)
afterAll(async () => {
  await app.stop()
}, 120_000)

const call = (target: TestApp, method: string, path: string, apiKey: string, body?: unknown) =>
  target.request(method, path, { apiKey, ...(body === undefined ? {} : { body }) })

const enrolIn = async (target: TestApp, apiKey: string, principalId: string, authenticator = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID }), overrides = {}) => {
  const options = await call(target, "POST", "/v1/webauthn/register/options", apiKey, { principalId })
  expect(options.status).toBe(200)
  const res = await call(target, "POST", "/v1/webauthn/register/verify", apiKey, {
    challengeId: options.body.challengeId,
    response: authenticator.register(options.body.publicKey, overrides)
  })
  return { authenticator, res, options: options.body }
}
const enrol = async (principalId: string, authenticator?: SoftAuthenticator, overrides = {}) => {
  const out = await enrolIn(app, dev.apiKey, principalId, authenticator, overrides)
  expect(out.res.status).toBe(201)
  return { authenticator: out.authenticator, credential: out.res.body }
}

const pendingRequest = async (principalId: string) => {
  const now = await app.run(Clock.currentTimeMillis)
  const id = newId("areq", now)
  await app.query(
    `INSERT INTO auth_requests (id, developer_id, agent_id, principal_id, scopes, grant_ttl_seconds, status, expires_at, created_at)
     VALUES ($1, $2, $3, $4, $5, 86400, 'pending', $6, $7)`,
    [id, dev.developerId, agentId, principalId, ["email:read"], new Date(now + 10 * 60_000), new Date(now)]
  )
  return id
}

const assertWith = async (authenticator: SoftAuthenticator, principalId: string, overrides = {}) => {
  const areq = await pendingRequest(principalId)
  const options = await call(app, "POST", "/v1/webauthn/assert/options", dev.apiKey, { authRequestId: areq })
  expect(options.status).toBe(200)
  const res = await call(app, "POST", "/v1/webauthn/assert/verify", dev.apiKey, {
    challengeId: options.body.challengeId,
    response: authenticator.assert(options.body.publicKey, overrides)
  })
  return { res, areq, options: options.body }
}

describe("user handles and discoverable credentials", () => {
  test("a random 32-byte handle per (developer, principal), stable, never the principal id; resident key required", async () => {
    const a = (await call(app, "POST", "/v1/webauthn/register/options", dev.apiKey, { principalId: "ann@example.com" })).body.publicKey
    const again = (await call(app, "POST", "/v1/webauthn/register/options", dev.apiKey, { principalId: "ann@example.com" })).body.publicKey
    const otherDev = (await call(app, "POST", "/v1/webauthn/register/options", other.apiKey, { principalId: "ann@example.com" })).body.publicKey
    const otherPrincipal = (await call(app, "POST", "/v1/webauthn/register/options", dev.apiKey, { principalId: "ben@example.com" })).body.publicKey
    expect(Buffer.from(a.user.id, "base64url")).toHaveLength(32)
    expect(again.user.id).toBe(a.user.id)
    expect(new Set([a.user.id, otherDev.user.id, otherPrincipal.user.id]).size).toBe(3)
    expect(Buffer.from(a.user.id, "base64url").toString("latin1")).not.toContain("ann")
    expect(a.authenticatorSelection).toMatchObject({ residentKey: "required", requireResidentKey: true, userVerification: "required" })
    const stored = await app.query(`SELECT user_handle FROM webauthn_user_handles WHERE developer_id = $1 AND principal_id = $2`, [dev.developerId, "ann@example.com"])
    expect(stored[0].userHandle).toBe(a.user.id)
  })
})

describe("stored credentials", () => {
  test("provider name from the AAGUID, backup flags, use count and last use", async () => {
    const authenticator = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    authenticator.aaguid = Buffer.from(ONE_PASSWORD.replace(/-/g, ""), "hex")
    const { credential } = await enrol("cara", authenticator, { be: true, bs: true })
    expect(credential).toMatchObject({
      aaguid: ONE_PASSWORD,
      providerName: "1Password",
      backupEligible: true,
      backedUp: true,
      deviceType: "multiDevice",
      useCount: 0,
      lastUsedAt: null
    })
    await app.adjust("1 minute")
    expect((await assertWith(authenticator, "cara", { be: true, bs: true })).res.status).toBe(200)
    const got = await call(app, "GET", `/v1/webauthn/credentials/${credential.id}`, dev.apiKey)
    expect(got.status).toBe(200)
    expect(got.body).toMatchObject({ useCount: 1, lastUsedAt: new Date(START + 60_000).toISOString() })
    const events = await app.query(`SELECT type, data FROM events WHERE developer_id = $1 AND type IN ('fido.registered', 'fido.assertion') AND (data->>'id') = $2 ORDER BY created_at, type DESC`, [dev.developerId, credential.id])
    expect(events).toEqual([
      { type: "fido.registered", data: { id: credential.id } },
      { type: "fido.assertion", data: { id: credential.id, authRequestId: expect.stringMatching(/^areq_/), grantId: expect.stringMatching(/^grnt_/) } }
    ])
    const plain = (await enrol("cara-2")).credential
    expect(plain).toMatchObject({ providerName: null, backupEligible: false, backedUp: false, deviceType: "singleDevice" })
  })

  test("single get and rename; 404 for another developer's or an unknown id; 400 for an empty name", async () => {
    const { credential } = await enrol("dora")
    const renamed = await call(app, "PATCH", `/v1/webauthn/credentials/${credential.id}`, dev.apiKey, { deviceName: "Phone" })
    expect(renamed.status).toBe(200)
    expect(renamed.body).toEqual({ ...credential, deviceName: "Phone" })
    expect((await call(app, "GET", `/v1/webauthn/credentials/${credential.id}`, dev.apiKey)).body.deviceName).toBe("Phone")
    for (const [method, body] of [["GET", undefined], ["PATCH", { deviceName: "x" }], ["DELETE", undefined]] as const) {
      expect((await call(app, method, `/v1/webauthn/credentials/${credential.id}`, other.apiKey, body)).status).toBe(404)
      expect((await call(app, method, `/v1/webauthn/credentials/pkc_unknown`, dev.apiKey, body)).status).toBe(404)
    }
    const empty = await call(app, "PATCH", `/v1/webauthn/credentials/${credential.id}`, dev.apiKey, { deviceName: "" })
    expect(empty.status).toBe(400)
    expect(empty.body.code).toBe("BAD_REQUEST")
  })

  test("the list pages with limit and cursor", async () => {
    const first = (await enrol("eve")).credential
    await app.adjust("1 second")
    const second = (await enrol("eve")).credential
    const page = await call(app, "GET", "/v1/webauthn/credentials?principalId=eve&limit=1", dev.apiKey)
    expect(page.body.credentials.map((c: any) => c.id)).toEqual([second.id])
    const next = await call(app, "GET", `/v1/webauthn/credentials?principalId=eve&limit=1&cursor=${page.body.nextCursor}`, dev.apiKey)
    expect(next.body).toEqual({ credentials: [first], nextCursor: null })
    expect((await call(app, "GET", "/v1/webauthn/credentials?principalId=eve&limit=0", dev.apiKey)).status).toBe(400)
  })
})

describe("soft delete", () => {
  test("deleted: 204 and fido.credential.deleted; not listed, got, offered or accepted (403 UNKNOWN_CREDENTIAL); kept 30 days", async () => {
    const { authenticator, credential } = await enrol("fay")
    const { credential: kept } = await enrol("fay")
    const del = await call(app, "DELETE", `/v1/webauthn/credentials/${credential.id}`, dev.apiKey)
    expect(del.status).toBe(204)
    expect((await call(app, "DELETE", `/v1/webauthn/credentials/${credential.id}`, dev.apiKey)).status).toBe(404)
    const events = await app.query(`SELECT data FROM events WHERE developer_id = $1 AND type = 'fido.credential.deleted'`, [dev.developerId])
    expect(events.map((e: any) => e.data)).toContainEqual({ id: credential.id })
    expect((await call(app, "GET", `/v1/webauthn/credentials/${credential.id}`, dev.apiKey)).status).toBe(404)
    expect((await call(app, "GET", "/v1/webauthn/credentials?principalId=fay", dev.apiKey)).body.credentials.map((c: any) => c.id)).toEqual([kept.id])
    const reg = await call(app, "POST", "/v1/webauthn/register/options", dev.apiKey, { principalId: "fay" })
    expect(reg.body.publicKey.excludeCredentials.map((c: any) => c.id)).toEqual([kept.credentialId])
    // the deleted passkey is refused, and the request stays pending
    const { res, areq, options } = await assertWith(authenticator, "fay")
    expect(options.publicKey.allowCredentials.map((c: any) => c.id)).toEqual([kept.credentialId])
    expect(res.status).toBe(403)
    expect(res.body.code).toBe("UNKNOWN_CREDENTIAL")
    expect((await app.query(`SELECT status FROM auth_requests WHERE id = $1`, [areq]))[0].status).toBe("pending")
    const row = await app.query(`SELECT deleted_at FROM webauthn_credentials WHERE id = $1`, [credential.id])
    expect(new Date(row[0].deletedAt).getTime()).toBe(await app.run(Clock.currentTimeMillis))
    // the Signal API data no longer lists it
    const signal = await call(app, "GET", "/v1/webauthn/signal?principalId=fay", dev.apiKey)
    expect(signal.body.allAcceptedCredentialIds).toEqual([kept.credentialId])
  })

  test("with only deleted passkeys, assertion options answer 422 NO_CREDENTIALS", async () => {
    const { credential } = await enrol("gus")
    await call(app, "DELETE", `/v1/webauthn/credentials/${credential.id}`, dev.apiKey)
    const res = await call(app, "POST", "/v1/webauthn/assert/options", dev.apiKey, { authRequestId: await pendingRequest("gus") })
    expect(res.status).toBe(422)
    expect(res.body.code).toBe("NO_CREDENTIALS")
  })
})

describe("at most 20 passkeys per principal", () => {
  test("409 TOO_MANY_CREDENTIALS at options and at verify (a challenge taken before the 20th)", async () => {
    const held = await call(app, "POST", "/v1/webauthn/register/options", dev.apiKey, { principalId: "hal" })
    for (let i = 0; i < 20; i++) await enrol("hal")
    const options = await call(app, "POST", "/v1/webauthn/register/options", dev.apiKey, { principalId: "hal" })
    expect(options.status).toBe(409)
    expect(options.body.code).toBe("TOO_MANY_CREDENTIALS")
    const late = await call(app, "POST", "/v1/webauthn/register/verify", dev.apiKey, {
      challengeId: held.body.challengeId,
      response: new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID }).register(held.body.publicKey)
    })
    expect(late.status).toBe(409)
    expect(late.body.code).toBe("TOO_MANY_CREDENTIALS")
    expect((await app.query(`SELECT count(*)::int AS n FROM webauthn_credentials WHERE principal_id = 'hal'`))[0].n).toBe(20)
    // concurrent registrations at 19: exactly one lands
    const last = await call(app, "GET", "/v1/webauthn/credentials?principalId=hal&limit=2", dev.apiKey)
    for (const c of last.body.credentials) await call(app, "DELETE", `/v1/webauthn/credentials/${c.id}`, dev.apiKey)
    const pending = []
    for (let i = 0; i < 8; i++) pending.push((await call(app, "POST", "/v1/webauthn/register/options", dev.apiKey, { principalId: "hal" })).body)
    await enrol("hal")
    const raced = await Promise.all(pending.map((o) =>
      call(app, "POST", "/v1/webauthn/register/verify", dev.apiKey, {
        challengeId: o.challengeId,
        response: new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID }).register(o.publicKey)
      })))
    expect(raced.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409, 409, 409])
    expect((await app.query(`SELECT count(*)::int AS n FROM webauthn_credentials WHERE principal_id = 'hal' AND deleted_at IS NULL`))[0].n).toBe(20)
    // deleting one makes room
    const list = await call(app, "GET", "/v1/webauthn/credentials?principalId=hal&limit=1", dev.apiKey)
    await call(app, "DELETE", `/v1/webauthn/credentials/${list.body.credentials[0].id}`, dev.apiKey)
    expect((await call(app, "POST", "/v1/webauthn/register/options", dev.apiKey, { principalId: "hal" })).status).toBe(200)
  }, 120_000)
})

describe("GET /v1/webauthn/signal", () => {
  test("rpId, the user handle, every accepted credential id, name and display name; 400 without principalId", async () => {
    const { credential: one } = await enrol("ida")
    const { credential: two } = await enrol("ida")
    const res = await call(app, "GET", "/v1/webauthn/signal?principalId=ida", dev.apiKey)
    const handle = (await app.query(`SELECT user_handle FROM webauthn_user_handles WHERE developer_id = $1 AND principal_id = 'ida'`, [dev.developerId]))[0].userHandle
    expect(res.status).toBe(200)
    expect({ ...res.body, allAcceptedCredentialIds: [...res.body.allAcceptedCredentialIds].sort() }).toEqual({
      rpId: RP_ID,
      userId: handle,
      allAcceptedCredentialIds: [one.credentialId, two.credentialId].sort(),
      name: "ida",
      displayName: "ida"
    })
    const bad = await call(app, "GET", "/v1/webauthn/signal", dev.apiKey)
    expect(bad.status).toBe(400)
    expect((await call(app, "GET", "/v1/webauthn/signal?principalId=ida", other.apiKey)).body.allAcceptedCredentialIds).toEqual([])
  })
})

describe("signature counter", () => {
  test("a counter that goes backwards (or repeats): 403 VERIFICATION_FAILED, an audit-chain entry, request still pending", async () => {
    const { authenticator, credential } = await enrol("jon")
    expect((await assertWith(authenticator, "jon", { counter: 5 })).res.status).toBe(200)
    for (const counter of [3, 5]) {
      const { res, areq } = await assertWith(authenticator, "jon", { counter })
      expect([counter, res.status, res.body.code]).toEqual([counter, 403, "VERIFICATION_FAILED"])
      expect(res.body.message).toContain("counter")
      expect((await app.query(`SELECT status FROM auth_requests WHERE id = $1`, [areq]))[0].status).toBe("pending")
    }
    const alerts = await app.query(`SELECT principal_id, metadata FROM audit_log WHERE developer_id = $1 AND action = 'service.passkey.counter_regression' ORDER BY seq`, [dev.developerId])
    expect(alerts.map((a: any) => [a.principalId, a.metadata.passkeyId, a.metadata.storedCounter, a.metadata.presentedCounter])).toEqual([
      ["jon", credential.id, 5, 3],
      ["jon", credential.id, 5, 5]
    ])
    expect((await app.query(`SELECT counter::int AS c FROM webauthn_credentials WHERE id = $1`, [credential.id]))[0].c).toBe(5)
    // and an AD-011 alert (decisions §14, revised) on the credential: the second regression is one more occurrence
    const raised = (await call(app, "GET", "/v1/anomaly/alerts?ruleId=AD-011", dev.apiKey)).body.data
    expect(raised).toMatchObject([{
      ruleId: "AD-011", severity: "high", status: "open", principalId: "jon", agentId: null, occurrences: 2,
      context: { passkeyId: credential.id, storedCounter: 5, presentedCounter: 5 }
    }])
    expect((await assertWith(authenticator, "jon", { counter: 6 })).res.status).toBe(200)
  })

  test("an authenticator that keeps no counter (always 0) is accepted", async () => {
    const { authenticator } = await enrol("kai")
    expect((await assertWith(authenticator, "kai", { counter: 0 })).res.status).toBe(200)
    expect((await assertWith(authenticator, "kai", { counter: 0 })).res.status).toBe(200)
  })
})

describe("attestation policy", () => {
  test("default none; direct asked for in the options; backup eligibility required; 422 without trust anchors; 400 malformed", async () => {
    const d = await app.signup({ plan: "pro" })
    expect((await call(app, "GET", "/v1/webauthn/policy", d.apiKey)).body).toEqual({ attestation: "none", allowedAaguids: null, requireBackupEligible: false, updatedAt: null })
    const anchors = await call(app, "PUT", "/v1/webauthn/policy", d.apiKey, { attestation: "direct", allowedAaguids: [ONE_PASSWORD] })
    expect(anchors.status).toBe(422)
    expect(anchors.body.code).toBe("ATTESTATION_ANCHORS_REQUIRED")
    expect((await call(app, "PUT", "/v1/webauthn/policy", d.apiKey, { allowedAaguids: ["not-a-uuid"] })).status).toBe(400)
    const put = await call(app, "PUT", "/v1/webauthn/policy", d.apiKey, { attestation: "direct", requireBackupEligible: true })
    expect(put.status).toBe(200)
    expect(put.body).toEqual({ attestation: "direct", allowedAaguids: null, requireBackupEligible: true, updatedAt: new Date(await app.run(Clock.currentTimeMillis)).toISOString() })
    const { res, options } = await enrolIn(app, d.apiKey, "lou")
    expect(options.publicKey.attestation).toBe("direct")
    expect(res.status).toBe(403)
    expect(res.body.code).toBe("AUTHENTICATOR_NOT_ALLOWED")
    expect((await enrolIn(app, d.apiKey, "lou", undefined, { be: true })).res.status).toBe(201)
  })

  test("an AAGUID allow-list with a local root: only a chain to that root with an allowed AAGUID registers", async () => {
    x509.cryptoProvider.set(webcrypto as any)
    const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" }
    // valid on the service's fixed clock and on today's date alike (the attestation library reads the latter)
    const span = { notBefore: new Date(Math.min(START, Date.now()) - 86400_000), notAfter: new Date(Math.max(START, Date.now()) + 365 * 86400_000) }
    const makeRoot = async (name: string) => {
      const keys = await webcrypto.subtle.generateKey(alg, true, ["sign", "verify"]) as CryptoKeyPair
      const cert = await x509.X509CertificateGenerator.createSelfSigned({
        serialNumber: "01", name: `CN=${name}, O=Test Vendor, C=US`, ...span, signingAlgorithm: alg, keys,
        extensions: [new x509.BasicConstraintsExtension(true, undefined, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true)]
      })
      return { keys, cert }
    }
    const attestationFrom = async (root: Awaited<ReturnType<typeof makeRoot>>) => {
      const keys = await webcrypto.subtle.generateKey(alg, true, ["sign", "verify"]) as CryptoKeyPair
      const leaf = await x509.X509CertificateGenerator.create({
        serialNumber: "02", subject: "C=US, O=Test Vendor, OU=Authenticator Attestation, CN=Test Key", issuer: root.cert.subject, ...span,
        signingAlgorithm: alg, publicKey: keys.publicKey, signingKey: root.keys.privateKey,
        extensions: [new x509.BasicConstraintsExtension(false, undefined, true)]
      })
      return { x5c: [new Uint8Array(leaf.rawData)], key: KeyObject.from(keys.privateKey) }
    }
    const trusted = await makeRoot("Trusted Root")
    const untrusted = await makeRoot("Other Root")
    const anchored = await startTestApp({ testClock: true, startTime: START, env: { ...ENV, WEBAUTHN_ATTESTATION_ROOTS: trusted.cert.toString("pem") } })
    try {
      const d = await anchored.signup({ plan: "pro" })
      const put = await call(anchored, "PUT", "/v1/webauthn/policy", d.apiKey, { attestation: "direct", allowedAaguids: [ONE_PASSWORD.toUpperCase()] })
      expect(put.status).toBe(200)
      expect(put.body.allowedAaguids).toEqual([ONE_PASSWORD])
      const withAaguid = (aaguid: string) => {
        const a = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
        a.aaguid = Buffer.from(aaguid.replace(/-/g, ""), "hex")
        return a
      }
      const allowed = await enrolIn(anchored, d.apiKey, "max", withAaguid(ONE_PASSWORD), { attestation: await attestationFrom(trusted) })
      expect(allowed.res.status).toBe(201)
      expect(allowed.res.body.providerName).toBe("1Password")
      const cases: Array<[string, SoftAuthenticator, object, number, string]> = [
        ["no attestation", withAaguid(ONE_PASSWORD), {}, 403, "AUTHENTICATOR_NOT_ALLOWED"],
        ["self attestation", withAaguid(ONE_PASSWORD), { attestation: "self" }, 403, "AUTHENTICATOR_NOT_ALLOWED"],
        ["another model", withAaguid("cb69481e-8ff7-4039-93ec-0a2729a154a8"), { attestation: await attestationFrom(trusted) }, 403, "AUTHENTICATOR_NOT_ALLOWED"],
        ["an untrusted root", withAaguid(ONE_PASSWORD), { attestation: await attestationFrom(untrusted) }, 400, "VERIFICATION_FAILED"]
      ]
      for (const [name, authenticator, overrides, status, code] of cases) {
        const { res } = await enrolIn(anchored, d.apiKey, "max", authenticator, overrides)
        expect([name, res.status, res.body.code]).toEqual([name, status, code])
      }
      expect((await anchored.query(`SELECT attestation_format FROM webauthn_credentials WHERE developer_id = $1`, [d.developerId])).map((r: any) => r.attestationFormat)).toEqual(["packed"])
    } finally {
      await anchored.stop()
    }
  }, 120_000)
})

describe("trust anchor configuration", () => {
  const base = { DATABASE_URL: "pglite://memory", REDIS_URL: "memory://", AUTO_GENERATE_KEYS: "true" }
  test("unreadable roots or statements stop the start, naming the variable", () => {
    expect(() => loadConfig({ ...base, WEBAUTHN_ATTESTATION_ROOTS: "-----BEGIN CERTIFICATE-----\nnot a cert\n-----END CERTIFICATE-----" })).toThrow("WEBAUTHN_ATTESTATION_ROOTS")
    expect(() => loadConfig({ ...base, WEBAUTHN_ATTESTATION_ROOTS: "/nonexistent/roots.pem" })).toThrow("WEBAUTHN_ATTESTATION_ROOTS")
    expect(() => loadConfig({ ...base, WEBAUTHN_MDS_STATEMENTS: "[1]" })).toThrow("WEBAUTHN_MDS_STATEMENTS")
    expect(() => loadConfig({ ...base, WEBAUTHN_MDS_STATEMENTS: "[{" })).toThrow("WEBAUTHN_MDS_STATEMENTS")
    expect(loadConfig({ ...base, WEBAUTHN_MDS_STATEMENTS: `[{"aaguid":"${ONE_PASSWORD}"}]` }).webauthnTrust.statements).toHaveLength(1)
  })
})

describe("cleanup fiber (TestClock)", () => {
  test("expired and used challenges go after an hour, deleted passkeys after 30 days, expired principal sessions too", async () => {
    // the anomaly pass would run twice per step of the clock: far apart, so only the cleanup fiber works here
    const worker = await startTestApp({ testClock: true, startTime: START, workers: true, env: { ...ENV, ANOMALY_INTERVAL_SECONDS: "86400" } })
    try {
      const d = await worker.signup({ plan: "enterprise" })
      const stale = await call(worker, "POST", "/v1/webauthn/register/options", d.apiKey, { principalId: "ned" })
      const { res } = await enrolIn(worker, d.apiKey, "ned")
      const used = await worker.query(`SELECT id FROM webauthn_challenges WHERE used_at IS NOT NULL`)
      expect(used).toHaveLength(1)
      await call(worker, "DELETE", `/v1/webauthn/credentials/${res.body.id}`, d.apiKey)
      await call(worker, "POST", "/v1/principal-sessions", d.apiKey, { principalId: "ned", expiresIn: "15m" })
      const count = async (table: string) => (await worker.query(`SELECT count(*)::int AS n FROM ${table}`))[0].n as number
      /** moves the clock in steps of the fiber's interval, letting each pass finish */
      const advance = async (minutes: number) => {
        for (let m = 0; m < minutes; m += 10) {
          await worker.adjust("10 minutes")
          await new Promise((r) => setTimeout(r, 30))
        }
      }
      await advance(50)
      expect(await count("webauthn_challenges")).toBe(2) // not yet an hour past expiry or use
      await advance(30)
      expect(await count("webauthn_challenges")).toBe(0)
      expect(await count("principal_sessions")).toBe(0)
      expect(await count("webauthn_credentials")).toBe(1) // soft-deleted, kept 30 days
      // (the deletion is moved back in time rather than the clock 30 days forward: the other fibers would replay every poll)
      const now = await worker.run(Clock.currentTimeMillis)
      await worker.query(`UPDATE webauthn_credentials SET deleted_at = $1`, [new Date(now - 30 * 86400_000 + 15 * 60_000)])
      await advance(10)
      expect(await count("webauthn_credentials")).toBe(1)
      await advance(10)
      expect(await count("webauthn_credentials")).toBe(0)
      expect(stale.status).toBe(200)
    } finally {
      await worker.stop()
    }
  }, 120_000)
})
