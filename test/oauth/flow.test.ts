/**
 * The OAuth server over HTTP (decisions §22): a resource server, its metadata, a DCR client, one
 * authorization through sign-in (the developer login bridge) and the consent page, the code for an
 * RFC 9068 access token, refresh rotation with reuse detection, introspection and revocation.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as jose from "jose"
import { startTestApp, type TestApp } from "../support/app.ts"
import { authorizeThroughConsent, pkce, postForm, registerClient, registerServer } from "./support.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
let rs: any
let client: any
let issuer: string

beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" } })
  dev = await app.signup({ plan: "enterprise" })
  rs = await registerServer(app, dev.apiKey)
  client = await registerClient(app, dev.developerId)
  issuer = `${app.config.publicBaseUrl}/oauth/${dev.developerId}`
}, 120_000)
afterAll(async () => {
  await app?.stop()
})

describe("resource servers and metadata", () => {
  test("registering answers the issuer, the PRM URL, the 401 header and the introspection secret once", async () => {
    expect(rs.resourceServerId).toMatch(/^rs_/)
    expect(rs.identifier).toBe("http://127.0.0.1:9/mcp")
    expect(rs.issuer).toBe(issuer)
    expect(rs.introspection.clientSecret).toMatch(/^rss_/)
    expect(rs.wwwAuthenticate).toBe(`Bearer resource_metadata="${rs.protectedResourceMetadataUrl}", scope="notes:read"`)
    const read = await app.request("GET", `/v1/resource-servers/${rs.resourceServerId}`, { apiKey: dev.apiKey })
    expect(read.status).toBe(200)
    expect(read.body.introspection).toBeUndefined()
    const stored = await app.query("SELECT secret_hash FROM resource_servers WHERE id = $1", [rs.resourceServerId])
    expect(stored[0].secretHash).toHaveLength(64)
  })

  test("identifiers are canonical, unique and http only for loopback", async () => {
    const again = await app.request("POST", "/v1/resource-servers", {
      apiKey: dev.apiKey, body: { identifier: "HTTP://127.0.0.1:9/mcp/", name: "Dup", scopes: [{ name: "a" }], login: {} }
    })
    expect(again.status).toBe(409)
    expect(again.body.code).toBe("CONFLICT")
    const http = await app.request("POST", "/v1/resource-servers", {
      apiKey: dev.apiKey, body: { identifier: "http://mcp.example/x", name: "Plain", scopes: [{ name: "a" }], login: {} }
    })
    expect(http.status).toBe(422)
    expect(http.body.code).toBe("INVALID_RESOURCE_IDENTIFIER")
    const scope = await app.request("POST", "/v1/resource-servers", {
      apiKey: dev.apiKey, body: { identifier: "https://mcp.example/y", name: "Bad scope", scopes: [{ name: "has space" }], login: {} }
    })
    expect(scope.status).toBe(422)
    expect(scope.body.code).toBe("INVALID_SCOPES")
    const noLogin = await app.request("POST", "/v1/resource-servers", {
      apiKey: dev.apiKey, body: { identifier: "https://mcp.example/z", name: "Open", scopes: [{ name: "a" }], openRegistration: { dcr: true }, login: {} }
    })
    expect(noLogin.status).toBe(422)
    expect(noLogin.body.code).toBe("LOGIN_METHOD_REQUIRED")
  })

  test("RFC 8414 metadata at the path-inserted URL, RFC 9728 for the server; no OpenID configuration", async () => {
    const meta = await app.request("GET", `/.well-known/oauth-authorization-server/oauth/${dev.developerId}`)
    expect(meta.status).toBe(200)
    expect(meta.headers.get("access-control-allow-origin")).toBe("*")
    expect(meta.headers.get("cache-control")).toBe("public, max-age=300")
    expect(meta.body.issuer).toBe(issuer)
    expect(meta.body.registration_endpoint).toBe(`${issuer}/register`)
    expect(meta.body.code_challenge_methods_supported).toEqual(["S256"])
    expect(meta.body.grant_types_supported).toEqual(["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:token-exchange"])
    expect(meta.body.protected_resources).toEqual(["http://127.0.0.1:9/mcp"])
    expect(meta.body.id_token_signing_alg_values_supported).toBeUndefined()
    const prm = await app.request("GET", new URL(rs.protectedResourceMetadataUrl).pathname)
    expect(prm.body).toEqual({
      resource: "http://127.0.0.1:9/mcp", authorization_servers: [issuer], scopes_supported: ["notes:read", "notes:write"],
      bearer_methods_supported: ["header"], resource_name: "Notes MCP"
    })
    const other = await app.signup()
    const none = await app.request("GET", `/.well-known/oauth-authorization-server/oauth/${other.developerId}`)
    expect(none.status).toBe(404)
    expect(none.body.error).toBeDefined()
    expect((await app.request("GET", `/.well-known/openid-configuration/oauth/${dev.developerId}`)).status).toBe(404)
  })
})

describe("dynamic client registration", () => {
  test("a public client echoes its metadata and becomes an unverified agent", async () => {
    expect(client.client_id).toMatch(/^ag_/)
    expect(client.redirect_uris).toEqual(["http://127.0.0.1:7777/callback"])
    expect(client.application_type).toBe("native")
    expect(client.client_secret).toBeUndefined()
    const [row] = await app.query("SELECT origin, client_type, verified FROM oauth_clients WHERE agent_id = $1", [client.client_id])
    expect(row).toEqual({ origin: "dcr", clientType: "public", verified: false })
    const events = await app.query("SELECT data FROM events WHERE type = 'oauth.client.registered' AND developer_id = $1", [dev.developerId])
    expect(events.map((e: any) => e.data.agentId)).toContain(client.client_id)
  })

  test("refusals in RFC 7591's words", async () => {
    const bad = await app.request("POST", `/oauth/${dev.developerId}/register`, { body: { redirect_uris: ["http://evil.example/cb"] } })
    expect(bad.status).toBe(400)
    expect(bad.body.error).toBe("invalid_redirect_uri")
    expect(bad.headers.get("cache-control")).toBe("no-store")
    const implicit = await app.request("POST", `/oauth/${dev.developerId}/register`, { body: { redirect_uris: ["https://app.example/cb"], grant_types: ["implicit"] } })
    expect(implicit.body.error).toBe("invalid_client_metadata")
    const confidential = await app.request("POST", `/oauth/${dev.developerId}/register`, { body: { redirect_uris: ["https://app.example/cb"] } })
    expect(confidential.status).toBe(201)
    expect(confidential.body.token_endpoint_auth_method).toBe("client_secret_basic")
    expect(confidential.body.client_secret).toMatch(/^cs_/)
    expect(confidential.body.client_secret_expires_at).toBe(0)
  })
})

describe("authorization, tokens, refresh, introspection, revocation", () => {
  test("bad client or redirect: a page, never a redirect; later errors go back with state and iss", async () => {
    const unknown = await app.request("GET", `/oauth/${dev.developerId}/authorize?client_id=ag_nope&response_type=code`)
    expect(unknown.status).toBe(400)
    expect(unknown.headers.get("location")).toBeNull()
    expect(unknown.headers.get("content-type")).toContain("text/html")
    const foreignRedirect = await app.request("GET", `/oauth/${dev.developerId}/authorize?client_id=${client.client_id}&redirect_uri=${encodeURIComponent("https://evil.example/cb")}`)
    expect(foreignRedirect.status).toBe(400)
    expect(foreignRedirect.headers.get("location")).toBeNull()
    const noPkce = await app.request("GET", `/oauth/${dev.developerId}/authorize?client_id=${client.client_id}&response_type=code&state=s1`)
    expect(noPkce.status).toBe(303)
    const back = new URL(noPkce.headers.get("location")!)
    expect(back.origin + back.pathname).toBe("http://127.0.0.1:7777/callback")
    expect(Object.fromEntries(back.searchParams)).toEqual({ error: "invalid_request", error_description: "PKCE with code_challenge_method=S256 is required", state: "s1", iss: issuer })
    const { challenge } = pkce()
    const scope = await app.request("GET", `/oauth/${dev.developerId}/authorize?client_id=${client.client_id}&response_type=code&code_challenge=${challenge}&code_challenge_method=S256&scope=admin`)
    expect(new URL(scope.headers.get("location")!).searchParams.get("error")).toBe("invalid_scope")
    const target = await app.request("GET", `/oauth/${dev.developerId}/authorize?client_id=${client.client_id}&response_type=code&code_challenge=${challenge}&code_challenge_method=S256&resource=${encodeURIComponent("https://other.example/")}`)
    expect(new URL(target.headers.get("location")!).searchParams.get("error")).toBe("invalid_target")
  })

  test("sign-in, consent, code → at+jwt for the resource; refresh rotates; a reused refresh token revokes the grant", async () => {
    const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id, resource: "http://127.0.0.1:9/mcp", scope: "notes:read notes:write" })
    expect(flow.started.status).toBe(303)
    expect(flow.started.headers.get("set-cookie")).toMatch(/^__Host-oauth_ix=[^;]+; Path=\/; Max-Age=600; HttpOnly; Secure; SameSite=Lax$/)
    expect(flow.page!.status).toBe(200)
    expect(flow.page!.text).toContain("Test Agent")
    expect(flow.page!.text).toContain("(unverified)")
    expect(flow.page!.text).toContain("127.0.0.1:7777")
    expect(flow.page!.text).toContain("Read your notes")
    expect(flow.decided!.status).toBe(303)
    expect(flow.back!.searchParams.get("state")).toBe("st-1")
    expect(flow.back!.searchParams.get("iss")).toBe(issuer)
    const code = flow.back!.searchParams.get("code")!
    // /v1/token cannot redeem it
    const legacy = await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code, agentId: client.client_id } })
    expect(legacy.status).toBe(400)
    const token = await postForm(app, `/oauth/${dev.developerId}/token`, {
      grant_type: "authorization_code", code, code_verifier: flow.verifier, client_id: client.client_id,
      redirect_uri: "http://127.0.0.1:7777/callback", resource: "http://127.0.0.1:9/mcp"
    })
    expect(token.status).toBe(200)
    expect(token.headers.get("cache-control")).toBe("no-store")
    expect(token.body.token_type).toBe("Bearer")
    expect(token.body.scope).toBe("notes:read notes:write")
    expect(token.body.expires_in).toBe(3600)
    expect(token.body.refresh_token).toMatch(/^ref_/)
    const jwks = jose.createLocalJWKSet((await app.request("GET", "/.well-known/jwks.json")).body)
    const { payload, protectedHeader } = await jose.jwtVerify(token.body.access_token, jwks, {
      issuer, audience: "http://127.0.0.1:9/mcp", typ: "at+jwt", algorithms: ["RS256"], requiredClaims: ["client_id", "scope", "sub", "jti", "iat"]
    })
    expect(protectedHeader.typ).toBe("at+jwt")
    expect(payload.sub).toBe("person-1")
    expect(payload.client_id).toBe(client.client_id)
    expect(payload.scp).toEqual(["notes:read", "notes:write"])
    const [grant] = await app.query("SELECT resource_server_id, resource, client_id, auth_method, approval_method FROM grants WHERE id = $1", [payload.grnt])
    expect(grant).toEqual({ resourceServerId: rs.resourceServerId, resource: "http://127.0.0.1:9/mcp", clientId: client.client_id, authMethod: "developer", approvalMethod: "consent" })
    const [created] = await app.query("SELECT data FROM events WHERE type = 'grant.created' AND data->>'grantId' = $1", [payload.grnt])
    expect(created.data).toMatchObject({ resourceServerId: rs.resourceServerId, clientOrigin: "dcr", approvalMethod: "consent" })
    const approved = await app.query("SELECT action, metadata FROM audit_log WHERE grant_id = $1 AND action = 'service.oauth.authorization_approved'", [payload.grnt])
    expect(approved.map((a: any) => a.metadata)).toEqual([{ resourceServerId: rs.resourceServerId, clientId: client.client_id, approvalMethod: "consent" }])
    const issued = await app.query("SELECT data FROM events WHERE type = 'token.issued' AND data->>'tokenId' = $1", [payload.jti])
    expect(issued[0].data).toMatchObject({ via: "oauth", grantType: "authorization_code" })
    // a second use of the code: invalid_grant
    const again = await postForm(app, `/oauth/${dev.developerId}/token`, { grant_type: "authorization_code", code, code_verifier: flow.verifier, client_id: client.client_id, redirect_uri: "http://127.0.0.1:7777/callback" })
    expect(again.status).toBe(400)
    expect(again.body.error).toBe("invalid_grant")
    expect(Object.keys(again.body).sort()).toEqual(["error", "error_description"])
    // (the replay revoked that grant; a fresh authorization for the refresh checks)
    const second = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id })
    const tokens = (await postForm(app, `/oauth/${dev.developerId}/token`, {
      grant_type: "authorization_code", code: second.back!.searchParams.get("code")!, code_verifier: second.verifier, client_id: client.client_id, redirect_uri: "http://127.0.0.1:7777/callback"
    })).body
    expect(tokens.scope).toBe("notes:read")
    const introspect = (token: string, auth = `Basic ${btoa(`${rs.resourceServerId}:${rs.introspection.clientSecret}`)}`) =>
      postForm(app, `/oauth/${dev.developerId}/introspect`, { token }, { authorization: auth })
    const active = await introspect(tokens.access_token)
    expect(active.body).toMatchObject({ active: true, scope: "notes:read", client_id: client.client_id, sub: "person-1", aud: "http://127.0.0.1:9/mcp", iss: issuer })
    expect((await introspect(tokens.refresh_token)).body).toEqual({ active: false })
    // a changed payload, alg none, or a section-3 grant token: never active
    const [h, p, sig] = tokens.access_token.split(".")
    const forged = Buffer.from(JSON.stringify({ ...jose.decodeJwt(tokens.access_token), scope: "notes:write" })).toString("base64url")
    expect((await introspect(`${h}.${forged}.${sig}`)).body).toEqual({ active: false })
    const none = Buffer.from(JSON.stringify({ alg: "none", typ: "at+jwt" })).toString("base64url")
    expect((await introspect(`${none}.${p}.`)).body).toEqual({ active: false })
    const wrong = await introspect(tokens.access_token, "Basic " + btoa(`${rs.resourceServerId}:rss_wrong`))
    expect(wrong.status).toBe(401)
    expect(wrong.body.error).toBe("invalid_client")
    expect(wrong.headers.get("www-authenticate")).toBe(`Basic realm="${issuer}"`)
    const refreshed = await postForm(app, `/oauth/${dev.developerId}/token`, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id })
    expect(refreshed.status).toBe(200)
    expect(refreshed.body.refresh_token).not.toBe(tokens.refresh_token)
    const reused = await postForm(app, `/oauth/${dev.developerId}/token`, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id })
    expect(reused.body.error).toBe("invalid_grant")
    expect((await introspect(refreshed.body.access_token)).body).toEqual({ active: false })
  })

  test("revocation: a refresh token revokes its grant; an unknown token is 200; wrong client is invalid_client", async () => {
    const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id })
    const tokens = (await postForm(app, `/oauth/${dev.developerId}/token`, {
      grant_type: "authorization_code", code: flow.back!.searchParams.get("code")!, code_verifier: flow.verifier, client_id: client.client_id, redirect_uri: "http://127.0.0.1:7777/callback"
    })).body
    const unknown = await postForm(app, `/oauth/${dev.developerId}/revoke`, { token: "whatever", client_id: client.client_id })
    expect(unknown.status).toBe(200)
    expect(unknown.text).toBe("")
    const revoked = await postForm(app, `/oauth/${dev.developerId}/revoke`, { token: tokens.refresh_token, client_id: client.client_id })
    expect(revoked.status).toBe(200)
    const grant = (await app.query("SELECT g.status FROM grants g JOIN grant_tokens t ON t.grant_id = g.id WHERE t.jti = $1", [jose.decodeJwt(tokens.access_token).jti]))[0]
    expect(grant.status).toBe("revoked")
    const noClient = await postForm(app, `/oauth/${dev.developerId}/revoke`, { token: tokens.refresh_token, client_id: "ag_nobody" })
    expect(noClient.status).toBe(401)
    expect(noClient.body.error).toBe("invalid_client")
  })

  test("the token endpoint takes forms only, refuses repeated parameters and unknown grant types", async () => {
    const json = await app.request("POST", `/oauth/${dev.developerId}/token`, { body: { grant_type: "authorization_code" } })
    expect(json.status).toBe(400)
    expect(json.body.error).toBe("invalid_request")
    const twice = await app.request("POST", `/oauth/${dev.developerId}/token`, {
      rawBody: "grant_type=refresh_token&grant_type=refresh_token", headers: { "content-type": "application/x-www-form-urlencoded" }
    })
    expect(twice.body.error).toBe("invalid_request")
    const password = await postForm(app, `/oauth/${dev.developerId}/token`, { grant_type: "password", client_id: client.client_id })
    expect(password.body.error).toBe("unsupported_grant_type")
    const large = await postForm(app, `/oauth/${dev.developerId}/token`, { grant_type: "refresh_token", refresh_token: "x".repeat(70 * 1024) })
    expect(large.status).toBe(413)
    expect(large.body.error).toBe("invalid_request")
  })

  test("the consent page and its answers need the browser that started the flow", async () => {
    const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id, decide: "deny" })
    expect(flow.back!.searchParams.get("error")).toBe("access_denied")
    expect(flow.back!.searchParams.get("iss")).toBe(issuer)
    expect((await app.query("SELECT count(*)::int AS n FROM audit_log WHERE developer_id = $1 AND action = 'service.oauth.authorization_denied'", [dev.developerId]))[0].n).toBe(1)
    const other = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id, decide: "approve" })
    expect(other.back!.searchParams.get("code")).toBeTruthy()
    // a page opened without the cookie: refused, and the JSON approval too
    const third = await app.request("GET", `/oauth/${dev.developerId}/authorize?${new URLSearchParams({ response_type: "code", client_id: client.client_id, code_challenge: pkce().challenge, code_challenge_method: "S256" })}`)
    const ix = new URL(third.headers.get("location")!).searchParams.get("ix")!
    expect((await app.request("GET", `/consent?req=${ix}`)).status).toBe(403)
    const json = await app.request("POST", `/v1/consent/${ix}/approve`)
    expect(json.status).toBe(403)
  })
})
