/**
 * decisions §18, checked by libraries we did not write: vc+jwt with jose and the key from our
 * did.json (did-resolver + web-did-resolver), status lists with @digitalbazaar/vc-bitstring-status-list,
 * SD-JWT VCs and key-binding presentations with @sd-jwt/sd-jwt-vc 0.19.0.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { sign as cryptoSign } from "node:crypto"
import { startTestApp, type TestApp } from "../support/app.ts"
import {
  bitstringStatus, decodeList, headerOf, holderKeys, joseVerify, payloadOf, resolveDid, routeTo, sandbox, sdJwtVc
} from "./support.ts"

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

describe("DID document", () => {
  test("did:web of PUBLIC_BASE_URL: Multikey credential key, JsonWebKey RSA keys, assertionMethod, JWKS service; stable", async () => {
    const first = await app.request("GET", "/.well-known/did.json")
    expect(first.status).toBe(200)
    expect(first.headers.get("content-type")).toContain("application/did+json")
    expect(first.headers.get("cache-control")).toBe("public, max-age=300")
    const did = first.body.id as string
    expect(did).toBe("did:web:localhost%3A0")
    const { didDocument } = await resolveDid(did)
    expect(didDocument!.id).toBe(did)
    const multikeys = didDocument!.verificationMethod!.filter((m) => m.type === "Multikey")
    const rsa = didDocument!.verificationMethod!.filter((m) => m.type === "JsonWebKey")
    expect(multikeys).toHaveLength(1)
    expect(multikeys[0]!.publicKeyMultibase).toMatch(/^z6Mk/)
    expect(rsa.map((m) => (m.publicKeyJwk as any).kid)).toEqual((await app.request("GET", "/.well-known/jwks.json")).body.keys.map((k: any) => k.kid))
    expect(didDocument!.assertionMethod).toEqual([multikeys[0]!.id])
    expect((didDocument as any).service[0].type).toBe("JsonWebKeySet")
    expect((await app.request("GET", "/.well-known/did.json")).text).toBe(first.text)
  })
})

describe("vc+jwt", () => {
  test("issued with the token: VC-JOSE-COSE, VCDM 2.0 claims at the top, verified by jose with the key from did.json; revoked in every check after DELETE /v1/grants/:id", async () => {
    const dev = await sandbox(app)
    const res = await dev.token({ credentialFormat: "vc-jwt" })
    expect(res.status).toBe(201)
    expect(res.body.grantToken).toBeString()
    const vc = res.body.verifiableCredential as string
    const header = headerOf(vc)
    expect(header).toMatchObject({ alg: "EdDSA", typ: "vc+jwt", cty: "vc" })
    const { payload } = await joseVerify(vc)
    expect(header.kid).toBe(`${payload.issuer}#${header.kid.split("#")[1]}`)
    expect((payload as any).vc).toBeUndefined()
    expect(payload["@context"]).toEqual(["https://www.w3.org/ns/credentials/v2", `${app.config.publicBaseUrl}/ns/agent-auth/v1`])
    expect(payload.type).toEqual(["VerifiableCredential", "AgentGrantCredential"])
    expect(payload.id).toMatch(/^urn:uuid:[0-9a-f-]{36}$/)
    const grant = (await app.request("GET", `/v1/grants/${res.body.grantId}`, { apiKey: dev.apiKey })).body
    // the grant's expiry, to the second (as the JWT's exp)
    expect(payload.validUntil).toBe(new Date(Math.floor(Date.parse(grant.expiresAt) / 1000) * 1000).toISOString())
    expect(payload.exp).toBe(Math.floor(Date.parse(grant.expiresAt) / 1000))
    expect(payload.credentialSubject).toEqual({
      id: `did:service:${dev.agentId}`,
      principalId: "user_42",
      grantId: res.body.grantId,
      scopes: ["email:read", "calendar:read"],
      delegationDepth: 0
    })
    const entries = payload.credentialStatus as Array<any>
    expect(entries.map((e) => [e.type, e.statusPurpose])).toEqual([["BitstringStatusListEntry", "revocation"], ["BitstringStatusListEntry", "suspension"]])
    expect(entries[0].statusListIndex).toMatch(/^\d+$/)
    expect(entries[0].statusListIndex).toBe(entries[1].statusListIndex)
    for (const entry of entries) expect(await bitstringStatus(entry)).toBe(false)
    const before = await app.request("POST", "/v1/credentials/verify", { body: { credential: vc } })
    expect(before.body).toMatchObject({ valid: true, revoked: false, suspended: false, expired: false, error: null })
    expect(before.body.vcId).toMatch(/^vc_/)
    expect((await events(dev.developerId, "vc.issued"))[0]!.data).toMatchObject({ credentialId: before.body.vcId, grantId: res.body.grantId })

    expect((await app.request("DELETE", `/v1/grants/${res.body.grantId}`, { apiKey: dev.apiKey })).status).toBe(204)
    expect(await bitstringStatus(entries[0])).toBe(true)
    expect(await bitstringStatus(entries[1])).toBe(false)
    const after = await app.request("POST", "/v1/credentials/verify", { body: { credential: vc } })
    expect(after.body).toMatchObject({ valid: false, revoked: true, suspended: false, error: "REVOKED", vcId: before.body.vcId })
    expect((await events(dev.developerId, "vc.revoked")).map((e) => e.data)).toEqual([
      { credentialId: before.body.vcId, grantId: res.body.grantId, statusPurpose: "revocation", statusSet: true }
    ])
    const stored = await app.request("GET", `/v1/credentials/${before.body.vcId}`, { apiKey: dev.apiKey })
    expect(stored.body).toMatchObject({ status: "revoked", format: "vc+jwt", credential: vc })
  })

  test("suspension: the agent's suspension sets the suspension bit in the same change, reactivation clears it", async () => {
    const dev = await sandbox(app)
    const vc = (await dev.token({ credentialFormat: "both" })).body.verifiableCredential as string
    const entries = payloadOf(vc).credentialStatus
    expect((await app.request("PATCH", `/v1/agents/${dev.agentId}`, { apiKey: dev.apiKey, body: { status: "suspended" } })).status).toBe(200)
    expect(await bitstringStatus(entries[1])).toBe(true)
    expect(await bitstringStatus(entries[0])).toBe(false)
    expect((await app.request("POST", "/v1/credentials/verify", { body: { credential: vc } })).body).toMatchObject({ valid: false, suspended: true, revoked: false, error: "SUSPENDED" })
    await app.request("PATCH", `/v1/agents/${dev.agentId}`, { apiKey: dev.apiKey, body: { status: "active" } })
    expect(await bitstringStatus(entries[1])).toBe(false)
    expect((await app.request("POST", "/v1/credentials/verify", { body: { credential: vc } })).body.valid).toBe(true)
  })

  test("suspension through a delegation chain: reactivating one agent leaves a credential suspended while another agent of its chain is", async () => {
    const dev = await sandbox(app)
    const parent = await dev.token()
    const sub = await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "sub", scopes: ["email:read"] } })
    const child = await app.request("POST", "/v1/grants/delegate", {
      apiKey: dev.apiKey,
      body: { parentGrantToken: parent.body.grantToken, subAgentId: sub.body.agentId, scopes: ["email:read"], credentialFormat: "vc-jwt" }
    })
    const entry = payloadOf(child.body.verifiableCredential).credentialStatus[1]
    const patch = (agentId: string, status: string) => app.request("PATCH", `/v1/agents/${agentId}`, { apiKey: dev.apiKey, body: { status } })
    await patch(dev.agentId, "suspended")
    expect(await bitstringStatus(entry)).toBe(true)
    await patch(sub.body.agentId, "suspended")
    await patch(dev.agentId, "active")
    expect(await bitstringStatus(entry)).toBe(true)
    await patch(sub.body.agentId, "active")
    expect(await bitstringStatus(entry)).toBe(false)
  })

  test("delegation issues in its transaction; revoking the parent flips the child's bit (cascade)", async () => {
    const dev = await sandbox(app)
    const parent = await dev.token()
    const sub = await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "sub", scopes: ["email:read"] } })
    const child = await app.request("POST", "/v1/grants/delegate", {
      apiKey: dev.apiKey,
      body: { parentGrantToken: parent.body.grantToken, subAgentId: sub.body.agentId, scopes: ["email:read"], credentialFormat: "vc-jwt" }
    })
    expect(child.status).toBe(201)
    const { payload } = await joseVerify(child.body.verifiableCredential)
    expect((payload.credentialSubject as any).delegationDepth).toBe(1)
    await app.request("DELETE", `/v1/grants/${parent.body.grantId}`, { apiKey: dev.apiKey })
    expect(await bitstringStatus((payload.credentialStatus as any)[0])).toBe(true)
  })

  test("indices are random, not in issuance order", async () => {
    const dev = await sandbox(app)
    const indices: Array<number> = []
    for (let i = 0; i < 12; i++) indices.push(Number(payloadOf((await dev.token({ credentialFormat: "vc-jwt" })).body.verifiableCredential).credentialStatus[0].statusListIndex))
    expect(new Set(indices).size).toBe(12)
    expect(Math.max(...indices) - Math.min(...indices)).toBeGreaterThan(1000)
    expect([...indices].sort((a, b) => a - b)).not.toEqual(indices)
  })
})

describe("status list credential", () => {
  test("a new pair of lists at 90 % full, and after a list was closed elsewhere", async () => {
    const dev = await sandbox(app)
    const listOf = async () => payloadOf((await dev.token({ credentialFormat: "vc-jwt" })).body.verifiableCredential).credentialStatus[0].statusListCredential as string
    const first = await listOf()
    const firstId = first.split("/").pop()
    // the shards' counts say 90 % are used: the next issuance still lands in it, then closes it
    await app.query("UPDATE vc_status_counters SET used = 3700 WHERE list_id = $1", [firstId])
    expect(await listOf()).toBe(first)
    const second = await listOf()
    expect(second).not.toBe(first)
    const lists = await app.query<{ purpose: string; open: boolean }>(
      "SELECT purpose, open FROM vc_status_lists WHERE developer_id = $1 ORDER BY created_at, purpose", [dev.developerId])
    expect(lists.map((l) => [l.purpose, l.open])).toEqual([["revocation", false], ["suspension", false], ["revocation", true], ["suspension", true]])
    // closed by another instance: this one's remembered list is refused by the insert and read again
    await app.query("UPDATE vc_status_lists SET open = false WHERE developer_id = $1", [dev.developerId])
    const third = await listOf()
    expect([first, second]).not.toContain(third)
  })


  test("content negotiation, caching headers, ETag; signed once per change", async () => {
    const dev = await sandbox(app)
    const vc = (await dev.token({ credentialFormat: "vc-jwt" })).body.verifiableCredential as string
    const url = new URL(payloadOf(vc).credentialStatus[0].statusListCredential)
    const path = url.pathname
    const jwt = await app.request("GET", path)
    expect(jwt.status).toBe(200)
    expect(jwt.headers.get("content-type")).toContain("application/vc+jwt")
    expect(jwt.headers.get("cache-control")).toBe("public, max-age=300")
    const etag = jwt.headers.get("etag")!
    expect(etag).toBeTruthy()
    const { payload } = await joseVerify(jwt.text)
    expect(payload.type).toEqual(["VerifiableCredential", "BitstringStatusListCredential"])
    expect((payload.credentialSubject as any).encodedList).toMatch(/^uH4sI/)
    expect((await decodeList({ encodedList: (payload.credentialSubject as any).encodedList })).length).toBe(131072)
    // the same signature until the list changes
    expect((await app.request("GET", path)).text).toBe(jwt.text)
    expect((await app.request("GET", path, { headers: { "if-none-match": etag } })).status).toBe(304)
    const json = await app.request("GET", path, { headers: { accept: "application/json" } })
    expect(json.headers.get("content-type")).toContain("application/json")
    expect(json.body.jwt).toBe(jwt.text)
    expect(json.body.credentialSubject.encodedList).toBe((payload.credentialSubject as any).encodedList)
    const token = await app.request("GET", path, { headers: { accept: "application/statuslist+jwt" } })
    expect(token.headers.get("content-type")).toContain("application/statuslist+jwt")
    const { payload: tokenClaims } = await joseVerify(token.text, "statuslist+jwt")
    expect(tokenClaims).toMatchObject({ sub: url.href, status_list: { bits: 2 } })
    await app.request("DELETE", `/v1/grants/${payloadOf(vc).credentialSubject.grantId}`, { apiKey: dev.apiKey })
    const changed = await app.request("GET", path)
    expect(changed.text).not.toBe(jwt.text)
    expect(changed.headers.get("etag")).not.toBe(etag)
    const [row] = await app.query<{ version: number; signed: any }>("SELECT version, signed FROM vc_status_lists WHERE id = $1", [path.split("/").pop()])
    expect(row!.signed.vc.version).toBe(row!.version)
    expect((await app.request("GET", "/v1/credentials/status/vcsl_01ARZ3NDEKTSV4RRFFQ69G5FAV")).body.code).toBe("NOT_FOUND")
  })
})

describe("dc+sd-jwt", () => {
  test("holder-bound SD-JWT VC: @sd-jwt/sd-jwt-vc verifies it and a key-binding presentation; our /present agrees; revoked reads revoked in both", async () => {
    const dev = await sandbox(app)
    const holder = holderKeys()
    const res = await dev.token({ credentialFormat: "sd-jwt", holderKey: holder.jwk })
    expect(res.status).toBe(201)
    const sdJwt = res.body.sdJwtCredential as string
    expect(headerOf(sdJwt)).toMatchObject({ typ: "dc+sd-jwt", alg: "EdDSA" })
    const claims = payloadOf(sdJwt)
    expect(claims.vct).toBe(`${app.config.publicBaseUrl}/vct/agent-grant`)
    expect(claims.cnf.jwk).toEqual(holder.jwk)
    expect(claims.principalId).toBeUndefined()
    const lib = sdJwtVc(holder)
    const verified = await lib.verify(sdJwt)
    const typed = await new (lib.constructor as any)({
      ...(lib as any).userConfig,
      loadTypeMetadataFormat: true,
      vctFetcher: async (uri: string) => (await app.request("GET", new URL(uri).pathname)).body
    }).verify(sdJwt)
    expect(typed.typeMetadata.mergedTypeMetadata.name).toBe("Agent grant")
    expect(verified.payload).toMatchObject({ principalId: "user_42", scopes: ["email:read", "calendar:read"], delegationDepth: 0 })
    const nonce = "n-" + Math.random().toString(36).slice(2)
    const presentation = await lib.present(sdJwt, { principalId: true, scopes: true } as any, {
      kb: { payload: { iat: Math.floor(Date.now() / 1000), aud: "https://verifier.example", nonce } }
    })
    const checked = await lib.verify(presentation, { keyBindingNonce: nonce } as any)
    expect(checked.kb?.payload.nonce).toBe(nonce)
    const ours = await app.request("POST", "/v1/credentials/present", { body: { sdJwt: presentation, nonce, audience: "https://verifier.example" } })
    expect(ours.status).toBe(200)
    expect(ours.body).toMatchObject({ valid: true, error: null, disclosedClaims: { principalId: "user_42", scopes: ["email:read", "calendar:read"] } })
    expect(ours.body.disclosedClaims.delegationDepth).toBeUndefined()
    expect((await events(dev.developerId, "sd-jwt.presented"))[0]!.data).toEqual({ credentialId: ours.body.vcId, grantId: res.body.grantId, disclosed: ["principalId", "scopes"] })
    expect((await events(dev.developerId, "sd-jwt.issued"))).toHaveLength(1)

    await app.request("DELETE", `/v1/grants/${res.body.grantId}`, { apiKey: dev.apiKey })
    await expect(lib.verify(sdJwt)).rejects.toThrow(/Status is not valid/)
    const revoked = await app.request("POST", "/v1/credentials/present", { body: { sdJwt: presentation, nonce, audience: "https://verifier.example" } })
    expect(revoked.body).toMatchObject({ valid: false, revoked: true, error: "REVOKED" })
    expect((await app.request("POST", "/v1/credentials/verify", { body: { credential: sdJwt } })).body).toMatchObject({ valid: false, revoked: true })
  })

  test("suspension reads SUSPENDED (status 2) in the IETF list", async () => {
    const dev = await sandbox(app)
    const sdJwt = (await dev.token({ credentialFormat: "sd-jwt" })).body.sdJwtCredential as string
    const lib = sdJwtVc()
    const statuses: Array<number> = []
    const watching = new (lib.constructor as any)({ ...(lib as any).userConfig, statusValidator: async (s: number) => void statuses.push(s) })
    await watching.verify(sdJwt)
    await app.request("PATCH", `/v1/agents/${dev.agentId}`, { apiKey: dev.apiKey, body: { status: "suspended" } })
    await watching.verify(sdJwt)
    expect(statuses).toEqual([0, 2])
    await expect(lib.verify(sdJwt)).rejects.toThrow(/Status is not valid/)
  })

  test("presentations that must fail: wrong nonce or audience, stale iat, another holder's key, duplicate or foreign disclosures, no key binding", async () => {
    const dev = await sandbox(app)
    const holder = holderKeys()
    const sdJwt = (await dev.token({ credentialFormat: "sd-jwt", holderKey: holder.jwk })).body.sdJwtCredential as string
    const present = (h = holder, kb: Record<string, unknown> = {}) =>
      sdJwtVc(h).present(sdJwt, { principalId: true } as any, {
        kb: { payload: { iat: Math.floor(Date.now() / 1000), aud: "aud-1", nonce: "nonce-1", ...kb } as any }
      })
    const post = async (body: Record<string, unknown>) => (await app.request("POST", "/v1/credentials/present", { body })).body
    expect((await post({ sdJwt: await present(), nonce: "nonce-1", audience: "aud-1" })).valid).toBe(true)
    expect(await post({ sdJwt: await present(), nonce: "other", audience: "aud-1" })).toMatchObject({ valid: false, error: "INVALID_KEY_BINDING" })
    expect(await post({ sdJwt: await present(), nonce: "nonce-1", audience: "aud-2" })).toMatchObject({ valid: false, error: "INVALID_KEY_BINDING" })
    expect(await post({ sdJwt: await present(holder, { iat: Math.floor(Date.now() / 1000) - 600 }), nonce: "nonce-1" })).toMatchObject({ valid: false, error: "INVALID_KEY_BINDING" })
    expect(await post({ sdJwt: await present(holderKeys()), nonce: "nonce-1" })).toMatchObject({ valid: false, error: "INVALID_KEY_BINDING" })
    const parts = sdJwt.split("~")
    const dup = `${parts[0]}~${parts[1]}~${parts[1]}~`
    expect(await post({ sdJwt: dup })).toMatchObject({ valid: false, error: "DUPLICATE_DISCLOSURE" })
    const foreign = Buffer.from(JSON.stringify(["salt", "principalId", "someone_else"])).toString("base64url")
    expect(await post({ sdJwt: `${parts[0]}~${foreign}~` })).toMatchObject({ valid: false, error: "INVALID_DISCLOSURE" })
    expect(await post({ sdJwt })).toMatchObject({ valid: false, error: "KEY_BINDING_REQUIRED" })
    // the presentation's sd_hash covers the disclosures: one swapped after signing fails
    const good = await present()
    const swapped = good.replace(parts[1]!, parts[2]!)
    expect(await post({ sdJwt: swapped, nonce: "nonce-1" })).toMatchObject({ valid: false })
  })
})

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
