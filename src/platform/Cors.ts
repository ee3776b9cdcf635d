/**
 * CORS for the endpoints a browser-based MCP client calls (decisions §22.4): the metadata, the
 * protected-resource metadata, the JWKS, `/register`, `/token` and `/revoke` answer `*` without
 * credentials, errors and rate-limit refusals included (a client must read the OAuth error), and
 * answer a preflight. None on `/authorize` (a navigation) or `/introspect` (server to server).
 */
import { HttpServerResponse } from "@effect/platform"

const ROUTES: ReadonlyArray<readonly [RegExp, "GET" | "POST"]> = [
  [/^\/\.well-known\/jwks\.json\/?$/, "GET"],
  [/^\/\.well-known\/oauth-authorization-server\/oauth\/[^/]+\/?$/, "GET"],
  [/^\/oauth\/[^/]+\/resource-servers\/[^/]+\/\.well-known\/oauth-protected-resource\/?$/, "GET"],
  [/^\/oauth\/[^/]+\/(register|token|revoke)\/?$/, "POST"]
]

/** the method a browser may call this path with across origins, or undefined (no CORS) */
export const corsMethod = (path: string): "GET" | "POST" | undefined => ROUTES.find(([pattern]) => pattern.test(path))?.[1]

/** what a cross-origin script may read beyond the safelisted headers: the OAuth and rate-limit answers */
const EXPOSED = "www-authenticate, retry-after, x-request-id, x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset, ratelimit, ratelimit-policy"

export const withCors = (response: HttpServerResponse.HttpServerResponse) =>
  HttpServerResponse.setHeaders(response, { "access-control-allow-origin": "*", "access-control-expose-headers": EXPOSED })

/**
 * The preflight's answer: the route's method and the headers the MCP SDK and OAuth clients send
 * (Basic credentials, a JSON registration body, the MCP protocol version on discovery). No
 * credentials are allowed, so `*` is safe.
 */
export const preflight = (method: "GET" | "POST") =>
  HttpServerResponse.empty({
    status: 204,
    headers: {
      "access-control-allow-origin": "*",
      "access-control-allow-methods": `${method}, OPTIONS`,
      "access-control-allow-headers": "authorization, content-type, mcp-protocol-version",
      "access-control-max-age": "86400"
    }
  })
