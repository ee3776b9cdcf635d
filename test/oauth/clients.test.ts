/**
 * API agents as OAuth clients (decisions §22.3) and RFC 8693 token exchange (§22.6, §22.7): an agent
 * with redirect URIs is a public client of its developer; a client secret makes it confidential; with
 * `tokenExchange` it trades a person's access token for its own, a child grant whose token says who
 * acts (`act`), and which goes when the parent grant goes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as jose from "jose"
import { startTestApp, type TestApp } from "../support/app.ts"
import { authorizeThroughConsent, postForm, registerClient, registerServer } from "./support.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
let rs: any
let dcr: any
let agent: any
let secret: string
const EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
const AT = "urn:ietf:params:oauth:token-type:access_token"

const codeFor = async (clientId: string, scope?: string) => {
  const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId, ...(scope ? { scope } : {}) })
  return { code: flow.back!.searchParams.get("code")!, verifier: flow.verifier }
}

beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" } })
  dev = await app.signup({ plan: "enterprise" })
  rs = await registerServer(app, dev.apiKey)
  dcr = await registerClient(app, dev.developerId)
  agent = (await app.request("POST", "/v1/agents", {
    apiKey: dev.apiKey, body: { name: "Notes backend", scopes: ["notes:read"], redirectUris: ["http://127.0.0.1:7777/callback"] }
  })).body
  const issued = await app.request("POST", `/v1/agents/${agent.agentId}/client-secret`, { apiKey: dev.apiKey, body: { tokenExchange: true } })
  expect(issued.status).toBe(201)
  secret = issued.body.clientSecret
}, 120_000)
afterAll(async () => {
  await app?.stop()
})

const basic = (id: string, s: string) => `Basic ${btoa(`${encodeURIComponent(id)}:${encodeURIComponent(s)}`)}`

describe("API agents as clients", () => {
  test("a confidential API agent authenticates with client_secret_basic; a wrong secret is 401 invalid_client", async () => {
    expect(secret).toMatch(/^cs_/)
    const { code, verifier } = await codeFor(agent.agentId)
    const fields = { grant_type: "authorization_code", code, code_verifier: verifier, redirect_uri: "http://127.0.0.1:7777/callback" }
    const wrong = await postForm(app, `/oauth/${dev.developerId}/token`, fields, { authorization: basic(agent.agentId, "cs_wrong") })
    expect(wrong.status).toBe(401)
    expect(wrong.body.error).toBe("invalid_client")
    const both = await postForm(app, `/oauth/${dev.developerId}/token`, { ...fields, client_secret: secret }, { authorization: basic(agent.agentId, secret) })
    expect(both.body.error).toBe("invalid_request")
    const ok = await postForm(app, `/oauth/${dev.developerId}/token`, fields, { authorization: basic(agent.agentId, secret) })
    expect(ok.status).toBe(200)
    expect(jose.decodeJwt(ok.body.access_token).client_id).toBe(agent.agentId)
  })

  test("a verified API agent's ceiling is its own scopes within the resource's; a DCR client cannot be given a secret", async () => {
    const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: agent.agentId, scope: "notes:write" })
    expect(new URL(flow.started.headers.get("location")!).searchParams.get("error")).toBe("invalid_scope")
    expect((await app.request("POST", `/v1/agents/${dcr.client_id}/client-secret`, { apiKey: dev.apiKey, body: {} })).status).toBe(404)
  })
})

describe("token exchange (RFC 8693)", () => {
  const personToken = async () => {
    const { code, verifier } = await codeFor(dcr.client_id)
    return (await postForm(app, `/oauth/${dev.developerId}/token`, {
      grant_type: "authorization_code", code, code_verifier: verifier, client_id: dcr.client_id, redirect_uri: "http://127.0.0.1:7777/callback"
    })).body.access_token as string
  }

  test("the agent gets a child grant's token with act; no refresh token; revoking the parent revokes it", async () => {
    const subject = await personToken()
    const exchanged = await postForm(app, `/oauth/${dev.developerId}/token`, {
      grant_type: EXCHANGE, subject_token: subject, subject_token_type: AT, resource: "http://127.0.0.1:9/mcp", scope: "notes:read"
    }, { authorization: basic(agent.agentId, secret) })
    expect(exchanged.status).toBe(200)
    expect(exchanged.body).toMatchObject({ issued_token_type: AT, token_type: "Bearer", scope: "notes:read" })
    expect(exchanged.body.refresh_token).toBeUndefined()
    const claims = jose.decodeJwt(exchanged.body.access_token) as any
    const parent = jose.decodeJwt(subject) as any
    expect(claims.sub).toBe("person-1")
    expect(claims.client_id).toBe(agent.agentId)
    expect(claims.act).toEqual({ sub: `did:service:${agent.agentId}`, client_id: agent.agentId, act: { sub: `did:service:${dcr.client_id}`, client_id: dcr.client_id } })
    expect(claims.parentGrnt).toBe(parent.grnt)
    expect(claims.delegationDepth).toBe(1)
    const [child] = await app.query("SELECT parent_grant_id, delegation_depth, agent_id FROM grants WHERE id = $1", [claims.grnt])
    expect(child).toEqual({ parentGrantId: parent.grnt, delegationDepth: 1, agentId: agent.agentId })
    const audit = await app.query("SELECT action FROM audit_log WHERE developer_id = $1 AND action = 'service.oauth.token_exchanged'", [dev.developerId])
    expect(audit).toHaveLength(1)
    const introspect = (token: string) => postForm(app, `/oauth/${dev.developerId}/introspect`, { token }, { authorization: `Bearer ${dev.apiKey}` })
    expect((await introspect(exchanged.body.access_token)).body.act).toEqual(claims.act)
    expect((await app.request("DELETE", `/v1/grants/${parent.grnt}`, { apiKey: dev.apiKey })).status).toBe(204)
    expect((await introspect(exchanged.body.access_token)).body).toEqual({ active: false })
  })

  test("refusals: a wider scope, an actor_token, a client not allowed, a public client", async () => {
    const subject = await personToken()
    const fields = { grant_type: EXCHANGE, subject_token: subject, subject_token_type: AT }
    const wider = await postForm(app, `/oauth/${dev.developerId}/token`, { ...fields, scope: "notes:read notes:write" }, { authorization: basic(agent.agentId, secret) })
    expect(wider.body.error).toBe("invalid_scope")
    const actor = await postForm(app, `/oauth/${dev.developerId}/token`, { ...fields, actor_token: subject, actor_token_type: AT }, { authorization: basic(agent.agentId, secret) })
    expect(actor.body.error).toBe("invalid_request")
    const other = (await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "No exchange", scopes: ["notes:read"], redirectUris: ["https://x.example/cb"] } })).body
    const otherSecret = (await app.request("POST", `/v1/agents/${other.agentId}/client-secret`, { apiKey: dev.apiKey, body: {} })).body.clientSecret
    const notAllowed = await postForm(app, `/oauth/${dev.developerId}/token`, fields, { authorization: basic(other.agentId, otherSecret) })
    expect(notAllowed.body.error).toBe("unauthorized_client")
    const publicClient = await postForm(app, `/oauth/${dev.developerId}/token`, { ...fields, client_id: dcr.client_id })
    expect(publicClient.body.error).toBe("unauthorized_client")
  })
})

describe("agents that are OAuth clients (decisions §22.3)", () => {
  test("their profile in the agent's view, ?origin= lists them, and a self-registered one is read-only but for its status", async () => {
    const d = await app.signup({ plan: "enterprise" })
    await registerServer(app, d.apiKey, { identifier: "https://profiles.example/mcp" })
    const registered = await registerClient(app, d.developerId, { client_name: "Stranger" })
    const mine = await app.request("POST", "/v1/agents", { apiKey: d.apiKey, body: { name: "Plain", scopes: ["notes:read"] } })
    const view = await app.request("GET", `/v1/agents/${registered.client_id}`, { apiKey: d.apiKey })
    expect(view.body.oauth).toEqual({
      clientId: registered.client_id, origin: "dcr", clientType: "public", tokenEndpointAuthMethod: "none",
      redirectUris: ["http://127.0.0.1:7777/callback"], grantTypes: ["authorization_code", "refresh_token"], applicationType: "native",
      clientUri: null, tokenExchange: false, verified: false
    })
    expect((await app.request("GET", `/v1/agents/${mine.body.agentId}`, { apiKey: d.apiKey })).body.oauth).toBeUndefined()
    const dcr = await app.request("GET", "/v1/agents?origin=dcr", { apiKey: d.apiKey })
    expect(dcr.body.agents.map((a: any) => a.agentId)).toEqual([registered.client_id])
    expect((await app.request("GET", "/v1/agents?origin=cimd", { apiKey: d.apiKey })).body.agents).toEqual([])
    expect((await app.request("GET", "/v1/agents?origin=other", { apiKey: d.apiKey })).status).toBe(400)
    const renamed = await app.request("PATCH", `/v1/agents/${registered.client_id}`, { apiKey: d.apiKey, body: { name: "Mine now" } })
    expect([renamed.status, renamed.body.code]).toEqual([409, "CONFLICT"])
    const suspended = await app.request("PATCH", `/v1/agents/${registered.client_id}`, { apiKey: d.apiKey, body: { status: "suspended" } })
    expect(suspended.status).toBe(200)
    expect(suspended.body).toMatchObject({ status: "suspended", name: "Stranger", oauth: { origin: "dcr" } })
    expect((await app.request("PATCH", `/v1/agents/${mine.body.agentId}`, { apiKey: d.apiKey, body: { name: "Renamed" } })).status).toBe(200)
  })
})
