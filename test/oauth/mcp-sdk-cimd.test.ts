/**
 * The official MCP TypeScript SDK client with a client ID metadata document (decisions §22.3): the
 * issuer has only CIMD open, the SDK uses its `clientMetadataUrl` as client_id (no registration call),
 * and the service fetches the document over TLS from loopback (the test's CA, the connection pinned
 * to 127.0.0.1 under the name in the URL). Then the refresh a refused token triggers, and a step-up:
 * the MCP server answers 403 `insufficient_scope`, the SDK asks for the larger scope, the person
 * consents again in Chromium, and the call goes through.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Layer } from "effect"
import * as jose from "jose"
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Browser, chromium } from "playwright-core"
import { CimdFetch, cimdGetWith } from "../../src/oauth/CimdFetch.ts"
import { requestPinned } from "../../src/platform/Outbound.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { freePort } from "../support/net.ts"
import { ARGS, CHROMIUM, consentInChromium, type McpContext, Provider, startMcpServer } from "./mcp-support.ts"

let app: TestApp
let origin: string
let browser: Browser
let dev: { apiKey: string; developerId: string }
let rs: any
let mcp: ReturnType<typeof Bun.serve>
let docs: ReturnType<typeof Bun.serve>
let callbackServer: ReturnType<typeof Bun.serve>
let dir: string
let mcpUrl: string
let callbackUrl: string
const documentFetches: Array<string> = []
const ctx: McpContext = { origin: () => origin, apiKey: () => dev.apiKey, rs: () => rs, refused: new Set(), seen: [] }
const docUrl = (name: string) => `https://cimd.test:${docs.port}/${name}.json`

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "cimd-"))
  const made = spawnSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"),
    "-days", "1", "-subj", "/CN=cimd.test", "-addext", "subjectAltName=DNS:cimd.test"])
  if (made.status !== 0) throw new Error(`openssl failed: ${made.stderr}`)
  const cert = readFileSync(join(dir, "cert.pem"), "utf8")
  callbackServer = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("<!doctype html><title>back in the client</title>", { headers: { "content-type": "text/html" } }) })
  callbackUrl = `http://127.0.0.1:${callbackServer.port}/callback`
  // the client's documents: one client keeps refresh tokens, the other registers only the code grant
  docs = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    tls: { cert, key: readFileSync(join(dir, "key.pem"), "utf8") },
    fetch: (request) => {
      const name = new URL(request.url).pathname.slice(1).replace(/\.json$/, "")
      documentFetches.push(name)
      const grants = name === "refreshing" ? ["authorization_code", "refresh_token"] : ["authorization_code"]
      return Response.json({
        client_id: docUrl(name), client_name: name === "refreshing" ? "CIMD SDK client" : "CIMD step-up client", redirect_uris: [callbackUrl],
        grant_types: grants, response_types: ["code"], token_endpoint_auth_method: "none"
      }, { headers: { "cache-control": "max-age=3600" } })
    }
  })
  // the live fetch's rules (pinned address, deadline, size, no redirects) with the test's CA for cimd.test on loopback
  const cimdFetch = Layer.succeed(CimdFetch, {
    get: cimdGetWith(async (input) => {
      const answer = await requestPinned(new URL(input), "127.0.0.1", "", { accept: "application/json" }, { method: "GET", ca: cert, timeoutMs: 5000, maxBodyBytes: 16_384 })
      return new Response(answer.text, { status: answer.status, headers: answer.headers })
    })
  })
  const port = await freePort()
  origin = `http://localhost:${port}`
  app = await startTestApp({ env: { PORT: String(port), PUBLIC_BASE_URL: origin, RATE_LIMIT_SCALE: "100" }, cimdFetch })
  dev = await app.signup({ plan: "enterprise" })
  const mcpPort = await freePort()
  mcpUrl = `http://127.0.0.1:${mcpPort}/mcp`
  const created = await app.request("POST", "/v1/resource-servers", {
    apiKey: dev.apiKey,
    body: {
      identifier: mcpUrl, name: "Notes MCP", defaultScopes: ["notes:read"],
      scopes: [{ name: "notes:read", description: "Read your notes" }, { name: "notes:write", description: "Change your notes" }],
      openRegistration: { cimd: true }, login: { developerLoginUrl: `http://127.0.0.1:${mcpPort}/login` }
    }
  })
  expect(created.status).toBe(201)
  rs = created.body
  mcp = startMcpServer(mcpPort, ctx)
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
}, 120_000)
afterAll(async () => {
  await browser?.close()
  mcp?.stop(true)
  docs?.stop(true)
  callbackServer?.stop(true)
  await app?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

/** the first authorization of a provider: the 401, the person in Chromium, the code exchanged */
const authorizeFirst = async (provider: Provider, check?: Parameters<typeof consentInChromium>[2]) => {
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider })
  const refused = await new Client({ name: "sdk-test", version: "1.0.0" }).connect(transport).then(() => "connected", (e) => e)
  expect(refused).toBeInstanceOf(UnauthorizedError)
  const landed = await consentInChromium(browser, provider.authorizationUrl!, check)
  expect(landed.searchParams.get("iss")).toBe(rs.issuer)
  await transport.finishAuth(landed.searchParams.get("code")!)
  const client = new Client({ name: "sdk-test", version: "1.0.0" })
  const connected = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider })
  await client.connect(connected)
  return { client, transport: connected }
}

