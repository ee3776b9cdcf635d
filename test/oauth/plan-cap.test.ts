/**
 * Clients that register themselves (RFC 7591, decisions §22.3) are agent rows, but not the developer's
 * agents: anyone may register one while registration is open, so they must not fill the plan's agent
 * cap and lock the developer out of `POST /v1/agents` (402). They have a cap of their own,
 * `oauthClients` (at the cap `/register` answers invalid_client_metadata), and resource servers
 * theirs, `resourceServers` (402), both shown in the entitlements.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { freeWith, plansFile } from "../billing/support.ts"
import { pkce, registerClient, registerServer } from "./support.ts"

let app: TestApp
// client ID metadata documents, served on loopback (OAUTH_ALLOW_PRIVATE_HOSTS, tests only)
const docs = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: (request) =>
    Response.json({ client_id: request.url, client_name: "Doc Agent", redirect_uris: ["http://127.0.0.1:7777/callback"] }, { headers: { "cache-control": "max-age=600" } })
})
beforeAll(async () => {
  app = await startTestApp({
    env: { RATE_LIMIT_SCALE: "100", OAUTH_ALLOW_PRIVATE_HOSTS: "true", PLANS_FILE: plansFile(freeWith({ agents: 2, resourceServers: 2, oauthClients: 3 })) }
  })
})
afterAll(async () => {
  docs.stop(true)
  await app?.stop()
})

test("self-registered clients do not count toward the agent cap; the developer's own agents do", async () => {
  const dev = await app.signup()
  await registerServer(app, dev.apiKey)
  for (let i = 0; i < 3; i++) await registerClient(app, dev.developerId, { client_name: `stranger ${i}` })
  const create = (name: string) => app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name, scopes: ["notes:read"] } })
  expect((await create("mine 1")).status).toBe(201)
  expect((await create("mine 2")).status).toBe(201)
  const refused = await create("mine 3")
  expect([refused.status, refused.body.code]).toEqual([402, "PLAN_LIMIT_EXCEEDED"])
})

test("resource servers stop at the plan's resourceServers cap with 402", async () => {
  const dev = await app.signup()
  await registerServer(app, dev.apiKey, { identifier: "https://one.example/mcp" })
  await registerServer(app, dev.apiKey, { identifier: "https://two.example/mcp" })
  const third = await app.request("POST", "/v1/resource-servers", {
    apiKey: dev.apiKey, body: { identifier: "https://three.example/mcp", name: "Third", scopes: [{ name: "a" }], login: {} }
  })
  expect([third.status, third.body.code]).toEqual([402, "PLAN_LIMIT_EXCEEDED"])
  expect(third.body.message).toBe("The Free plan allows 2 resource servers")
  expect(await app.query("SELECT count(*)::int AS n FROM resource_servers WHERE developer_id = $1", [dev.developerId])).toEqual([{ n: 2 }])
  const usage = (await app.request("GET", "/v1/billing/entitlements", { apiKey: dev.apiKey })).body.usage
  expect(usage.resourceServers).toEqual({ used: 2, limit: 2, pct: 100 })
})

test("self-registered clients stop at the plan's oauthClients cap: /register says client limit reached; API agents are not counted", async () => {
  const dev = await app.signup()
  await registerServer(app, dev.apiKey, { identifier: "https://clients.example/mcp" })
  expect((await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "mine", scopes: ["notes:read"] } })).status).toBe(201)
  for (let i = 0; i < 3; i++) await registerClient(app, dev.developerId, { client_name: `stranger ${i}` })
  const full = await app.request("POST", `/oauth/${dev.developerId}/register`, {
    body: { redirect_uris: ["http://127.0.0.1:7777/callback"], token_endpoint_auth_method: "none" }
  })
  expect(full.status).toBe(400)
  expect(full.body).toEqual({ error: "invalid_client_metadata", error_description: "client limit reached" })
  expect(await app.query("SELECT count(*)::int AS n FROM oauth_clients WHERE developer_id = $1", [dev.developerId])).toEqual([{ n: 3 }])
  const usage = (await app.request("GET", "/v1/billing/entitlements", { apiKey: dev.apiKey })).body.usage
  expect(usage.oauthClients).toEqual({ used: 3, limit: 3, pct: 100 })
  // a deleted registration frees its place
  expect((await app.request("DELETE", `/v1/agents/${(await app.query("SELECT agent_id FROM oauth_clients WHERE developer_id = $1 LIMIT 1", [dev.developerId]))[0].agentId}`, { apiKey: dev.apiKey })).status).toBe(204)
  await registerClient(app, dev.developerId, { client_name: "next" })
})

test("a CIMD client's first use counts toward oauthClients too: past the cap /authorize refuses it and makes no agent", async () => {
  const dev = await app.signup()
  await registerServer(app, dev.apiKey, { identifier: "https://cimd-cap.example/mcp", openRegistration: { dcr: true, cimd: true } })
  for (let i = 0; i < 2; i++) await registerClient(app, dev.developerId, { client_name: `stranger ${i}` })
  const start = (path: string) => app.request("GET", `/oauth/${dev.developerId}/authorize?${new URLSearchParams({
    response_type: "code", client_id: `http://127.0.0.1:${docs.port}${path}`, redirect_uri: "http://127.0.0.1:7777/callback",
    code_challenge: pkce().challenge, code_challenge_method: "S256", state: "s"
  })}`)
  expect((await start("/third.json")).status).toBe(303)
  const refused = await start("/fourth.json")
  expect(refused.status).toBe(400)
  expect(refused.text).toContain("no more self-registered clients")
  expect(await app.query("SELECT origin, count(*)::int AS n FROM oauth_clients WHERE developer_id = $1 GROUP BY origin ORDER BY origin", [dev.developerId]))
    .toEqual([{ origin: "cimd", n: 1 }, { origin: "dcr", n: 2 }])
})
