/**
 * What the MCP SDK tests share: a small MCP server on loopback protected by us (jose against our JWKS
 * with issuer, audience and typ, then introspection with the resource server's own credentials),
 * which also serves the developer's login page of the bridge; the client application's provider
 * (where it keeps what the SDK hands it); and the person's part in real Chromium.
 */
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js"
import * as jose from "jose"
import type { Browser } from "playwright-core"

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
export const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"]

export interface McpContext {
  /** the service's origin, the developer (its API key answers the bridge) and the registered resource server */
  readonly origin: () => string
  readonly apiKey: () => string
  readonly rs: () => any
  /** access tokens (by jti) the server treats as expired: it answers 401 as for any token it refuses */
  readonly refused: Set<string>
  readonly seen: Array<{ sub: string; scopes: ReadonlyArray<string>; clientId: string; tool: string }>
}

/** the tool that needs more than the default scope; calling it without `notes:write` is a 403 step-up challenge */
const WRITE_SCOPE = "notes:write"

export const startMcpServer = (port: number, ctx: McpContext) =>
  Bun.serve({
    port,
    hostname: "127.0.0.1",
    fetch: async (request) => {
      const url = new URL(request.url)
      const rs = ctx.rs()
      // the developer's login page of the bridge: it knows the person is "person-7" and says so to the service
      if (url.pathname === "/login") {
        const interaction = url.searchParams.get("interaction")!
        const answer = await fetch(`${ctx.origin()}/v1/oauth/interactions/${interaction}/principal`, {
          method: "POST", headers: { authorization: `Bearer ${ctx.apiKey()}`, "content-type": "application/json" }, body: JSON.stringify({ principalId: "person-7" })
        })
        const { redirectTo } = await answer.json() as { redirectTo: string }
        return new Response(null, { status: 303, headers: { location: redirectTo } })
      }
      if (url.pathname !== "/mcp") return new Response("not found", { status: 404 })
      const challenge = () => new Response(JSON.stringify({ error: "invalid_token" }), { status: 401, headers: { "www-authenticate": rs.wwwAuthenticate, "content-type": "application/json" } })
      const bearer = request.headers.get("authorization")?.match(/^Bearer (.+)$/)?.[1]
      if (bearer === undefined) return challenge()
      let claims: jose.JWTPayload
      try {
        claims = (await jose.jwtVerify(bearer, jose.createRemoteJWKSet(new URL(`${ctx.origin()}/.well-known/jwks.json`)), {
          issuer: rs.issuer, audience: rs.identifier, typ: "at+jwt", algorithms: ["RS256"], requiredClaims: ["client_id", "scope", "sub", "jti", "iat"]
        })).payload
      } catch {
        return challenge()
      }
      if (ctx.refused.has(String(claims.jti))) return challenge()
      // the online check: introspection with the resource server's own credentials
      const introspection = await fetch(`${rs.issuer}/introspect`, {
        method: "POST",
        headers: { authorization: `Basic ${btoa(`${rs.introspection.clientId}:${rs.introspection.clientSecret}`)}`, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ token: bearer })
      }).then((r) => r.json() as Promise<{ active: boolean }>)
      if (!introspection.active) return challenge()
      const scopes = String(claims.scope).split(" ")
      // MCP 2025-11-25: a token without the scope a call needs is a 403 naming the scopes to ask for
      const rpc = await request.clone().json().catch(() => undefined) as { method?: string; params?: { name?: string } } | undefined
      if (rpc?.method === "tools/call" && rpc.params?.name === "write_note" && !scopes.includes(WRITE_SCOPE)) {
        return new Response(JSON.stringify({ error: "insufficient_scope" }), {
          status: 403,
          headers: {
            "www-authenticate": `Bearer error="insufficient_scope", scope="notes:read ${WRITE_SCOPE}", resource_metadata="${rs.protectedResourceMetadataUrl}"`,
            "content-type": "application/json"
          }
        })
      }
      const server = new McpServer({ name: "notes", version: "1.0.0" })
      const record = (tool: string, info: { scopes: Array<string>; clientId: string; extra?: Record<string, unknown> }) =>
        ctx.seen.push({ sub: String(info.extra?.sub), scopes: info.scopes, clientId: info.clientId, tool })
      server.registerTool("whoami", { description: "Who the token speaks for" }, async (extra) => {
        record("whoami", extra.authInfo!)
        return { content: [{ type: "text", text: `hello ${String(extra.authInfo!.extra?.sub)}` }] }
      })
      server.registerTool("write_note", { description: "Writes a note (needs notes:write)" }, async (extra) => {
        record("write_note", extra.authInfo!)
        return { content: [{ type: "text", text: "written" }] }
      })
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
      await server.connect(transport)
      return transport.handleRequest(request, {
        authInfo: { token: bearer, clientId: String(claims.client_id), scopes, expiresAt: claims.exp, extra: { sub: claims.sub } }
      })
    }
  })

/** the MCP client application's side: where it keeps what the SDK hands it */
export class Provider implements OAuthClientProvider {
  info: OAuthClientInformationMixed | undefined
  saved: OAuthTokens | undefined
  verifier = ""
  authorizationUrl: URL | undefined
  constructor(readonly callbackUrl: string, readonly clientMetadataUrl?: string) {}
  get redirectUrl() {
    return this.callbackUrl
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: "SDK test client", redirect_uris: [this.callbackUrl], grant_types: ["authorization_code", "refresh_token"], response_types: ["code"],
      token_endpoint_auth_method: "none"
    }
  }
  clientInformation() {
    return this.info
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info
  }
  tokens() {
    return this.saved
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier
  }
  codeVerifier() {
    return this.verifier
  }
}

/** the person: opens the authorization URL, signs in through the developer's page, reads the consent page, approves */
export const consentInChromium = async (browser: Browser, at: URL, check?: (page: import("playwright-core").Page) => Promise<void>) => {
  const page = await browser.newPage()
  try {
    await page.goto(at.toString())
    await page.waitForURL(/\/consent\?req=/)
    await check?.(page)
    await Promise.all([page.waitForURL(/\/callback\?/), page.click("#approve")])
    return new URL(page.url())
  } finally {
    await page.close()
  }
}
