/**
 * decisions §18, checked by libraries we did not write: vc+jwt with jose and the key from our
 * did.json (did-resolver + web-did-resolver), status lists with @digitalbazaar/vc-bitstring-status-list,
 * SD-JWT VCs and key-binding presentations with @sd-jwt/sd-jwt-vc 0.19.0.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
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
    const chained = await app.query("SELECT grant_id, agent_id, metadata FROM audit_log WHERE developer_id = $1 AND action = 'service.vc.issued'", [dev.developerId])
    expect(chained).toEqual([{ grantId: res.body.grantId, agentId: dev.agentId, metadata: { credentialId: before.body.vcId, format: "vc+jwt", expiresAt: grant.expiresAt } }])

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
