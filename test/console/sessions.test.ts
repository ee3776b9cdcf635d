/**
 * The console's sign-in, sessions and form protections (decisions §23), over HTTP: a key exchanged for
 * a __Host- cookie bound to it, a read key's console refused every change, deleting the key ending its
 * sessions, CSRF tokens and Origin checks on every form, the CSP of every page, and every action
 * being an API operation (what it did is what the API shows).
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { signIn } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(async () => {
  await app.stop()
})

test("an API key is exchanged for a __Host- session cookie: HttpOnly, Secure, SameSite=Strict, 12 hours; the key itself is not stored", async () => {
  const d = await app.signup()
  const c = await signIn(app, d.apiKey)
  expect(c.signInResponse.status).toBe(303)
  expect(c.signInResponse.headers.get("location")).toBe("/console/overview")
  const setCookie = c.signInResponse.headers.get("set-cookie")!
  expect(setCookie).toMatch(/^__Host-console=[A-Za-z0-9_-]{43}; Path=\/; Secure; HttpOnly; SameSite=Strict; Max-Age=43200$/)
  const overview = await c.get("/console/overview")
  expect(overview.status).toBe(200)
  expect(overview.text).toContain("<h1>Overview</h1>")
  const csp = overview.headers.get("content-security-policy")!
  expect(csp).toContain("default-src 'none'")
  // the one inline script, by its hash; it talks to this origin only
  expect(csp).toMatch(/script-src 'sha256-[A-Za-z0-9+/]+=*'(;|$)/)
  expect(csp).toContain("connect-src 'self'")
  expect(csp).toContain("frame-ancestors 'none'")
  expect(overview.headers.get("cache-control")).toBe("no-store")
  // no third-party asset: nothing but our own paths
  expect(overview.text).not.toMatch(/(src|href)="(https?:)?\/\//)
  const rows = await app.query<{ keyCiphertext: string; expiresAt: Date; createdAt: Date }>(
    "SELECT key_ciphertext, expires_at, created_at FROM console_sessions WHERE developer_id = $1", [d.developerId])
  expect(rows).toHaveLength(1)
  expect(rows[0]!.keyCiphertext).not.toContain(d.apiKey.slice(8))
  expect(new Date(rows[0]!.expiresAt).getTime() - new Date(rows[0]!.createdAt).getTime()).toBe(12 * 3600_000)
})

test("a wrong key answers the form again with 401; no session is made", async () => {
  const c = await signIn(app, "sk_live_" + "x".repeat(43))
  expect(c.signInResponse.status).toBe(401)
  expect(await c.signInResponse.text()).toContain("That API key was not accepted.")
  expect(c.cookie.startsWith("__Host-console=")).toBe(false)
})

test("every action is an API operation: creating an agent in the console is what GET /v1/agents shows", async () => {
  const d = await app.signup()
  const c = await signIn(app, d.apiKey)
  const created = await c.post("/console/agents/create", { csrf: c.csrf, name: "Inbox helper", scopes: "email:read, calendar:read", redirectUris: "https://app.example/cb" })
  expect(created.status).toBe(200)
  expect(created.text).toContain("Agent <strong>Inbox helper</strong> created")
  const agents = await app.request("GET", "/v1/agents", { apiKey: d.apiKey })
  expect(agents.body.agents.map((a: any) => [a.name, a.scopes, a.redirectUris])).toEqual([["Inbox helper", ["email:read", "calendar:read"], ["https://app.example/cb"]]])
  // the API's refusal is shown as the API said it
  const bad = await c.post("/console/agents/create", { csrf: c.csrf, name: "x", scopes: "email:read", redirectUris: "ftp://app.example/cb" })
  expect(bad.text).toContain("Refused")
  expect(bad.text).toContain("<strong>INVALID_REDIRECT_URI</strong>")
  expect((await app.request("GET", "/v1/agents", { apiKey: d.apiKey })).body.agents).toHaveLength(1)
})

test("a form without the session's CSRF token, or posted from another site, is refused and changes nothing", async () => {
  const d = await app.signup()
  const c = await signIn(app, d.apiKey)
  const noToken = await c.post("/console/agents/create", { name: "A", scopes: "email:read" })
  expect(noToken.status).toBe(403)
  const wrongToken = await c.post("/console/agents/create", { csrf: "x".repeat(32), name: "A", scopes: "email:read" })
  expect(wrongToken.status).toBe(403)
  const crossSite = await c.post("/console/agents/create", { csrf: c.csrf, name: "A", scopes: "email:read" }, { "sec-fetch-site": "cross-site" })
  expect(crossSite.status).toBe(403)
  const otherOrigin = await c.post("/console/agents/create", { csrf: c.csrf, name: "A", scopes: "email:read" }, { origin: "https://evil.example" })
  expect(otherOrigin.status).toBe(403)
  expect((await app.request("GET", "/v1/agents", { apiKey: d.apiKey })).body.agents).toEqual([])
  // the sign-in form has its own token (a double-submit cookie)
  const signInNoCookie = await fetch(`${app.url}/console/sign-in`, {
    method: "POST", redirect: "manual", headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ apiKey: d.apiKey, csrf: "abc" }).toString()
  })
  expect(signInNoCookie.status).toBe(403)
  expect(signInNoCookie.headers.get("set-cookie")).toBeNull()
})

test("a read key gives a read-only console: no forms, and a forged action is refused by the API", async () => {
  const d = await app.signup()
  const key = await app.request("POST", "/v1/keys", { apiKey: d.apiKey, body: { name: "auditor", scope: "read" } })
  const c = await signIn(app, key.body.apiKey)
  const agents = await c.get("/console/agents")
  expect(agents.status).toBe(200)
  expect(agents.text).toContain("read-only key")
  expect(agents.text).not.toContain('action="/console/agents/create"')
  const forged = await c.post("/console/agents/create", { csrf: c.csrf, name: "A", scopes: "email:read" })
  expect(forged.text).toContain("INSUFFICIENT_KEY_SCOPE")
  expect((await app.request("GET", "/v1/agents", { apiKey: d.apiKey })).body.agents).toEqual([])
  // reads work, the chain verification included
  const audit = await c.get("/console/audit?verify=1")
  expect(audit.text).toContain("Chain intact")
})

test("deleting the key ends its sessions; another key's session goes on", async () => {
  const d = await app.signup()
  const second = await app.request("POST", "/v1/keys", { apiKey: d.apiKey, body: { name: "laptop", scope: "full" } })
  const c = await signIn(app, second.body.apiKey)
  const other = await signIn(app, d.apiKey)
  expect((await c.get("/console/keys")).status).toBe(200)
  const deleted = await other.post("/console/keys/remove", { csrf: other.csrf, keyId: second.body.id })
  expect(deleted.text).toContain("deleted")
  const after = await c.get("/console/keys")
  expect(after.status).toBe(200)
  expect(after.text).toContain("Sign in with one of your API keys")
  expect((await app.query("SELECT 1 FROM console_sessions WHERE key_id = $1", [second.body.id])).length).toBe(0)
  expect((await other.get("/console/keys")).text).toContain("<h1>API keys</h1>")
})

test("signing out deletes the session", async () => {
  const d = await app.signup()
  const c = await signIn(app, d.apiKey)
  const out = await c.post("/console/sign-out", { csrf: c.csrf })
  expect(out.status).toBe(303)
  expect(out.headers.get("set-cookie")).toContain("Max-Age=0")
  expect((await c.get("/console/overview")).text).toContain("Sign in with one of your API keys")
  expect((await app.query("SELECT 1 FROM console_sessions WHERE developer_id = $1", [d.developerId])).length).toBe(0)
})

test("every page renders for a new account, and an unknown page is 404", async () => {
  const d = await app.signup()
  const c = await signIn(app, d.apiKey)
  for (const page of ["overview", "agents", "consent", "audit", "webhooks", "policies", "anomalies", "keys", "directory", "sso", "vault", "breaches", "compliance", "billing", "dpdp"]) {
    const r = await c.get(`/console/${page}`)
    expect([page, r.status]).toEqual([page, 200])
    expect(r.text).toContain(`href="/console/${page}" aria-current="page"`)
  }
  expect((await c.get("/console/nope")).status).toBe(404)
})

test("the console's live events relay GET /v1/events/stream as the session's key; without a session 401", async () => {
  const anonymous = await fetch(`${app.url}/console/live`)
  expect(anonymous.status).toBe(401)
  expect((await anonymous.json()).code).toBe("UNAUTHORIZED")
  const d = await app.signup()
  const c = await signIn(app, d.apiKey)
  const bad = await fetch(`${app.url}/console/live?types=nope`, { headers: { cookie: c.cookie } })
  expect(bad.status).toBe(400)
  expect((await bad.json()).code).toBe("BAD_REQUEST")
  const controller = new AbortController()
  const stream = await fetch(`${app.url}/console/live`, { headers: { cookie: c.cookie }, signal: controller.signal })
  expect(stream.status).toBe(200)
  expect(stream.headers.get("content-type")).toContain("text/event-stream")
  const reader = stream.body!.getReader()
  let text = ""
  const created = await app.request("POST", "/v1/keys", { apiKey: d.apiKey, body: { name: "k", scope: "read" } })
  expect(created.status).toBe(201)
  await app.request("POST", "/v1/agents", { apiKey: d.apiKey, body: { name: "A", scopes: ["email:read"] } })
  const agentId = (await app.request("GET", "/v1/agents", { apiKey: d.apiKey })).body.agents[0].agentId
  const authz = await app.request("POST", "/v1/authorize", { apiKey: d.apiKey, body: { agentId, principalId: "p1", scopes: ["email:read"] } })
  await app.request("POST", `/v1/consent/${authz.body.authRequestId}/approve`)
  const end = Date.now() + 10_000
  while (!text.includes("event: grant.created") && Date.now() < end) {
    const { value, done } = await reader.read()
    if (done) break
    text += new TextDecoder().decode(value)
  }
  controller.abort()
  expect(text).toContain("event: grant.created")
  expect(text).toContain('"principalId":"p1"')
})

test("a breach recorded in the console is the API's, listed with its 72-hour deadline; the principal ids are not shown", async () => {
  const d = await app.signup()
  const c = await signIn(app, d.apiKey)
  const recorded = await c.post("/console/breaches/record", {
    csrf: c.csrf, description: "Laptop stolen", nature: "Loss of device", extent: "Names", affectedDataPrincipalIds: "user_42\nuser_43"
  })
  expect(recorded.text).toContain("recorded; the Board's detailed report is due")
  const listed = await app.request("GET", "/v1/dpdp/breaches", { apiKey: d.apiKey })
  expect(listed.body.breaches).toHaveLength(1)
  const breach = listed.body.breaches[0]
  expect([breach.nature, breach.affectedCount]).toEqual(["Loss of device", 2])
  const page = await c.get("/console/breaches")
  expect(page.text).toContain(breach.breachId)
  expect(page.text).toContain(breach.boardDetailedReportDueAt.replace("T", " ").replace(/\.\d+Z$/, "Z"))
  expect(page.text).not.toContain("user_42")
})

test("an alert channel added in the console is the API's; its secret is shown once; deleting it removes it", async () => {
  const d = await app.signup()
  const c = await signIn(app, d.apiKey)
  const added = await c.post("/console/anomalies/createChannel", { csrf: c.csrf, type: "webhook", url: "http://127.0.0.1:9/alerts", name: "On call", severities: "high, critical" })
  expect(added.text).toMatch(/Its signing secret, shown once: <code>whsec_/)
  const listed = (await app.request("GET", "/v1/anomaly/channels", { apiKey: d.apiKey })).body.channels
  expect(listed.map((ch: any) => [ch.name, ch.type, ch.severities])).toEqual([["On call", "webhook", ["high", "critical"]]])
  const page = await c.get("/console/anomalies")
  expect(page.text).not.toMatch(/whsec_[A-Za-z0-9+/]{20}/)
  const removed = await c.post("/console/anomalies/removeChannel", { csrf: c.csrf, channelId: listed[0].id })
  expect(removed.text).toContain("deleted")
  expect((await app.request("GET", "/v1/anomaly/channels", { apiKey: d.apiKey })).body.channels).toEqual([])
})
