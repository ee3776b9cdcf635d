/**
 * CIMD clients (decisions §22.3): a client_id that is the URL of its metadata document, fetched over
 * loopback http (OAUTH_ALLOW_PRIVATE_HOSTS, tests only) with a small deadline and size. The document
 * must name itself, list the redirect, and hold no secret; a good one makes an unverified agent of
 * the developer. Copies are rows, fresh per Cache-Control (TestClock), used past a failed refetch
 * for at most 24 h more. Without the private-hosts setting the live fetch refuses a loopback document.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import * as jose from "jose"
import { Config, loadConfig } from "../../src/Config.ts"
import { cimdUrlProblem, isCimdClientId } from "../../src/oauth/CimdDocument.ts"
import { CimdFetch, CimdFetchLive } from "../../src/oauth/CimdFetch.ts"
import { cimdCopiesCleanupPass } from "../../src/oauth/Cleanup.ts"
import { startTestApp, type TestApp, testPrivateKey, usingRealPostgres } from "../support/app.ts"
import { authorizeThroughConsent, pkce, postForm, registerServer } from "./support.ts"

const CALLBACK = "http://127.0.0.1:7777/callback"
let app: TestApp
let dev: { apiKey: string; developerId: string }
let rs: any
let docs: ReturnType<typeof Bun.serve>
let base: string
const hits = new Map<string, number>()
/** what each path answers: a document (its client_id filled in unless given), a status, or a delay */
const answers = new Map<string, { doc?: Record<string, unknown>; status?: number; delayMs?: number; cacheControl?: string; raw?: string }>()

const url = (path: string) => `${base}${path}`
const good = (extra: Record<string, unknown> = {}) => ({ client_name: "Doc Agent", redirect_uris: [CALLBACK], grant_types: ["authorization_code", "refresh_token"], ...extra })

const startAt = async (clientId: string, redirect = CALLBACK) => {
  const { challenge } = pkce()
  const query = new URLSearchParams({ response_type: "code", client_id: clientId, redirect_uri: redirect, code_challenge: challenge, code_challenge_method: "S256", state: "s" })
  return app.request("GET", `/oauth/${dev.developerId}/authorize?${query}`)
}

beforeAll(async () => {
  docs = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (request) => {
      const path = new URL(request.url).pathname
      hits.set(path, (hits.get(path) ?? 0) + 1)
      const answer = answers.get(path)
      if (answer === undefined) return new Response("no", { status: 404 })
      if (answer.delayMs !== undefined) await Bun.sleep(answer.delayMs)
      if (answer.status !== undefined && answer.status !== 200) return new Response("down", { status: answer.status })
      const body = answer.raw ?? JSON.stringify({ client_id: url(path), ...answer.doc })
      return new Response(body, { headers: { "content-type": "application/json", ...(answer.cacheControl ? { "cache-control": answer.cacheControl } : {}) } })
    }
  })
  base = `http://127.0.0.1:${docs.port}`
  app = await startTestApp({
    testClock: true,
    env: { RATE_LIMIT_SCALE: "100", OAUTH_ALLOW_PRIVATE_HOSTS: "true", OAUTH_CIMD_TIMEOUT_MS: "300", OAUTH_CIMD_MAX_BYTES: "2048" }
  })
  dev = await app.signup({ plan: "enterprise" })
  rs = await registerServer(app, dev.apiKey)
}, 120_000)
afterAll(async () => {
  docs?.stop(true)
  await app?.stop()
})

