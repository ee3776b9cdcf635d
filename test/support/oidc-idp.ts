/**
 * A real OpenID provider on loopback for the SSO tests: `oidc-provider` 9, configured like Okta
 * (client_secret_basic, a groups claim in the ID token), like Google Workspace (hd, email_verified
 * in the ID token, client_secret_post) or like Entra ID multi-tenant (discovery at /common/v2.0
 * whose issuer is the `{tenantid}` template, tokens carrying `tid`, claims only from userinfo).
 *
 * In front of the provider sits a small HTTP server of ours. It serves Entra's discovery document,
 * and, when a test sets `tamper`, it re-signs the ID token the provider's token endpoint answered
 * (with the provider's own key, unless the test asks for a symmetric one), so a test can present an
 * expired token, another audience or issuer, another nonce or an HS256 signature, exactly as a
 * broken or hostile provider would. Logins are scripted with fetch through the provider's own
 * login form (its dev interactions); consent is granted up front (loadExistingGrant).
 */
import { exportJWK, generateKeyPair, SignJWT, decodeJwt, decodeProtectedHeader } from "jose"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
// @ts-ignore oidc-provider ships no type declarations
import Provider from "oidc-provider"
import { freePort } from "./net.ts"

export interface IdpAccount {
  readonly sub: string
  readonly email?: string
  readonly email_verified?: boolean
  readonly groups?: ReadonlyArray<string>
  readonly hd?: string
  readonly tid?: string
  readonly name?: string
  /** Entra's groups overage marker */
  readonly overage?: boolean
}

export type Flavor = "okta" | "google" | "entra"

export interface IdpOptions {
  readonly flavor: Flavor
  readonly clientId: string
  readonly clientSecret: string
  readonly redirectUri: string
  readonly accounts: ReadonlyArray<IdpAccount>
  /** the tenant whose issuer the Entra-like provider signs as */
  readonly tenantId?: string
}

export interface Tamper {
  readonly claims?: (claims: Record<string, unknown>) => Record<string, unknown>
  /** sign with HS256 keyed by this secret (the client secret: what a symmetric-algorithm attack uses) */
  readonly hs256Secret?: string
  /** sign with a key the provider does not publish (same kid) */
  readonly foreignKey?: boolean
}

export interface Idp {
  /** the provider's base URL (its endpoints) */
  readonly url: string
  /** what a connection names as issuerUrl */
  readonly issuerUrl: string
  /** the `iss` its tokens carry */
  readonly tokenIssuer: string
  tamper: Tamper | null
  /** follows authorizeUrl through the provider's login as `sub`; the URL the provider redirects back to */
  readonly login: (authorizeUrl: string, sub: string) => Promise<URL>
  readonly stop: () => Promise<void>
}

const readBody = (req: IncomingMessage) =>
  new Promise<Buffer>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c) => chunks.push(c))
    req.on("end", () => resolve(Buffer.concat(chunks)))
    req.on("error", reject)
  })

