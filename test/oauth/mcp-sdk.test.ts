/**
 * The done test of decisions §22: the official MCP TypeScript SDK client, unchanged, registers
 * itself (RFC 7591), authorizes in real Chromium (sign-in through the developer login bridge, then
 * our consent page), exchanges the code with PKCE and `resource`, and calls a tool on a small MCP
 * server on loopback that accepts only our RFC 9068 tokens for its own audience (jose against our
 * JWKS, as stock middleware does). Then the grant is revoked and the server's online check refuses.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js"
import * as jose from "jose"
import { type Browser, chromium } from "playwright-core"
import { startTestApp, type TestApp } from "../support/app.ts"
import { freePort } from "../support/net.ts"
import { ARGS, CHROMIUM, type McpContext, Provider, startMcpServer } from "./mcp-support.ts"

let app: TestApp
let origin: string
let browser: Browser
let dev: { apiKey: string; developerId: string }
let rs: any
let mcp: ReturnType<typeof Bun.serve>
let callbackServer: ReturnType<typeof Bun.serve>
let mcpUrl: string
let callbackUrl: string
const ctx: McpContext = { origin: () => origin, apiKey: () => dev.apiKey, rs: () => rs, refused: new Set(), seen: [] }
const seenByTool = ctx.seen

beforeAll(async () => {
  const port = await freePort()
  origin = `http://localhost:${port}`
  app = await startTestApp({ env: { PORT: String(port), PUBLIC_BASE_URL: origin, RATE_LIMIT_SCALE: "100" } })
  dev = await app.signup({ plan: "enterprise" })
  const mcpPort = await freePort()
  mcpUrl = `http://127.0.0.1:${mcpPort}/mcp`
  const created = await app.request("POST", "/v1/resource-servers", {
    apiKey: dev.apiKey,
    body: {
      identifier: mcpUrl, name: "Notes MCP", scopes: [{ name: "notes:read", description: "Read your notes" }], defaultScopes: ["notes:read"],
      openRegistration: { dcr: true }, login: { developerLoginUrl: `http://127.0.0.1:${mcpPort}/login` }
    }
  })
  expect(created.status).toBe(201)
  rs = created.body
  mcp = startMcpServer(mcpPort, ctx)
  callbackServer = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("<!doctype html><title>back in the client</title><p>done</p>", { headers: { "content-type": "text/html" } }) })
  callbackUrl = `http://127.0.0.1:${callbackServer.port}/callback`
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
}, 120_000)
afterAll(async () => {
  await browser?.close()
  mcp?.stop(true)
  callbackServer?.stop(true)
  await app?.stop()
})

describe("the official MCP SDK client against our authorization server", () => {
  test("registers, authorizes in Chromium, calls a tool; after revocation the server refuses", async () => {
    const provider = new Provider(callbackUrl)
    const first = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider })
    const client = new Client({ name: "sdk-test", version: "1.0.0" })
    // no token yet: the SDK discovers us from the 401, registers, and hands the app the authorization URL
    const refused = await client.connect(first).then(() => "connected", (e) => e)
    expect(refused).toBeInstanceOf(UnauthorizedError)
    expect(provider.info?.client_id).toMatch(/^ag_/)
    const at = provider.authorizationUrl!
    expect(at.origin + at.pathname).toBe(`${rs.issuer}/authorize`)
    expect(at.searchParams.get("resource")).toBe(mcpUrl)
    expect(at.searchParams.get("code_challenge_method")).toBe("S256")
    // the person: signs in through the developer's page, reads the consent page, approves
    const page = await browser.newPage()
    await page.goto(at.toString())
    await page.waitForURL(/\/consent\?req=/)
    expect(await page.locator("#client").textContent()).toContain("SDK test client")
    expect(await page.locator("#client-unverified").count()).toBe(1)
    expect(await page.locator("#resource").textContent()).toContain("Notes MCP")
    expect(await page.locator("#scopes li strong").allTextContents()).toEqual(["Read your notes"])
    await page.screenshot({ path: ".scratch/oauth-consent.png" }).catch(() => {})
    await Promise.all([page.waitForURL(/\/callback\?/), page.click("#approve")])
    const landed = new URL(page.url())
    await page.close()
    expect(landed.searchParams.get("iss")).toBe(rs.issuer)
    const code = landed.searchParams.get("code")!
    await first.finishAuth(code)
    expect(provider.saved?.token_type.toLowerCase()).toBe("bearer")
    expect(provider.saved?.refresh_token).toMatch(/^ref_/)
    // with the token: connect and call the tool
    const connected = new Client({ name: "sdk-test", version: "1.0.0" })
    await connected.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider }))
    const result = await connected.callTool({ name: "whoami", arguments: {} })
    expect(result.content).toEqual([{ type: "text", text: "hello person-7" }])
    expect(seenByTool.at(-1)).toEqual({ sub: "person-7", scopes: ["notes:read"], clientId: provider.info!.client_id, tool: "whoami" })
    await connected.close()
    // the grant is revoked (the person's permissions page or the developer): the next call is refused online
    const grantId = jose.decodeJwt(provider.saved!.access_token).grnt as string
    expect((await app.request("DELETE", `/v1/grants/${grantId}`, { apiKey: dev.apiKey })).status).toBe(204)
    const probe = await fetch(mcpUrl, {
      method: "POST",
      headers: { authorization: `Bearer ${provider.saved!.access_token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })
    })
    expect(probe.status).toBe(401)
    expect(probe.headers.get("www-authenticate")).toBe(rs.wwwAuthenticate)
  }, 120_000)
})