describe("client ID metadata documents", () => {
  test("closed by default: no metadata flag, a document URL is an unknown application; opening it flips both", async () => {
    answers.set("/agent.json", { doc: good(), cacheControl: "max-age=600" })
    const closed = await app.request("GET", `/.well-known/oauth-authorization-server/oauth/${dev.developerId}`)
    expect(closed.body.client_id_metadata_document_supported).toBe(false)
    const refused = await startAt(url("/agent.json"))
    expect(refused.status).toBe(400)
    expect(refused.text).toContain("not accepted by this issuer")
    expect(hits.get("/agent.json")).toBeUndefined()
    const patched = await app.request("PATCH", `/v1/resource-servers/${rs.resourceServerId}`, { apiKey: dev.apiKey, body: { openRegistration: { cimd: true } } })
    expect(patched.status).toBe(200)
    expect(patched.body.openRegistration).toEqual({ dcr: true, cimd: true })
    const open = await app.request("GET", `/.well-known/oauth-authorization-server/oauth/${dev.developerId}`)
    expect(open.body.client_id_metadata_document_supported).toBe(true)
  })

  test("a good document: the client becomes an unverified agent (origin cimd), authorizes, and redeems its code at /token", async () => {
    const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: url("/agent.json") })
    expect(flow.page!.text).toContain("Doc Agent")
    expect(flow.page!.text).toContain(`127.0.0.1:${docs.port}`)
    const code = flow.back!.searchParams.get("code")!
    const token = await postForm(app, `/oauth/${dev.developerId}/token`, {
      grant_type: "authorization_code", code, code_verifier: flow.verifier, redirect_uri: CALLBACK, client_id: url("/agent.json")
    })
    expect(token.status).toBe(200)
    expect(jose.decodeJwt(token.body.access_token).client_id).toBe(url("/agent.json"))
    expect(token.body.refresh_token).toMatch(/^ref_/)
    const [client] = await app.query("SELECT agent_id, origin, client_type, verified FROM oauth_clients WHERE client_id = $1", [url("/agent.json")])
    expect(client).toMatchObject({ origin: "cimd", clientType: "public", verified: false })
    const agent = await app.request("GET", `/v1/agents/${client.agentId}`, { apiKey: dev.apiKey })
    expect(agent.body).toMatchObject({ agentId: client.agentId, name: "Doc Agent", status: "active" })
    const events = await app.query("SELECT data FROM events WHERE type = 'oauth.client.registered' AND developer_id = $1", [dev.developerId])
    expect(events.map((e) => e.data)).toContainEqual({ agentId: client.agentId, origin: "cimd" })
    const audit = await app.query("SELECT metadata FROM audit_log WHERE action = 'service.oauth.client_registered' AND agent_id = $1", [client.agentId])
    expect(audit.map((a) => a.metadata)).toEqual([{ origin: "cimd" }])
    // fetched once: the copy is a row, fresh for its max-age
    expect(hits.get("/agent.json")).toBe(1)
    const [row] = await app.query("SELECT document, fetched_at, fresh_until FROM oauth_cimd_documents WHERE url = $1", [url("/agent.json")])
    expect(row.freshUntil.getTime() - row.fetchedAt.getTime()).toBe(600_000)
    expect(row.document.clientName).toBe("Doc Agent")
  })

  test("two first uses at once make one client, one event", async () => {
    answers.set("/twice.json", { doc: good({ client_name: "Twice Agent" }) })
    const answers2 = await Promise.all([startAt(url("/twice.json")), startAt(url("/twice.json")), startAt(url("/twice.json"))])
    expect(answers2.map((a) => a.status)).toEqual([303, 303, 303])
    const rows = await app.query("SELECT agent_id FROM oauth_clients WHERE client_id = $1", [url("/twice.json")])
    expect(rows.length).toBe(1)
    const events = await app.query("SELECT data FROM events WHERE type = 'oauth.client.registered' AND data->>'agentId' = $1", [rows[0].agentId])
    expect(events.length).toBe(1)
    const orphans = await app.query("SELECT count(*)::int AS n FROM agents WHERE name = 'Twice Agent'")
    expect(orphans[0].n).toBe(1)
  })

  test("a stale copy is fetched again; a changed name follows; a failed refetch uses the copy for 24 h more, then refuses", async () => {
    answers.set("/agent.json", { doc: good({ client_name: "Doc Agent 2" }), cacheControl: "max-age=600" })
    await app.adjust("11 minutes")
    expect((await startAt(url("/agent.json"))).status).toBe(303)
    expect(hits.get("/agent.json")).toBe(2)
    const [agent] = await app.query("SELECT a.name FROM agents a JOIN oauth_clients c ON c.agent_id = a.id WHERE c.client_id = $1", [url("/agent.json")])
    expect(agent.name).toBe("Doc Agent 2")
    answers.set("/agent.json", { status: 503 })
    await app.adjust("11 minutes")
    expect((await startAt(url("/agent.json"))).status).toBe(303)
    await app.adjust("23 hours")
    expect((await startAt(url("/agent.json"))).status).toBe(303)
    await app.adjust("2 hours")
    const refused = await startAt(url("/agent.json"))
    expect(refused.status).toBe(400)
    expect(refused.text).toContain("could not be fetched (answered 503)")
    // the cleanup fiber's pass drops the copies no step may use any more (this one and /twice.json's)
    expect(await app.run(cimdCopiesCleanupPass)).toBe(2)
    expect(await app.query("SELECT url FROM oauth_cimd_documents")).toEqual([])
    answers.set("/agent.json", { doc: good({ client_name: "Doc Agent 2" }), cacheControl: "max-age=600" })
  })

  test("refusals before anything else, as a page that never redirects: mismatch, redirect not listed, secret, too large, timeout, 404", async () => {
    answers.set("/mismatch.json", { raw: JSON.stringify({ client_id: url("/other.json"), ...good() }) })
    answers.set("/secret.json", { doc: good({ token_endpoint_auth_method: "client_secret_basic" }) })
    answers.set("/big.json", { doc: good({ padding: "x".repeat(4000) }) })
    answers.set("/slow.json", { doc: good(), delayMs: 1500 })
    answers.set("/nameless.json", { doc: { redirect_uris: [CALLBACK] } })
    const cases: Array<[string, string]> = [
      ["/mismatch.json", "client_id is not its URL"],
      ["/secret.json", "may only use token_endpoint_auth_method none"],
      ["/big.json", "could not be fetched (answer too large)"],
      ["/slow.json", "could not be fetched (timed out)"],
      ["/nameless.json", "needs a client_name"],
      ["/gone.json", "answered 404"]
    ]
    for (const [path, why] of cases) {
      const answer = await startAt(url(path))
      expect(answer.status).toBe(400)
      expect(answer.headers.get("location")).toBeNull()
      expect(answer.text).toContain(why)
      // the page says why, never what the document held
      expect(answer.text).not.toContain("xxxxxxxx")
    }
    const elsewhere = await startAt(url("/agent.json"), "http://127.0.0.1:7777/elsewhere")
    expect(elsewhere.status).toBe(400)
    expect(elsewhere.text).toContain("not one it registered")
    const root = await startAt(`${base}/`)
    expect(root.text).toContain("must have a path")
    expect((await app.query("SELECT count(*)::int AS n FROM oauth_clients WHERE origin = 'cimd'"))[0].n).toBe(2)
  })

  test("/token refuses a document client while CIMD is closed, and a host outside cimdAllowedHosts at /authorize", async () => {
    const patch = (openRegistration: Record<string, unknown>) =>
      app.request("PATCH", `/v1/resource-servers/${rs.resourceServerId}`, { apiKey: dev.apiKey, body: { openRegistration } })
    expect((await patch({ cimdAllowedHosts: ["Not A Host"] })).status).toBe(400)
    expect((await patch({ cimdAllowedHosts: ["tools.example.com"] })).status).toBe(200)
    const outside = await startAt(url("/agent.json"))
    expect(outside.status).toBe(400)
    expect(outside.text).toContain("host is not allowed")
    expect((await patch({ cimdAllowedHosts: ["127.0.0.1"] })).status).toBe(200)
    expect((await startAt(url("/agent.json"))).status).toBe(303)
    expect((await patch({ cimd: false })).status).toBe(200)
    const token = await postForm(app, `/oauth/${dev.developerId}/token`, { grant_type: "refresh_token", refresh_token: "ref_x", client_id: url("/agent.json") })
    expect(token.status).toBe(401)
    expect(token.body).toEqual({ error: "invalid_client", error_description: "client ID metadata documents are not accepted by this issuer" })
    expect((await patch({ cimd: true })).status).toBe(200)
  })
})

