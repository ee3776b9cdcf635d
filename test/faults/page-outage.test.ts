/**
 * A person opening a page while Redis or PostgreSQL is away (issue 31, item 5): the consent and
 * permissions pages and their form posts answer an HTML page, 503, with Retry-After, never the
 * API's JSON; the API's own routes keep their JSON 503. Redis is a private redis-server stopped and
 * started; PostgreSQL is cut through a proxy (real servers only).
 */
import { expect, test } from "bun:test"
import { createDatabase, startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { startProxy } from "../support/proxy.ts"
import { REDIS_SERVER, startPrivateRedis } from "../support/redis.ts"

/** a well-formed (unknown) principal session token: the permissions page looks it up in the database */
const SESSION = `pst_${"A".repeat(43)}`

const form = (fields: Record<string, string>) => ({
  rawBody: new URLSearchParams(fields).toString(),
  headers: { "content-type": "application/x-www-form-urlencoded", accept: "text/html" }
})

/** a pending consent request: what GET /consent?req= shows */
const consentRequest = async (app: TestApp) => {
  const { apiKey } = await app.signup()
  const agent = await app.request("POST", "/v1/agents", { apiKey, body: { name: "Mail helper", scopes: ["email:read"] } })
  const auth = await app.request("POST", "/v1/authorize", { apiKey, body: { agentId: agent.body.agentId, principalId: "user_1", scopes: ["email:read"] } })
  expect(auth.status).toBe(201)
  return { apiKey, req: auth.body.authRequestId as string }
}

/** the outage page: HTML, 503, Retry-After, the request id to quote, nothing of the JSON error */
const expectOutagePage = (res: { status: number; text: string; headers: Headers }, label: string) => {
  expect([label, res.status, res.headers.get("content-type"), res.headers.get("retry-after"), res.headers.get("cache-control")])
    .toEqual([label, 503, "text/html; charset=utf-8", "5", "no-store"])
  expect(res.text).toStartWith("<!doctype html>")
  expect(res.text).toContain("<title>Temporarily unavailable</title>")
  expect(res.text).toContain(`Reference: ${res.headers.get("x-request-id")}</p>`)
  expect(res.text).not.toContain("_UNAVAILABLE")
}

test.skipIf(!REDIS_SERVER)("Redis away: consent and permissions pages and their forms answer the HTML 503; the API keeps JSON; back, the page again", async () => {
  const redis = await startPrivateRedis()
  const app = await startTestApp({ env: { REDIS_URL: redis.url } })
  try {
    const { apiKey, req } = await consentRequest(app)
    const before = await app.request("GET", `/consent?req=${req}`)
    expect([before.status, before.headers.get("content-type")]).toEqual([200, "text/html; charset=utf-8"])

    await redis.stop()
    expectOutagePage(await app.request("GET", `/consent?req=${req}`), "GET /consent")
    expectOutagePage(await app.request("POST", "/consent/approve", form({ req })), "POST /consent/approve")
    expectOutagePage(await app.request("POST", "/consent/deny", form({ req })), "POST /consent/deny")
    expectOutagePage(await app.request("GET", "/permissions"), "GET /permissions")
    expectOutagePage(await app.request("POST", "/permissions/view", form({ session: SESSION })), "POST /permissions/view")
    // an API route, and a page's script (not a page), keep the JSON error
    const api = await app.request("GET", "/v1/me", { apiKey })
    expect([api.status, api.headers.get("content-type"), api.body.code]).toEqual([503, "application/json", "RATE_LIMIT_UNAVAILABLE"])
    const script = await app.request("GET", "/permissions/app.js")
    expect([script.status, script.body.code]).toEqual([503, "RATE_LIMIT_UNAVAILABLE"])

    await redis.start()
    let back = 0
    for (let i = 0; i < 100 && back !== 200; i++) {
      back = (await app.request("GET", `/consent?req=${req}`)).status
      if (back !== 200) await Bun.sleep(50)
    }
    expect(back).toBe(200)
    // the request was left pending: the outage approved and denied nothing
    const after = await app.request("GET", `/consent?req=${req}`)
    expect(after.text).toContain('action="/consent/approve"')
  } finally {
    await app.stop()
    await redis.stop()
  }
}, 120_000)

test.skipIf(!usingRealPostgres)("PostgreSQL away: the pages that read it answer the HTML 503; the API keeps JSON", async () => {
  const db = await createDatabase()
  const direct = new URL(db.url)
  const proxy = await startProxy(direct.hostname, Number(direct.port || 5432))
  const viaProxy = new URL(db.url)
  viaProxy.hostname = "127.0.0.1"
  viaProxy.port = String(proxy.port)
  const app = await startTestApp({ databaseUrl: viaProxy.toString() })
  try {
    const { req } = await consentRequest(app)
    expect((await app.request("GET", `/consent?req=${req}`)).status).toBe(200)
    await proxy.cut()
    expectOutagePage(await app.request("GET", `/consent?req=${req}`), "GET /consent")
    expectOutagePage(await app.request("POST", "/consent/approve", form({ req })), "POST /consent/approve")
    expectOutagePage(await app.request("POST", "/permissions/view", form({ session: SESSION })), "POST /permissions/view")
    const api = await app.request("POST", "/v1/signup", { body: { name: "during" } })
    expect([api.status, api.headers.get("content-type"), api.body.code]).toEqual([503, "application/json", "DATABASE_UNAVAILABLE"])
    await proxy.restore()
    let back = 0
    for (let i = 0; i < 100 && back !== 200; i++) {
      back = (await app.request("GET", `/consent?req=${req}`)).status
      if (back !== 200) await Bun.sleep(50)
    }
    expect(back).toBe(200)
  } finally {
    await app.stop()
    await proxy.close()
    await db.drop()
  }
}, 120_000)
