/**
 * The OAuth endpoints' own limits (decisions §22.9) and CORS (§22.4):
 * - `/token` per client_id (form or Basic) on top of the per-address limit, 429 in OAuth's shape;
 * - `/register` per developer per clock hour, on top of 20 per address;
 * - introspection per resource server; `/revoke` on the developer's containment budget (§22.8);
 * - CORS `*` on the metadata, PRM, JWKS, `/register`, `/token` and `/revoke`, errors and refusals
 *   included, with a preflight; none on `/authorize` or `/introspect`.
 * The service runs on TestClock, so a window never turns mid-test.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { postForm, registerClient, registerServer } from "./support.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
let rs: any

beforeAll(async () => {
  app = await startTestApp({
    testClock: true,
    // TRUST_PROXY: the registrations below come from several addresses (X-Forwarded-For)
    env: {
      TRUST_PROXY: "1", RATE_LIMIT_OAUTH_TOKEN_PER_CLIENT: "3", RATE_LIMIT_OAUTH_REGISTER_PER_DEVELOPER: "4", RATE_LIMIT_OAUTH_INTROSPECT: "2",
      RATE_LIMIT_CONTAINMENT: "3"
    }
  })
  dev = await app.signup({ plan: "enterprise" })
  rs = await registerServer(app, dev.apiKey)
}, 120_000)
afterAll(async () => {
  await app?.stop()
})

const token = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
  postForm(app, `/oauth/${dev.developerId}/token`, { grant_type: "refresh_token", refresh_token: "ref_unknown", ...fields }, headers)

describe("rate limits", () => {
  test("/token: 3 a minute per client_id, whether named in the form or by Basic; other clients unaffected; the next minute resets", async () => {
    const client = await registerClient(app, dev.developerId, { client_name: "busy" })
    const other = await registerClient(app, dev.developerId, { client_name: "quiet" })
    expect((await token({ client_id: client.client_id })).body.error).toBe("invalid_grant")
    expect((await token({ client_id: client.client_id })).body.error).toBe("invalid_grant")
    // Basic with the same id (a public client has no secret: invalid_client, but counted)
    expect((await token({}, { authorization: `Basic ${btoa(`${client.client_id}:x`)}` })).status).toBe(401)
    const refused = await token({ client_id: client.client_id })
    expect(refused.status).toBe(429)
    expect(refused.body).toEqual({ error: "temporarily_unavailable", error_description: expect.stringContaining("retry in") })
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
    expect(refused.headers.get("ratelimit-policy")).toBe('"client";q=3;w=60')
    expect(refused.headers.get("cache-control")).toBe("no-store")
    expect(refused.headers.get("access-control-allow-origin")).toBe("*")
    expect((await token({ client_id: other.client_id })).body.error).toBe("invalid_grant")
    await app.adjust("60 seconds")
    expect((await token({ client_id: client.client_id })).body.error).toBe("invalid_grant")
  })

  test("/register: 4 an hour per developer, whatever the address; another developer's issuer is unaffected", async () => {
    const owner = await app.signup({ plan: "enterprise" })
    await registerServer(app, owner.apiKey, { identifier: "https://register-limit.example/mcp" })
    const register = (forwardedFor: string) =>
      app.request("POST", `/oauth/${owner.developerId}/register`, {
        body: { redirect_uris: ["http://127.0.0.1:7777/callback"], token_endpoint_auth_method: "none" }, headers: { "x-forwarded-for": forwardedFor }
      })
    for (let i = 0; i < 4; i++) expect((await register(`203.0.113.${i}`)).status).toBe(201)
    const refused = await register("203.0.113.99")
    expect(refused.status).toBe(429)
    expect(refused.body.error).toBe("temporarily_unavailable")
    expect(refused.headers.get("ratelimit-policy")).toBe('"hourly-issuer";q=4;w=3600')
    expect(refused.headers.get("access-control-allow-origin")).toBe("*")
    expect(await app.query("SELECT count(*)::int AS n FROM oauth_clients WHERE developer_id = $1", [owner.developerId])).toEqual([{ n: 4 }])
    // the first developer's issuer still registers
    await registerClient(app, dev.developerId)
    await app.adjust("1 hour")
    expect((await register("203.0.113.100")).status).toBe(201)
  })

  test("introspection: 2 a minute per resource server; the developer's API key is counted apart", async () => {
    await app.adjust("60 seconds")
    const basic = { authorization: `Basic ${btoa(`${rs.resourceServerId}:${rs.introspection.clientSecret}`)}` }
    const introspect = (headers: Record<string, string>) => postForm(app, `/oauth/${dev.developerId}/introspect`, { token: "not-a-token" }, headers)
    expect((await introspect(basic)).body).toEqual({ active: false })
    expect((await introspect(basic)).body).toEqual({ active: false })
    const refused = await introspect(basic)
    expect([refused.status, refused.body.error]).toEqual([429, "temporarily_unavailable"])
    expect(refused.headers.get("access-control-allow-origin")).toBeNull()
    expect((await introspect({ authorization: `Bearer ${dev.apiKey}` })).body).toEqual({ active: false })
  })
})

test("/revoke has a per-issuer budget of the containment budget's size, apart from the developer's own revocations", async () => {
  await app.adjust("60 seconds")
  const client = await registerClient(app, dev.developerId, { client_name: "revoker" })
  const revoke = () => postForm(app, `/oauth/${dev.developerId}/revoke`, { token: "ref_unknown", client_id: client.client_id })
  for (let i = 0; i < 3; i++) expect((await revoke()).status).toBe(200)
  const refused = await revoke()
  expect([refused.status, refused.body.error, refused.headers.get("ratelimit-policy")]).toEqual([429, "temporarily_unavailable", '"oauth-revoke";q=3;w=60'])
  // anyone may call /revoke (counted before the client authenticates): spending it leaves the developer's
  // own emergency revocations untouched
  for (let i = 0; i < 3; i++) expect((await app.request("POST", "/v1/tokens/revoke", { apiKey: dev.apiKey, body: { jti: "tok_unknown" } })).status).toBe(204)
  // another issuer's budget is its own
  const other = await app.signup({ plan: "enterprise" })
  await registerServer(app, other.apiKey, { identifier: "https://other-revoke.example/mcp" })
  const otherClient = await registerClient(app, other.developerId, { client_name: "revoker" })
  expect((await postForm(app, `/oauth/${other.developerId}/revoke`, { token: "ref_unknown", client_id: otherClient.client_id })).status).toBe(200)
})

describe("CORS for browser MCP clients", () => {
  test("a preflight on /token, /register, /revoke and the metadata answers 204 with the method and headers", async () => {
    for (const [path, method] of [
      [`/oauth/${dev.developerId}/token`, "POST"],
      [`/oauth/${dev.developerId}/register`, "POST"],
      [`/oauth/${dev.developerId}/revoke`, "POST"],
      [`/.well-known/oauth-authorization-server/oauth/${dev.developerId}`, "GET"],
      [new URL(rs.protectedResourceMetadataUrl).pathname, "GET"],
      ["/.well-known/jwks.json", "GET"]
    ] as const) {
      const res = await app.request("OPTIONS", path, {
        headers: { origin: "https://mcp-client.example", "access-control-request-method": method, "access-control-request-headers": "content-type, mcp-protocol-version" }
      })
      expect([path, res.status]).toEqual([path, 204])
      expect(res.headers.get("access-control-allow-origin")).toBe("*")
      expect(res.headers.get("access-control-allow-methods")).toBe(`${method}, OPTIONS`)
      expect(res.headers.get("access-control-allow-headers")).toBe("authorization, content-type, mcp-protocol-version")
      expect(res.headers.get("access-control-allow-credentials")).toBeNull()
    }
  })

  test("answers carry CORS, errors included; /authorize and /introspect never do", async () => {
    const origin = { origin: "https://mcp-client.example" }
    const jwks = await app.request("GET", "/.well-known/jwks.json", { headers: origin })
    expect(jwks.headers.get("access-control-allow-origin")).toBe("*")
    const unknownIssuer = await app.request("GET", "/.well-known/oauth-authorization-server/oauth/dev_nobody", { headers: origin })
    expect([unknownIssuer.status, unknownIssuer.headers.get("access-control-allow-origin")]).toEqual([404, "*"])
    const badGrant = await token({ client_id: "ag_nobody" }, origin)
    expect([badGrant.status, badGrant.body.error, badGrant.headers.get("access-control-allow-origin")]).toEqual([401, "invalid_client", "*"])
    expect(badGrant.headers.get("access-control-expose-headers")).toContain("www-authenticate")
    const badRegistration = await app.request("POST", `/oauth/${dev.developerId}/register`, { body: { redirect_uris: ["http://evil.example/cb"] }, headers: origin })
    expect([badRegistration.status, badRegistration.headers.get("access-control-allow-origin")]).toEqual([400, "*"])
    const authorize = await app.request("GET", `/oauth/${dev.developerId}/authorize?client_id=ag_nobody`, { headers: origin })
    expect(authorize.headers.get("access-control-allow-origin")).toBeNull()
    const preflight = await app.request("OPTIONS", `/oauth/${dev.developerId}/introspect`, { headers: { ...origin, "access-control-request-method": "POST" } })
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull()
    expect((await app.request("OPTIONS", `/oauth/${dev.developerId}/authorize`, { headers: origin })).headers.get("access-control-allow-origin")).toBeNull()
  })
})