describe("two instances on PostgreSQL", () => {
  test.skipIf(!usingRealPostgres)("the copy and the client are rows: the other instance redeems the code without fetching again", async () => {
    const two = await startTestApp({
      databaseUrl: app.databaseUrl, testClock: true, startTime: await app.now(),
      env: { RATE_LIMIT_SCALE: "100", OAUTH_ALLOW_PRIVATE_HOSTS: "true", OAUTH_CIMD_TIMEOUT_MS: "300", OAUTH_CIMD_MAX_BYTES: "2048" }
    })
    try {
      answers.set("/two.json", { doc: good({ client_name: "Two Agent" }), cacheControl: "max-age=3600" })
      const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: url("/two.json") })
      const token = await postForm(two, `/oauth/${dev.developerId}/token`, {
        grant_type: "authorization_code", code: flow.back!.searchParams.get("code")!, code_verifier: flow.verifier, redirect_uri: CALLBACK, client_id: url("/two.json")
      })
      expect(token.status).toBe(200)
      expect(jose.decodeJwt(token.body.access_token).client_id).toBe(url("/two.json"))
      expect((await startAt(url("/two.json"))).status).toBe(303)
      expect(hits.get("/two.json")).toBe(1)
    } finally {
      await two.stop()
    }
  }, 60_000)
})

describe("without OAUTH_ALLOW_PRIVATE_HOSTS", () => {
  test("the live fetch refuses a document on a loopback address, and an http client_id is no document at all", async () => {
    const config = loadConfig({ DATABASE_URL: "pglite://memory", REDIS_URL: "memory://", RSA_PRIVATE_KEY: testPrivateKey() })
    expect(config.oauth.cimd.allowPrivateHosts).toBe(false)
    const before = hits.get("/agent.json")
    const fetched = await Effect.runPromise(Effect.flatMap(CimdFetch, (f) => f.get(`https://127.0.0.1:${docs.port}/agent.json`)).pipe(
      Effect.provide(CimdFetchLive),
      Effect.provide(Config.layer(config))
    ))
    // what the page then says: "could not be fetched (receiver not allowed or unreachable)"
    expect(fetched).toEqual({ _tag: "Failed", reason: "receiver not allowed or unreachable" })
    expect(hits.get("/agent.json")).toBe(before)
    expect(isCimdClientId(url("/agent.json"), false)).toBe(false)
    expect(cimdUrlProblem(url("/agent.json"), false)).toBe("the client_id URL must use https")
  })
})
