/**
 * decisions §18, bad input and races: unknown formats, malformed holder keys, tampered and foreign
 * credentials, missing status lists, the published implementation's older JWTs, and issuance racing
 * a revocation. Every one answers the §18 outcome or error, never a 5xx.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { sign as cryptoSign } from "node:crypto"
import { startTestApp, type TestApp } from "../support/app.ts"
import { bitstringStatus, holderKeys, joseVerify, payloadOf, routeTo, sandbox } from "./support.ts"

let app: TestApp

beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" } })
  routeTo(app)
})
afterAll(async () => {
  await app?.stop()
})

const events = (developerId: string, type: string) =>
  app.query<{ data: any }>("SELECT data FROM events WHERE developer_id = $1 AND type = $2 ORDER BY created_at, id", [developerId, type])

describe("bad input: the §18 errors, never a 5xx", () => {
  test("unknown formats and malformed holder keys answer 400 before the code is spent", async () => {
    const dev = await sandbox(app)
    const code = await dev.code()
    const attempt = (extra: Record<string, unknown>) =>
      app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code, agentId: dev.agentId, ...extra } })
    for (const extra of [
      { credentialFormat: "agent-passport" },
      { credentialFormat: "ldp_vc" },
      { credentialFormat: 7 },
      { credentialFormat: "sd-jwt", holderKey: "not a key" },
      { credentialFormat: "sd-jwt", holderKey: { kty: "OKP", crv: "Ed25519", x: "short" } },
      { credentialFormat: "sd-jwt", holderKey: { ...holderKeys().privateKey.export({ format: "jwk" }) } },
      { credentialFormat: "sd-jwt", holderKey: { kty: "RSA", n: "abc", e: "AQAB" } },
      { credentialFormat: "sd-jwt", holderKey: "did:key:z6MkInvalid" },
      { credentialFormat: "sd-jwt", holderKey: [1, 2] },
      { credentialFormat: "vc-jwt", holderKey: holderKeys().jwk }
    ]) {
      const res = await attempt(extra)
      expect([res.status, res.body.code]).toEqual([400, "BAD_REQUEST"])
    }
    // nothing was spent: the same code still works
    expect((await attempt({ credentialFormat: "vc-jwt" })).status).toBe(201)
  })

  test("verify: malformed, tampered, unknown issuer, missing status list → valid false with the code, 200", async () => {
    const dev = await sandbox(app)
    const vc = (await dev.token({ credentialFormat: "vc-jwt" })).body.verifiableCredential as string
    const verify = async (credential: unknown) => app.request("POST", "/v1/credentials/verify", { body: { credential } })
    expect((await verify("not a credential")).body).toMatchObject({ valid: false, error: "MALFORMED" })
    expect((await verify("a.b.c")).body).toMatchObject({ valid: false, error: "MALFORMED" })
    const [h, p, s] = vc.split(".")
    const claims = payloadOf(vc)
    const tampered = `${h}.${Buffer.from(JSON.stringify({ ...claims, credentialSubject: { ...claims.credentialSubject, scopes: ["admin"] } })).toString("base64url")}.${s}`
    expect((await verify(tampered)).body).toMatchObject({ valid: false, error: "INVALID_SIGNATURE" })
    expect((await verify(`${h}.${p}.${s!.slice(0, -4)}AAAA`)).body).toMatchObject({ valid: false, error: "INVALID_SIGNATURE" })
    // someone else's key and DID
    const other = holderKeys()
    const foreignHeader = Buffer.from(JSON.stringify({ alg: "EdDSA", typ: "vc+jwt", kid: "did:web:evil.example#k" })).toString("base64url")
    const foreignPayload = Buffer.from(JSON.stringify({ ...claims, issuer: "did:web:evil.example", iss: "did:web:evil.example" })).toString("base64url")
    const foreign = `${foreignHeader}.${foreignPayload}.${cryptoSign(null, Buffer.from(`${foreignHeader}.${foreignPayload}`), other.privateKey).toString("base64url")}`
    expect((await verify(foreign)).body).toMatchObject({ valid: false, error: "UNKNOWN_ISSUER" })
    // our key, a status list that does not exist: fail closed
    const { VcKeys } = await import("../../src/credentials/Keys.ts")
    const keys = await app.run(VcKeys)
    const missing = { ...claims, credentialStatus: claims.credentialStatus.map((e: any) => ({ ...e, statusListCredential: e.statusListCredential.replace(/vcsl_\w+$/, "vcsl_01ARZ3NDEKTSV4RRFFQ69G5FAV") })) }
    const { Effect } = await import("effect")
    const unlisted = await Effect.runPromise(keys.sign(missing, { typ: "vc+jwt", cty: "vc" }))
    expect((await verify(unlisted)).body).toMatchObject({ valid: false, error: "STATUS_UNAVAILABLE" })
    const noStatus = await Effect.runPromise(keys.sign({ ...claims, credentialStatus: undefined }, { typ: "vc+jwt", cty: "vc" }))
    expect((await verify(noStatus)).body).toMatchObject({ valid: false, error: "STATUS_UNAVAILABLE" })
    for (const body of [{}, { credential: 42 }, { credential: "" }]) {
      const res = await app.request("POST", "/v1/credentials/verify", { body })
      expect([res.status, res.body.code]).toEqual([400, "BAD_REQUEST"])
    }
    expect((await app.request("POST", "/v1/credentials/present", { body: { sdJwt: vc } })).status).toBe(400)
    expect((await app.request("POST", "/v1/credentials/present", { body: { sdJwt: "~~~" } })).body).toMatchObject({ valid: false })
  })

  test("verify accepts the published implementation's RS256 JWTs with a VCDM 1.1 vc claim, fail closed like ours; expired credentials read EXPIRED", async () => {
    const dev = await sandbox(app)
    const res = await dev.token({ credentialFormat: "vc-jwt" })
    const ours = payloadOf(res.body.verifiableCredential)
    const { Keys } = await import("../../src/platform/Keys.ts")
    const { VcKeys } = await import("../../src/credentials/Keys.ts")
    const { Effect } = await import("effect")
    const jose = await import("jose")
    const rsa = await app.run(Keys)
    const rsaKey = await jose.importPKCS8(rsa.privateKeyPem(), "RS256")
    const legacy = (status: unknown, exp = Math.floor(Date.now() / 1000) + 3600) =>
      new jose.SignJWT({ vc: { "@context": ["https://www.w3.org/ns/credentials/v2"], type: ["VerifiableCredential", "AgentGrantCredential"], credentialStatus: status } })
        .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: rsa.kid })
        .setIssuer(ours.issuer).setSubject(ours.credentialSubject.id).setJti("urn:uuid:legacy").setIssuedAt().setExpirationTime(exp)
        .sign(rsaKey)
    const verify = async (credential: string) => (await app.request("POST", "/v1/credentials/verify", { body: { credential } })).body
    const entry = { ...ours.credentialStatus[0], type: "StatusList2021Entry" }
    expect(await verify(await legacy(entry))).toMatchObject({ valid: true, checks: { format: "jwt-vc-1.1", signature: true } })
    expect(await verify(await legacy({ ...entry, statusListCredential: "https://grantex.dev/v1/credentials/status/vcsl_x" }))).toMatchObject({ valid: false, error: "STATUS_UNAVAILABLE" })
    expect(await verify(await legacy(entry, Math.floor(Date.now() / 1000) - 3600))).toMatchObject({ valid: false, expired: true, error: "EXPIRED" })
    await app.request("DELETE", `/v1/grants/${res.body.grantId}`, { apiKey: dev.apiKey })
    expect(await verify(await legacy(entry))).toMatchObject({ valid: false, revoked: true, error: "REVOKED" })
    // ours, past validUntil
    const keys = await app.run(VcKeys)
    const past = Math.floor(Date.now() / 1000) - 7200
    const expired = await Effect.runPromise(keys.sign({ ...ours, validUntil: new Date(past * 1000).toISOString(), exp: past }, { typ: "vc+jwt", cty: "vc" }))
    expect(await verify(expired)).toMatchObject({ valid: false, expired: true, error: "EXPIRED" })
  })

  test("a consent approved with a passkey gives the credential FidoEvidence", async () => {
    const dev = await sandbox(app)
    const authorize = await app.request("POST", "/v1/authorize", { apiKey: dev.apiKey, body: { agentId: dev.agentId, principalId: "user_42", scopes: ["email:read"] } })
    await app.query("UPDATE auth_requests SET fido_verified_at = now() WHERE id = $1", [authorize.body.authRequestId])
    const res = await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code: authorize.body.code, agentId: dev.agentId, credentialFormat: "vc-jwt" } })
    const { payload } = await joseVerify(res.body.verifiableCredential)
    expect((payload.evidence as any)[0].type).toEqual(["FidoEvidence"])
    expect(payloadOf((await dev.token({ credentialFormat: "vc-jwt" })).body.verifiableCredential).evidence).toBeUndefined()
  })

  test("POST /v1/credentials/issue for an existing grant; GET /v1/credentials lists them", async () => {
    const dev = await sandbox(app)
    const { grantId } = (await dev.token()).body
    const issued = await app.request("POST", "/v1/credentials/issue", { apiKey: dev.apiKey, body: { grantId, format: "dc+sd-jwt", holderKey: holderKeys().jwk } })
    expect(issued.status).toBe(201)
    expect(issued.body).toMatchObject({ grantId, format: "dc+sd-jwt", status: "active", agentDid: `did:service:${dev.agentId}` })
    expect((await app.request("POST", "/v1/credentials/issue", { apiKey: dev.apiKey, body: { grantId, format: "jwt_vc_json" } })).status).toBe(400)
    expect((await app.request("POST", "/v1/credentials/issue", { apiKey: dev.apiKey, body: { grantId: "grnt_nope", format: "vc+jwt" } })).status).toBe(404)
    const other = await app.signup()
    expect((await app.request("POST", "/v1/credentials/issue", { apiKey: other.apiKey, body: { grantId, format: "vc+jwt" } })).status).toBe(404)
    expect((await app.request("GET", `/v1/credentials/${issued.body.id}`, { apiKey: other.apiKey })).status).toBe(404)
    const list = await app.request("GET", `/v1/credentials?grantId=${grantId}`, { apiKey: dev.apiKey })
    expect(list.body.credentials.map((c: any) => c.id)).toEqual([issued.body.id])
    await app.request("DELETE", `/v1/grants/${grantId}`, { apiKey: dev.apiKey })
    expect((await app.request("POST", "/v1/credentials/issue", { apiKey: dev.apiKey, body: { grantId, format: "vc+jwt" } })).status).toBe(400)
  })
})

describe("revocation racing issuance", () => {
  test("a grant revoked after the caller found it active: GrantNoLongerActive, nothing issued", async () => {
    const { Effect, Exit } = await import("effect")
    const { SqlClient } = await import("@effect/sql")
    const { Grants } = await import("../../src/grants/Service.ts")
    const { Credentials } = await import("../../src/credentials/Service.ts")
    const dev = await sandbox(app)
    const { grantId } = (await dev.token()).body
    const grant = await app.run(Effect.flatMap(Grants, (g) => g.find(dev.developerId, grantId)))
    await app.query("UPDATE grants SET status = 'revoked', revoked_at = now() WHERE id = $1", [grantId])
    const exit = await app.run(Effect.exit(Effect.flatMap(Effect.all([SqlClient.SqlClient, Credentials]), ([sql, credentials]) =>
      sql.withTransaction(credentials.issueFor(grant!, { format: "vc-jwt" })))))
    expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" && (exit.cause.error as any)._tag).toBe("GrantNoLongerActive")
    expect(await app.query("SELECT id FROM vc_credentials WHERE grant_id = $1", [grantId])).toEqual([])
    expect(await events(dev.developerId, "vc.issued")).toEqual([])
  })


  test("every credential of a grant revoked while credentials are being issued for it reads revoked; no 5xx", async () => {
    const dev = await sandbox(app)
    const grants: Array<string> = []
    for (let i = 0; i < 6; i++) grants.push((await dev.token()).body.grantId)
    const statuses = await Promise.all(grants.flatMap((grantId) => [
      ...Array.from({ length: 3 }, () => app.request("POST", "/v1/credentials/issue", { apiKey: dev.apiKey, body: { grantId, format: "vc+jwt" } }).then((r) => r.status)),
      app.request("DELETE", `/v1/grants/${grantId}`, { apiKey: dev.apiKey }).then((r) => r.status)
    ]))
    expect(statuses.every((s) => s === 201 || s === 400 || s === 204)).toBe(true)
    const rows = await app.query<{ credential: string; status: string }>(
      "SELECT credential, status FROM vc_credentials WHERE grant_id = ANY($1::text[])", [grants])
    for (const row of rows) {
      expect(row.status).toBe("revoked")
      expect(await bitstringStatus(payloadOf(row.credential).credentialStatus[0])).toBe(true)
    }
  })
})
