/**
 * What the OAuth tests share: a resource server registered over the API, a public client registered
 * by DCR, and the browser steps of one authorization driven with fetch (cookies carried by hand),
 * the developer login bridge answered as a developer's backend would.
 */
import { createHash, randomBytes } from "node:crypto"
import type { TestApp } from "../support/app.ts"

export const pkce = () => {
  const verifier = randomBytes(32).toString("base64url")
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") }
}

export const registerServer = async (app: TestApp, apiKey: string, overrides: Record<string, unknown> = {}) => {
  const res = await app.request("POST", "/v1/resource-servers", {
    apiKey,
    body: {
      identifier: "http://127.0.0.1:9/mcp",
      name: "Notes MCP",
      scopes: [{ name: "notes:read", description: "Read your notes" }, { name: "notes:write", description: "Change your notes" }],
      defaultScopes: ["notes:read"],
      openRegistration: { dcr: true },
      login: { developerLoginUrl: "http://127.0.0.1:9/login" },
      ...overrides
    }
  })
  if (res.status !== 201) throw new Error(`resource server: ${res.status} ${res.text}`)
  return res.body
}

export const registerClient = async (app: TestApp, developerId: string, body: Record<string, unknown> = {}) => {
  const res = await app.request("POST", `/oauth/${developerId}/register`, {
    body: { redirect_uris: ["http://127.0.0.1:7777/callback"], token_endpoint_auth_method: "none", grant_types: ["authorization_code", "refresh_token"], client_name: "Test Agent", ...body }
  })
  if (res.status !== 201) throw new Error(`register: ${res.status} ${res.text}`)
  return res.body
}

export const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString()

export const postForm = (app: TestApp, path: string, fields: Record<string, string>, headers: Record<string, string> = {}) =>
  app.request("POST", path, { rawBody: form(fields), headers: { "content-type": "application/x-www-form-urlencoded", ...headers } })

const cookieOf = (headers: Headers) => headers.get("set-cookie")?.split(";")[0]

/**
 * One authorization through to the consent page's Approve: /authorize → /login → the developer's
 * login (POST …/principal) → resume → consent → approve. Returns the redirect back to the client.
 */
export const authorizeThroughConsent = async (
  app: TestApp,
  input: { apiKey: string; developerId: string; clientId: string; resource?: string; scope?: string; principalId?: string; decide?: "approve" | "deny"; state?: string }
) => {
  const { challenge, verifier } = pkce()
  const query = new URLSearchParams({
    response_type: "code", client_id: input.clientId, redirect_uri: "http://127.0.0.1:7777/callback", code_challenge: challenge,
    code_challenge_method: "S256", state: input.state ?? "st-1", ...(input.resource ? { resource: input.resource } : {}), ...(input.scope ? { scope: input.scope } : {})
  })
  const started = await app.request("GET", `/oauth/${input.developerId}/authorize?${query}`)
  if (started.status !== 303 || !(started.headers.get("location") ?? "").includes("/login?")) return { started, verifier }
  const cookie = cookieOf(started.headers)!
  const login = await app.request("GET", new URL(started.headers.get("location")!).pathname + new URL(started.headers.get("location")!).search, { headers: { cookie } })
  const interaction = new URL(login.headers.get("location")!).searchParams.get("interaction")!
  const signedIn = await app.request("POST", `/v1/oauth/interactions/${interaction}/principal`, { apiKey: input.apiKey, body: { principalId: input.principalId ?? "person-1" } })
  const resume = new URL(signedIn.body.redirectTo)
  const resumed = await app.request("GET", resume.pathname + resume.search, { headers: { cookie } })
  const consentAt = resumed.headers.get("location")!
  if (!consentAt.includes("/consent?")) return { started, resumed, verifier, cookie, interaction }
  const page = await app.request("GET", new URL(consentAt).pathname + new URL(consentAt).search, { headers: { cookie } })
  const decided = await app.request("POST", `/consent/${input.decide ?? "approve"}`, {
    rawBody: form({ req: interaction }), headers: { "content-type": "application/x-www-form-urlencoded", cookie }
  })
  return { started, resumed, page, decided, verifier, cookie, interaction, back: new URL(decided.headers.get("location") ?? "http://none/") }
}
