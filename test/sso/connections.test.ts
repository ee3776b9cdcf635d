/**
 * The connections API (decisions §12): create, read, change, delete, test, enforce, the legacy
 * `/v1/sso/config`, limits, secrets sealed and never answered (and re-encrypted by `vault rekey`),
 * events, and a SAML connection from its explicit fields (metadata import: saml-connections.test.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { openSync, parseKeyring } from "../../src/vault/Crypto.ts"
import { rekey } from "../../src/vault/Rekey.ts"
import { ssoSecretContext } from "../../src/sso/Connections.ts"
import { toPem } from "../../src/sso/saml/Certificates.ts"
import type { TestApp } from "../support/app.ts"
import { type Idp, startIdp } from "../support/oidc-idp.ts"
import { makeSigningKey } from "../support/saml-idp.ts"
import { createConnection, oidcConnection, startSsoApp } from "./helpers.ts"

const KEY_1 = `k1:${Buffer.alloc(32, 1).toString("base64")}`
const KEY_2 = `k2:${Buffer.alloc(32, 2).toString("base64")}`
// a real certificate, valid now: the SAML settings check parses it and refuses one out of its validity
const PEM = makeSigningKey({ notBefore: new Date(Date.now() - 86_400_000), notAfter: new Date(Date.now() + 365 * 86_400_000) }).certificatePem

let app: TestApp
let idp: Idp
let base: string

beforeAll(async () => {
  const started = await startSsoApp({ env: { VAULT_ENCRYPTION_KEYS: `${KEY_2},${KEY_1}` } })
  app = started.app
  base = started.base
  idp = await startIdp({ flavor: "okta", clientId: "aas-client", clientSecret: "s3cret-value-never-returned", redirectUri: started.redirectUri, accounts: [] })
}, 120_000)
afterAll(async () => {
  await idp?.stop()
  await app?.stop()
})

const eventsOf = (developerId: string, prefix: string) =>
  app.query("SELECT type, data FROM events WHERE developer_id = $1 AND type LIKE $2 ORDER BY created_at, id", [developerId, `${prefix}%`])

describe("connections", () => {
  test("create OIDC: 201 without the secret, the redirect URI to register, the secret sealed under the active vault key", async () => {
    const dev = await app.signup()
    const res = await app.request("POST", "/v1/sso/connections", { apiKey: dev.apiKey, body: oidcConnection(idp, { domains: ["Example.COM"] }) })
    expect(res.status).toBe(201)
    expect(res.body).toEqual({
      id: expect.stringMatching(/^sso_[0-9A-Z]{26}$/), connectionId: res.body.id, name: "Workforce", protocol: "oidc", status: "active",
      domains: ["example.com"], jitProvisioning: true, enforce: false, groupsClaim: null, groupMappings: {}, defaultScopes: [],
      allowedRedirectUris: [], issuerUrl: idp.issuerUrl, clientId: "aas-client", tokenEndpointAuthMethod: "client_secret_basic",
      scopes: "openid email profile groups", tenantMode: "single", hasClientSecret: true, redirectUri: `${base}/sso/oidc/callback`,
      createdAt: expect.any(String), updatedAt: expect.any(String)
    })
    expect(res.text).not.toContain("s3cret")
    const [row] = await app.query("SELECT client_secret_ciphertext FROM sso_connections WHERE id = $1", [res.body.id])
    expect(row.clientSecretCiphertext).not.toContain("s3cret")
    const sealed = JSON.parse(row.clientSecretCiphertext)
    expect(sealed.keyId).toBe("k2")
    expect(openSync(parseKeyring(`${KEY_2},${KEY_1}`), ssoSecretContext(res.body.id, dev.developerId), sealed)).toBe("s3cret-value-never-returned")
    // bound to its row: under another connection's id it does not open
    expect(typeof openSync(parseKeyring(KEY_2), ssoSecretContext("ssoconn_other", dev.developerId), sealed)).not.toBe("string")
    expect(await eventsOf(dev.developerId, "sso.connection")).toEqual([
      { type: "sso.connection.created", data: { connectionId: res.body.id, name: "Workforce", protocol: "oidc" } }
    ])
    const list = await app.request("GET", "/v1/sso/connections", { apiKey: dev.apiKey })
    expect(list.body.connections.map((c: any) => c.id)).toEqual([res.body.id])
    expect(list.text).not.toContain("s3cret")
    expect((await app.request("GET", `/v1/sso/connections/${res.body.id}`, { apiKey: dev.apiKey })).body).toEqual(res.body)
    // another developer sees nothing of it
    const other = await app.signup()
    expect((await app.request("GET", `/v1/sso/connections/${res.body.id}`, { apiKey: other.apiKey })).status).toBe(404)
    expect((await app.request("GET", "/v1/sso/connections", { apiKey: other.apiKey })).body.connections).toEqual([])
  })

  test("bad input: ldap 422 PROTOCOL_NOT_SUPPORTED; missing fields, a non-http(s) issuer, 51 domains → 400 with details", async () => {
    const dev = await app.signup()
    const post = (body: unknown) => app.request("POST", "/v1/sso/connections", { apiKey: dev.apiKey, body })
    const ldap = await post({ name: "AD", protocol: "ldap" })
    expect(ldap.status).toBe(422)
    expect(ldap.body.code).toBe("PROTOCOL_NOT_SUPPORTED")
    const cases: Array<[unknown, string]> = [
      [{ protocol: "oidc", issuerUrl: idp.issuerUrl, clientId: "c", clientSecret: "s" }, "name"],
      [{ name: "x", issuerUrl: idp.issuerUrl, clientId: "c", clientSecret: "s" }, "protocol"],
      [{ name: "x", protocol: "oidc", clientId: "c", clientSecret: "s" }, "issuerUrl"],
      [{ name: "x", protocol: "oidc", issuerUrl: "ftp://idp.example", clientId: "c", clientSecret: "s" }, "issuerUrl"],
      [{ name: "x", protocol: "oidc", issuerUrl: idp.issuerUrl, clientSecret: "s" }, "clientId"],
      [{ name: "x", protocol: "oidc", issuerUrl: idp.issuerUrl, clientId: "c" }, "clientSecret"],
      [{ ...oidcConnection(idp), tokenEndpointAuthMethod: "private_key_jwt" }, "tokenEndpointAuthMethod"],
      [{ ...oidcConnection(idp), scopes: "email profile" }, "scopes"],
      [{ ...oidcConnection(idp), tenantMode: "b2c" }, "tenantMode"],
      [{ ...oidcConnection(idp), domains: Array.from({ length: 51 }, (_, i) => `d${i}.example.com`) }, "domains"],
      [{ ...oidcConnection(idp), domains: ["not a domain"] }, "domains"],
      [{ ...oidcConnection(idp), allowedRedirectUris: ["http://app.example.com/cb"] }, "allowedRedirectUris"],
      [{ ...oidcConnection(idp), groupMappings: { eng: ["bad scope!"] } }, "groupMappings.eng"],
      [{ name: "x", protocol: "saml", idpSsoUrl: "https://idp.example/sso", idpCertificates: [PEM] }, "idpEntityId"],
      [{ name: "x", protocol: "saml", idpEntityId: "urn:idp", idpSsoUrl: "https://idp.example/sso", idpCertificates: [] }, "idpCertificates"],
      [{ name: "x", protocol: "saml", idpEntityId: "urn:idp", idpSsoUrl: "https://idp.example/sso", idpCertificates: ["not a pem"] }, "idpCertificates[0]"]
    ]
    for (const [body, path] of cases) {
      const res = await post(body)
      expect({ path, status: res.status, code: res.body.code, details: res.body.details?.[0]?.path }).toEqual({ path, status: 400, code: "BAD_REQUEST", details: path })
    }
    expect((await app.request("GET", "/v1/sso/connections", { apiKey: dev.apiKey })).body.connections).toEqual([])
  })

  test("SAML with explicit IdP fields: 201 with the SP values to paste; the protocol cannot change", async () => {
    const dev = await app.signup()
    const res = await app.request("POST", "/v1/sso/connections", {
      apiKey: dev.apiKey,
      body: { name: "Entra SAML", protocol: "saml", idpEntityId: "https://sts.example/tenant/", idpSsoUrl: "https://login.example/saml2", idpCertificates: [PEM] }
    })
    expect(res.status).toBe(201)
    expect(res.body).toMatchObject({
      protocol: "saml", idpEntityId: "https://sts.example/tenant/", idpSsoUrl: "https://login.example/saml2", idpCertificates: [toPem(PEM)],
      spEntityId: `${base}/sso/saml/metadata/${res.body.id}`, spAcsUrl: `${base}/sso/saml/acs/${res.body.id}`, spMetadataUrl: `${base}/sso/saml/metadata/${res.body.id}`
    })
    expect(res.body.clientId).toBeUndefined()
    const change = await app.request("PATCH", `/v1/sso/connections/${res.body.id}`, { apiKey: dev.apiKey, body: { protocol: "oidc" } })
    expect(change.status).toBe(400)
  })

  test("limits: a domain claimed by another active connection → 409; the 21st connection → 409", async () => {
    const dev = await app.signup()
    await createConnection(app, dev.apiKey, oidcConnection(idp, { name: "a", domains: ["acme.test", "b.acme.test"] }))
    const clash = await app.request("POST", "/v1/sso/connections", { apiKey: dev.apiKey, body: oidcConnection(idp, { name: "b", domains: ["ACME.test"] }) })
    expect(clash.status).toBe(409)
    expect(clash.body.message).toContain("acme.test")
    // an inactive connection claims nothing
    const inactive = await createConnection(app, dev.apiKey, oidcConnection(idp, { name: "c", status: "inactive", domains: ["c.test"] }))
    expect(inactive.status).toBe("inactive")
    expect((await app.request("POST", "/v1/sso/connections", { apiKey: dev.apiKey, body: oidcConnection(idp, { name: "d", domains: ["c.test"] }) })).status).toBe(201)
    // reactivating c would claim c.test twice
    expect((await app.request("PATCH", `/v1/sso/connections/${inactive.id}`, { apiKey: dev.apiKey, body: { status: "active" } })).status).toBe(409)
    for (let i = 3; i < 20; i++) await createConnection(app, dev.apiKey, oidcConnection(idp, { name: `n${i}` }))
    const over = await app.request("POST", "/v1/sso/connections", { apiKey: dev.apiKey, body: oidcConnection(idp, { name: "n21" }) })
    expect(over.status).toBe(409)
    expect(over.body.message).toContain("20")
  })

  test("patch and delete: events name the changed fields (a new secret included, never its value); delete ends the sessions", async () => {
    const dev = await app.signup()
    const conn = await createConnection(app, dev.apiKey, oidcConnection(idp))
    const patched = await app.request("PATCH", `/v1/sso/connections/${conn.id}`, { apiKey: dev.apiKey, body: { name: "Renamed", clientSecret: "n3w-secret" } })
    expect(patched.status).toBe(200)
    expect(patched.body.name).toBe("Renamed")
    const events = await eventsOf(dev.developerId, "sso.connection")
    expect(events[1]).toEqual({ type: "sso.connection.updated", data: { connectionId: conn.id, changed: ["name", "clientSecret"] } })
    expect(JSON.stringify(events)).not.toContain("n3w-secret")
    expect((await app.request("DELETE", `/v1/sso/connections/${conn.id}`, { apiKey: dev.apiKey })).status).toBe(204)
    expect((await app.request("GET", `/v1/sso/connections/${conn.id}`, { apiKey: dev.apiKey })).status).toBe(404)
    expect((await app.request("DELETE", `/v1/sso/connections/${conn.id}`, { apiKey: dev.apiKey })).status).toBe(404)
    expect((await eventsOf(dev.developerId, "sso.connection.deleted"))).toEqual([{ type: "sso.connection.deleted", data: { connectionId: conn.id } }])
  })

  test("test: discovery and JWKS fetched from the provider; an unreachable provider fails the check", async () => {
    const dev = await app.signup()
    const good = await createConnection(app, dev.apiKey, oidcConnection(idp))
    const res = await app.request("POST", `/v1/sso/connections/${good.id}/test`, { apiKey: dev.apiKey })
    expect(res.status).toBe(200)
    expect(res.body).toEqual({
      success: true, protocol: "oidc",
      checks: [{ name: "discovery", ok: true, detail: idp.tokenIssuer }, { name: "jwks", ok: true, detail: "1 signing key(s)" }]
    })
    const bad = await createConnection(app, dev.apiKey, oidcConnection(idp, { name: "gone", issuerUrl: "http://127.0.0.1:9/" }))
    const failed = await app.request("POST", `/v1/sso/connections/${bad.id}/test`, { apiKey: dev.apiKey })
    expect(failed.status).toBe(200)
    expect(failed.body.success).toBe(false)
    expect(failed.body.checks[0]).toMatchObject({ name: "discovery", ok: false })
  })

  test("enforce: set on active connections, written to the audit chain; the policies' SSO port sees it", async () => {
    const dev = await app.signup()
    const conn = await createConnection(app, dev.apiKey, oidcConnection(idp))
    const on = await app.request("POST", "/v1/sso/enforce", { apiKey: dev.apiKey, body: { enforce: true } })
    expect(on.body).toEqual({ enforce: true, developerId: dev.developerId, connections: 1 })
    expect((await app.request("GET", `/v1/sso/connections/${conn.id}`, { apiKey: dev.apiKey })).body.enforce).toBe(true)
    const chain = await app.query("SELECT action, metadata FROM audit_log WHERE developer_id = $1 AND action LIKE 'service.sso.%' ORDER BY seq", [dev.developerId])
    expect(chain.map((e: any) => [e.action, typeof e.metadata === "string" ? JSON.parse(e.metadata) : e.metadata])).toEqual([
      ["service.sso.enforce_changed", { enforce: true, connectionIds: [conn.id] }]
    ])
    // the same value again changes nothing and writes nothing
    expect((await app.request("POST", "/v1/sso/enforce", { apiKey: dev.apiKey, body: { enforce: true } })).body.connections).toBe(0)
    expect((await app.request("POST", "/v1/sso/enforce", { apiKey: dev.apiKey, body: { enforce: "yes" } })).status).toBe(400)
  })

  test("legacy /v1/sso/config: an OIDC connection named legacy, created, replaced, read and deleted", async () => {
    const dev = await app.signup()
    expect((await app.request("GET", "/v1/sso/config", { apiKey: dev.apiKey })).status).toBe(404)
    const body = { issuerUrl: idp.issuerUrl, clientId: "legacy-client", clientSecret: "legacy-secret", redirectUri: "https://app.example.com/sso" }
    const set = await app.request("POST", "/v1/sso/config", { apiKey: dev.apiKey, body })
    expect(set.status).toBe(201)
    expect(set.body).toEqual({ connectionId: expect.stringMatching(/^sso_[0-9A-Z]{26}$/), issuerUrl: idp.issuerUrl, clientId: "legacy-client", redirectUri: "https://app.example.com/sso", createdAt: expect.any(String), updatedAt: expect.any(String) })
    expect(set.text).not.toContain("legacy-secret")
    const again = await app.request("POST", "/v1/sso/config", { apiKey: dev.apiKey, body: { ...body, clientId: "legacy-2" } })
    expect([again.status, again.body.connectionId]).toEqual([201, set.body.connectionId])
    const conn = (await app.request("GET", `/v1/sso/connections/${set.body.connectionId}`, { apiKey: dev.apiKey })).body
    expect(conn).toMatchObject({ name: "legacy", protocol: "oidc", clientId: "legacy-2", allowedRedirectUris: ["https://app.example.com/sso"] })
    expect((await app.request("GET", "/v1/sso/config", { apiKey: dev.apiKey })).body.clientId).toBe("legacy-2")
    // and it signs in: /sso/login finds it like any connection
    const login = await app.request("GET", `/sso/login?org=${dev.developerId}&redirect_uri=${encodeURIComponent("https://app.example.com/sso")}`)
    expect(login.status).toBe(200)
    expect(login.body.connectionId).toBe(set.body.connectionId)
    expect((await app.request("DELETE", "/v1/sso/config", { apiKey: dev.apiKey })).status).toBe(204)
    expect((await app.request("GET", "/v1/sso/config", { apiKey: dev.apiKey })).status).toBe(404)
  })

  test("vault rekey re-encrypts SSO client secrets under the active key; they still open", async () => {
    const dev = await app.signup()
    const conn = await createConnection(app, dev.apiKey, oidcConnection(idp, { clientSecret: "rotate-me" }))
    // written under k2; rekey to a ring whose active key is k1 (k2 still known)
    const ring = parseKeyring(`${KEY_1},${KEY_2}`)
    const result = await app.run(rekey(ring))
    expect(result.ssoClientSecrets.rekeyed).toBeGreaterThanOrEqual(1)
    expect(result.ssoClientSecrets.remaining).toBe(0)
    const [row] = await app.query("SELECT client_secret_ciphertext FROM sso_connections WHERE id = $1", [conn.id])
    const sealed = JSON.parse(row.clientSecretCiphertext)
    expect(sealed.keyId).toBe("k1")
    expect(openSync(parseKeyring(KEY_1), ssoSecretContext(conn.id, dev.developerId), sealed)).toBe("rotate-me")
  })
})
