/**
 * An OAuth authorization is a grant like every other (decisions §20, §22): the gate decides once the
 * person is known (a policy deny goes back as access_denied, a policy allow or a sandbox developer
 * approves without the consent page), a suspended client gets unauthorized_client, and a resource
 * server's settings change under the same rules as at registration. Policies see the resource server,
 * resource and client origin; the person's permissions name the client and the resource.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { authorizeThroughConsent, postForm, registerClient, registerServer } from "./support.ts"

let app: TestApp

beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" } })
}, 120_000)
afterAll(async () => {
  await app?.stop()
})

const setUp = async (mode: "live" | "sandbox" = "live") => {
  const dev = await app.signup({ plan: "enterprise", mode })
  const rs = await registerServer(app, dev.apiKey, { identifier: `https://mcp-${dev.developerId.slice(-8).toLowerCase()}.example/mcp` })
  const client = await registerClient(app, dev.developerId)
  return { dev, rs, client }
}

describe("the gate decides every OAuth authorization", () => {
  test("a policy deny: access_denied back to the client with state and iss, nothing granted", async () => {
    const { dev, client } = await setUp()
    expect((await app.request("POST", "/v1/policies", { apiKey: dev.apiKey, body: { name: "no writes", effect: "deny", scopes: ["notes:write"] } })).status).toBe(201)
    const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id, scope: "notes:write", state: "deny-me" })
    const back = new URL(flow.resumed!.headers.get("location")!)
    expect(back.searchParams.get("error")).toBe("access_denied")
    expect(back.searchParams.get("state")).toBe("deny-me")
    expect(back.searchParams.get("iss")).toBe(`${app.config.publicBaseUrl}/oauth/${dev.developerId}`)
    expect(await app.query("SELECT status FROM auth_requests WHERE id = $1", [flow.interaction])).toEqual([{ status: "denied" }])
    expect(await app.query("SELECT id FROM grants WHERE developer_id = $1", [dev.developerId])).toEqual([])
  })

  test("a policy allow approves after sign-in without the consent page; the grant says policy", async () => {
    const { dev, client } = await setUp()
    const policy = await app.request("POST", "/v1/policies", { apiKey: dev.apiKey, body: { name: "reads are fine", effect: "allow", scopes: ["notes:read"] } })
    expect(policy.status).toBe(201)
    const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id })
    const back = new URL(flow.resumed!.headers.get("location")!)
    expect(back.origin).toBe("http://127.0.0.1:7777")
    const code = back.searchParams.get("code")!
    expect(code).toBeTruthy()
    const token = await postForm(app, `/oauth/${dev.developerId}/token`, {
      grant_type: "authorization_code", code, code_verifier: flow.verifier, client_id: client.client_id, redirect_uri: "http://127.0.0.1:7777/callback"
    })
    expect(token.status).toBe(200)
    const [grant] = await app.query("SELECT approval_method, policy_id FROM grants WHERE developer_id = $1", [dev.developerId])
    expect(grant.approvalMethod).toBe("policy")
    expect(grant.policyId).toBe(policy.body.policyId ?? policy.body.id)
  })

  test("a sandbox developer's authorization is approved once the person signed in", async () => {
    const { dev, client } = await setUp("sandbox")
    const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id })
    expect(new URL(flow.resumed!.headers.get("location")!).searchParams.get("code")).toBeTruthy()
    expect(await app.query("SELECT approval_method FROM grants WHERE developer_id = $1", [dev.developerId])).toEqual([{ approvalMethod: "sandbox" }])
  })

  test("a suspended client: unauthorized_client at /authorize and at /token", async () => {
    const { dev, client } = await setUp()
    const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id })
    const code = flow.back!.searchParams.get("code")!
    const suspended = await app.request("PATCH", `/v1/agents/${client.client_id}`, { apiKey: dev.apiKey, body: { status: "suspended" } })
    expect(suspended.status).toBe(200)
    const token = await postForm(app, `/oauth/${dev.developerId}/token`, {
      grant_type: "authorization_code", code, code_verifier: flow.verifier, client_id: client.client_id, redirect_uri: "http://127.0.0.1:7777/callback"
    })
    expect(token.status).toBe(400)
    expect(token.body.error).toBe("unauthorized_client")
    const again = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id })
    expect(new URL(again.started.headers.get("location")!).searchParams.get("error")).toBe("unauthorized_client")
  })
})

describe("changing a resource server", () => {
  test("PATCH changes settings under the registration rules; the identifier is immutable; the secret rotates with 24 h of grace", async () => {
    const { dev, rs } = await setUp()
    const immutable = await app.request("PATCH", `/v1/resource-servers/${rs.resourceServerId}`, { apiKey: dev.apiKey, body: { identifier: "https://elsewhere.example/" } })
    expect(immutable.status).toBe(400)
    expect(immutable.body.message).toBe("identifier is immutable")
    const renamed = await app.request("PATCH", `/v1/resource-servers/${rs.resourceServerId}`, { apiKey: dev.apiKey, body: { name: "Notes v2", accessTokenTtl: "15m" } })
    expect(renamed.status).toBe(200)
    expect(renamed.body.name).toBe("Notes v2")
    expect(renamed.body.accessTokenTtl).toBe("15m")
    const badDefault = await app.request("PATCH", `/v1/resource-servers/${rs.resourceServerId}`, { apiKey: dev.apiKey, body: { defaultScopes: ["nope"] } })
    expect(badDefault.body.code).toBe("INVALID_SCOPES")
    const events = await app.query("SELECT data FROM events WHERE developer_id = $1 AND type = 'resource_server.updated'", [dev.developerId])
    expect(events.map((e: any) => e.data)).toEqual([{ resourceServerId: rs.resourceServerId, changed: ["accessTokenTtl", "name"] }])
    const rotated = await app.request("POST", `/v1/resource-servers/${rs.resourceServerId}/rotate-secret`, { apiKey: dev.apiKey })
    expect(rotated.status).toBe(201)
    for (const secret of [rs.introspection.clientSecret, rotated.body.clientSecret]) {
      const res = await postForm(app, `/oauth/${dev.developerId}/introspect`, { token: "x" }, { authorization: `Basic ${btoa(`${rs.resourceServerId}:${secret}`)}` })
      expect(res.body).toEqual({ active: false })
    }
  })

  test("deleting a resource server revokes its grants", async () => {
    const { dev, rs, client } = await setUp()
    const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id })
    await postForm(app, `/oauth/${dev.developerId}/token`, {
      grant_type: "authorization_code", code: flow.back!.searchParams.get("code")!, code_verifier: flow.verifier, client_id: client.client_id, redirect_uri: "http://127.0.0.1:7777/callback"
    })
    const listed = await app.request("GET", `/v1/grants?resourceServerId=${rs.resourceServerId}`, { apiKey: dev.apiKey })
    expect(listed.body.grants.map((g: any) => g.agentId)).toEqual([client.client_id])
    expect((await app.request("GET", "/v1/grants?resourceServerId=rs_other", { apiKey: dev.apiKey })).body.grants).toEqual([])
    expect((await app.request("DELETE", `/v1/resource-servers/${rs.resourceServerId}`, { apiKey: dev.apiKey })).status).toBe(204)
    expect(await app.query("SELECT status FROM grants WHERE developer_id = $1", [dev.developerId])).toEqual([{ status: "revoked" }])
    const [deleted] = await app.query("SELECT data FROM events WHERE developer_id = $1 AND type = 'resource_server.deleted'", [dev.developerId])
    expect(deleted.data).toEqual({ resourceServerId: rs.resourceServerId, grantsRevoked: 1 })
    expect((await app.request("GET", `/.well-known/oauth-authorization-server/oauth/${dev.developerId}`)).status).toBe(404)
  })
})

describe("policies see what an OAuth authorization is for (decisions §22.5)", () => {
  test("resourceServerId, resource and clientOrigin are in the context at authorize, refresh and the dry run", async () => {
    const { dev, rs, client } = await setUp()
    const calendar = await registerServer(app, dev.apiKey, { identifier: `https://calendar-${dev.developerId.slice(-8).toLowerCase()}.example/mcp` })
    const cedar = [
      `@id("no-strangers-on-notes") forbid(principal, action == Action::"authorize", resource)`,
      `  when { context has clientOrigin && context.clientOrigin == "dcr" && context has resourceServerId && context.resourceServerId == "${rs.resourceServerId}" };`,
      `@id("no-calendar-refresh") forbid(principal, action == Action::"token.refresh", resource) when { context has resource && context.resource == "${calendar.identifier}" };`
    ].join("\n")
    const synced = await app.request("POST", "/v1/policies/sync", { apiKey: dev.apiKey, body: { format: "cedar", version: "1", content: Buffer.from(cedar).toString("base64"), activate: true } })
    expect(synced.status).toBe(201)
    // a self-registered client, for the notes server: denied
    const denied = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id, resource: rs.identifier })
    expect(new URL(denied.resumed!.headers.get("location")!).searchParams.get("error")).toBe("access_denied")
    // the developer's own client, same server: the person decides
    const own = (await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "Own", scopes: ["notes:read"], redirectUris: ["http://127.0.0.1:7777/callback"] } })).body
    const allowed = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: own.agentId, resource: rs.identifier })
    expect(allowed.page!.status).toBe(200)
    expect(allowed.back!.searchParams.get("code")).toBeTruthy()
    // the self-registered client for the calendar: granted, but its refresh is refused by resource
    const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id, resource: calendar.identifier })
    const tokens = (await postForm(app, `/oauth/${dev.developerId}/token`, {
      grant_type: "authorization_code", code: flow.back!.searchParams.get("code")!, code_verifier: flow.verifier, client_id: client.client_id,
      redirect_uri: "http://127.0.0.1:7777/callback", resource: calendar.identifier
    })).body
    expect(tokens.refresh_token).toMatch(/^ref_/)
    const refused = await postForm(app, `/oauth/${dev.developerId}/token`, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id })
    expect([refused.status, refused.body.error]).toEqual([400, "invalid_grant"])
    const logged = await app.query("SELECT action, policy_id FROM policy_decisions WHERE developer_id = $1 AND effect = 'deny' ORDER BY created_at", [dev.developerId])
    expect(logged.map((d: any) => [d.action, d.policyId])).toEqual([["authorize", "no-strangers-on-notes"], ["token.refresh", "no-calendar-refresh"]])
    // the dry run takes the same facts; without them (a section-3 request) the rule has no opinion
    const asked = { agentId: client.client_id, principalId: "person-1", scopes: ["notes:read"] }
    const dry = await app.request("POST", "/v1/policies/evaluate", {
      apiKey: dev.apiKey, body: { ...asked, oauth: { resourceServerId: rs.resourceServerId, resource: rs.identifier, clientOrigin: "dcr" } }
    })
    expect([dry.status, dry.body.effect, dry.body.policyId]).toEqual([200, "deny", "no-strangers-on-notes"])
    expect((await app.request("POST", "/v1/policies/evaluate", { apiKey: dev.apiKey, body: asked })).body.effect).toBeNull()
  })
})

describe("the person's permissions name an OAuth grant's client and resource (decisions §22.5)", () => {
  test("GET /v1/principal/grants and the permissions page", async () => {
    const { dev, rs, client } = await setUp()
    const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id, principalId: "person-7" })
    expect(flow.back!.searchParams.get("code")).toBeTruthy()
    // a section-3 grant for the same person, beside it
    const agent = (await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "Plain agent", scopes: ["email:read"] } })).body
    const asked = (await app.request("POST", "/v1/authorize", { apiKey: dev.apiKey, body: { agentId: agent.agentId, principalId: "person-7", scopes: ["email:read"] } })).body
    expect((await app.request("POST", `/v1/consent/${asked.authRequestId}/approve`)).status).toBe(200)
    const session = (await app.request("POST", "/v1/principal-sessions", { apiKey: dev.apiKey, body: { principalId: "person-7" } })).body.sessionToken
    const listed = (await app.request("GET", "/v1/principal/grants", { bearer: session })).body.grants
    const oauth = listed.find((g: any) => g.agentId === client.client_id)
    expect(oauth.oauth).toEqual({ clientName: "Test Agent", clientOrigin: "dcr", resourceServerId: rs.resourceServerId, resource: rs.identifier, resourceName: "Notes MCP" })
    // the scopes as the resource server described them
    expect(oauth.scopeDescriptions).toEqual({ "notes:read": "Read your notes" })
    expect(listed.find((g: any) => g.agentId === agent.agentId).oauth).toBeUndefined()
    const page = await app.request("POST", "/permissions/view", {
      rawBody: new URLSearchParams({ session }).toString(), headers: { "content-type": "application/x-www-form-urlencoded" }
    })
    expect(page.status).toBe(200)
    const card = page.text.slice(page.text.indexOf(`data-grant="${oauth.grantId}"`))
    expect(card).toContain('<h2 class="agent-name">Test Agent</h2>')
    expect(card).toContain('<span class="unverified">Unverified application. </span>On <strong class="resource-name">Notes MCP</strong>')
    expect(card).toContain(`<code class="resource-id">${rs.identifier}</code>`)
    expect(card).toContain("Read your notes")
  })
})