export const startIdp = async (options: IdpOptions): Promise<Idp> => {
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const tenant = options.tenantId ?? "tenant-a"
  const tokenIssuer = options.flavor === "entra" ? `${url}/${tenant}/v2.0` : url
  const issuerUrl = options.flavor === "entra" ? `${url}/common/v2.0` : url
  const { privateKey } = await generateKeyPair("RS256", { extractable: true })
  const jwk = { ...(await exportJWK(privateKey)), kid: "k1", use: "sig", alg: "RS256" }
  const accounts = new Map(options.accounts.map((a) => [a.sub, a]))
  const provider = new Provider(tokenIssuer, {
    clients: [{
      client_id: options.clientId,
      client_secret: options.clientSecret,
      redirect_uris: [options.redirectUri],
      token_endpoint_auth_method: options.flavor === "google" ? "client_secret_post" : "client_secret_basic",
      grant_types: ["authorization_code"],
      response_types: ["code"]
    }],
    jwks: { keys: [jwk as any] },
    cookies: { keys: ["test-cookie-key"] },
    claims: {
      openid: ["sub", "hd", "tid", "_claim_names", "_claim_sources"],
      email: ["email", "email_verified"],
      profile: ["name"],
      groups: ["groups"]
    },
    // Okta (groups claim configured) and Google put these claims in the ID token; Entra-like here answers them from userinfo
    conformIdTokenClaims: options.flavor === "entra",
    features: { devInteractions: { enabled: true }, userinfo: { enabled: true } },
    async findAccount(_ctx: unknown, sub: string) {
      const account = accounts.get(sub)
      if (account === undefined) return undefined
      return {
        accountId: sub,
        async claims() {
          return {
            sub,
            ...(account.email !== undefined ? { email: account.email, email_verified: account.email_verified ?? false } : {}),
            ...(account.name !== undefined ? { name: account.name } : {}),
            ...(account.groups !== undefined && !account.overage ? { groups: [...account.groups] } : {}),
            ...(account.overage ? { _claim_names: { groups: "src1" }, _claim_sources: { src1: { endpoint: "https://graph.example/groups" } } } : {}),
            ...(account.hd !== undefined ? { hd: account.hd } : {}),
            ...(options.flavor === "entra" ? { tid: account.tid ?? tenant } : {})
          }
        }
      }
    },
    async loadExistingGrant(ctx: any) {
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId })
      grant.addOIDCScope("openid email profile groups")
      grant.addOIDCClaims(["email", "email_verified", "groups", "hd", "tid", "name"])
      await grant.save()
      return grant
    }
  } as any)
  provider.on("server_error", () => {})
  const callback = provider.callback()

  const idp: Idp = {
    url,
    issuerUrl,
    tokenIssuer,
    tamper: null,
    login: async (authorizeUrl, sub) => {
      const cookies = new Map<string, string>()
      const cookieHeader = () => [...cookies].map(([k, v]) => `${k}=${v}`).join("; ")
      const keep = (res: Response) => {
        for (const c of res.headers.getSetCookie()) {
          const [pair] = c.split(";")
          const [name, ...value] = pair!.split("=")
          cookies.set(name!.trim(), value.join("="))
        }
      }
      let next = new URL(authorizeUrl)
      for (let hop = 0; hop < 12; hop++) {
        if (next.href.startsWith(options.redirectUri)) return next
        let res = await fetch(next, { redirect: "manual", headers: { cookie: cookieHeader() } })
        keep(res)
        if (res.status === 200 && next.pathname.startsWith("/interaction/")) {
          const html = await res.text()
          const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1] ?? next.pathname
          res = await fetch(new URL(action, next), {
            method: "POST",
            redirect: "manual",
            headers: { cookie: cookieHeader(), "content-type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams({ prompt: "login", login: sub, password: "any" })
          })
          keep(res)
        }
        const location = res.headers.get("location")
        if (location === null) throw new Error(`the provider answered ${res.status} at ${next.pathname}: ${(await res.text()).slice(0, 300)}`)
        next = new URL(location, next)
      }
      throw new Error("too many redirects at the provider")
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }

  /** the provider's token answer, its ID token re-signed as the test asked */
  const tampered = async (body: string) => {
    const json = JSON.parse(body) as Record<string, unknown>
    if (idp.tamper === null || typeof json.id_token !== "string") return body
    const header = decodeProtectedHeader(json.id_token)
    const claims = idp.tamper.claims ? idp.tamper.claims(decodeJwt(json.id_token) as Record<string, unknown>) : decodeJwt(json.id_token)
    const jwt = new SignJWT(claims as any)
    json.id_token = idp.tamper.hs256Secret !== undefined
      ? await jwt.setProtectedHeader({ alg: "HS256" }).sign(new TextEncoder().encode(idp.tamper.hs256Secret))
      : await jwt.setProtectedHeader({ alg: "RS256", kid: header.kid ?? "k1" }).sign(idp.tamper.foreignKey ? (await generateKeyPair("RS256")).privateKey : privateKey)
    return JSON.stringify(json)
  }

  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? "/").split("?")[0]!
    if (options.flavor === "entra" && path === "/common/v2.0/.well-known/openid-configuration") {
      const answer = await fetch(`${url}/.well-known/openid-configuration`)
      const doc = await answer.json() as Record<string, unknown>
      doc.issuer = `${url}/{tenantid}/v2.0`
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(doc))
      return
    }
    if (path === "/token" && req.method === "POST" && idp.tamper !== null) {
      // forward to the provider itself, then change its answer
      const body = await readBody(req)
      const headers: Record<string, string> = { "content-type": String(req.headers["content-type"] ?? "application/x-www-form-urlencoded") }
      if (req.headers.authorization !== undefined) headers.authorization = req.headers.authorization
      const answer = await fetch(`${url}/token-upstream`, { method: "POST", headers, body: new Uint8Array(body) })
      const text = await answer.text()
      res.writeHead(answer.status, { "content-type": "application/json" }).end(answer.status === 200 ? await tampered(text) : text)
      return
    }
    if (path === "/token-upstream") req.url = "/token"
    callback(req, res)
  })
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", () => resolve()))
  return idp
}