describe("the MCP SDK client with a client ID metadata document", () => {
  test("uses its document URL as client_id, authorizes in Chromium, calls a tool; a refused token is refreshed", async () => {
    const metadata = await app.request("GET", `/.well-known/oauth-authorization-server/oauth/${dev.developerId}`)
    expect(metadata.body.client_id_metadata_document_supported).toBe(true)
    expect(metadata.body.registration_endpoint).toBeUndefined()
    const provider = new Provider(callbackUrl, docUrl("refreshing"))
    const { client } = await authorizeFirst(provider, async (page) => {
      expect(await page.locator("#client").textContent()).toContain("CIMD SDK client")
      expect(await page.locator("#client-unverified").count()).toBe(1)
      expect(await page.locator("#client-host").textContent()).toBe(`cimd.test:${docs.port}`)
    })
    expect(provider.info?.client_id).toBe(docUrl("refreshing"))
    expect(provider.authorizationUrl!.searchParams.get("client_id")).toBe(docUrl("refreshing"))
    expect(documentFetches).toEqual(["refreshing"])
    const first = provider.saved!
    expect(first.refresh_token).toMatch(/^ref_/)
    expect(jose.decodeJwt(first.access_token).client_id).toBe(docUrl("refreshing"))
    expect(await client.callTool({ name: "whoami", arguments: {} })).toMatchObject({ content: [{ type: "text", text: "hello person-7" }] })
    // the server stops taking the token (as when it expires): the SDK refreshes on the 401 and the call goes through
    ctx.refused.add(String(jose.decodeJwt(first.access_token).jti))
    expect(await client.callTool({ name: "whoami", arguments: {} })).toMatchObject({ content: [{ type: "text", text: "hello person-7" }] })
    const second = provider.saved!
    expect(second.access_token).not.toBe(first.access_token)
    expect(second.refresh_token).toMatch(/^ref_/)
    expect(second.refresh_token).not.toBe(first.refresh_token)
    expect(jose.decodeJwt(second.access_token).grnt).toBe(jose.decodeJwt(first.access_token).grnt)
    expect(ctx.seen.at(-1)).toEqual({ sub: "person-7", scopes: ["notes:read"], clientId: docUrl("refreshing"), tool: "whoami" })
    // the old refresh token is used up: presenting it again revokes the grant (decisions §22.6)
    const replay = await fetch(`${rs.issuer}/token`, {
      method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: first.refresh_token!, client_id: docUrl("refreshing") })
    })
    expect(replay.status).toBe(400)
    expect((await replay.json() as { error: string }).error).toBe("invalid_grant")
    // the document was fetched once: the copy is fresh for an hour, for every step
    expect(documentFetches).toEqual(["refreshing"])
    await client.close()
  }, 120_000)

  test("step-up: a 403 insufficient_scope makes the SDK ask for the larger scope; the person consents again; the call succeeds", async () => {
    const provider = new Provider(callbackUrl, docUrl("code-only"))
    const { client, transport } = await authorizeFirst(provider)
    expect(provider.saved?.refresh_token).toBeUndefined()
    expect(jose.decodeJwt(provider.saved!.access_token).scope).toBe("notes:read")
    const stepped = await client.callTool({ name: "write_note", arguments: {} }).then(() => "called", (e) => e)
    expect(stepped).toBeInstanceOf(UnauthorizedError)
    expect(provider.authorizationUrl!.searchParams.get("scope")).toBe("notes:read notes:write")
    const landed = await consentInChromium(browser, provider.authorizationUrl!, async (page) => {
      expect(await page.locator("#scopes li strong").allTextContents()).toEqual(["Read your notes", "Change your notes"])
    })
    await transport.finishAuth(landed.searchParams.get("code")!)
    expect(jose.decodeJwt(provider.saved!.access_token).scope).toBe("notes:read notes:write")
    expect(await client.callTool({ name: "write_note", arguments: {} })).toMatchObject({ content: [{ type: "text", text: "written" }] })
    expect(ctx.seen.at(-1)).toEqual({ sub: "person-7", scopes: ["notes:read", "notes:write"], clientId: docUrl("code-only"), tool: "write_note" })
    await client.close()
  }, 120_000)

  test("SDK 1.32.2 holding a refresh token refreshes on the 403 instead of re-authorizing, and gives up (the scope cannot grow by refresh)", async () => {
    const provider = new Provider(callbackUrl, docUrl("refreshing"))
    const { client } = await authorizeFirst(provider)
    const before = provider.saved!.refresh_token
    const outcome = await client.callTool({ name: "write_note", arguments: {} }).then(() => "called", (e: Error) => e.message)
    expect(outcome).toContain("403 after trying upscoping")
    expect(provider.saved!.refresh_token).not.toBe(before)
    expect(jose.decodeJwt(provider.saved!.access_token).scope).toBe("notes:read")
    await client.close()
  }, 120_000)
})
