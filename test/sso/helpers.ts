/** Shared set-up of the SSO tests: an app on a known port (the redirect URI registered at the providers) and a login. */
import { freePort } from "../support/net.ts"
import { startTestApp, type TestApp, type TestAppOptions } from "../support/app.ts"
import type { Idp } from "../support/oidc-idp.ts"

export const startSsoApp = async (options: TestAppOptions & { host?: string } = {}) => {
  const port = await freePort()
  const base = `http://${options.host ?? "127.0.0.1"}:${port}`
  const app = await startTestApp({
    ...options,
    env: { PORT: String(port), PUBLIC_BASE_URL: base, SSO_ALLOW_PRIVATE_HOSTS: "true", ...options.env }
  })
  return { app, base, redirectUri: `${base}/sso/oidc/callback` }
}

export const oidcConnection = (idp: Idp, extra: Record<string, unknown> = {}) => ({
  name: "Workforce",
  protocol: "oidc",
  issuerUrl: idp.issuerUrl,
  clientId: "aas-client",
  clientSecret: "s3cret-value-never-returned",
  scopes: "openid email profile groups",
  ...extra
})

export const createConnection = async (app: TestApp, apiKey: string, body: Record<string, unknown>) => {
  const res = await app.request("POST", "/v1/sso/connections", { apiKey, body })
  if (res.status !== 201) throw new Error(`connection: ${res.status} ${res.text}`)
  return res.body as { id: string } & Record<string, any>
}

/** the `name=value` of the pre-login cookie (login CSRF binding) an answer that starts a sign-in sets */
export const preLoginCookie = (headers: Headers): string | undefined =>
  headers.getSetCookie().map((c) => c.split(";")[0]!).find((c) => c.startsWith("__Host-aas_login_"))

/** GET /sso/login → the provider's login as `sub` → the callback URL's code and state, and the browser's pre-login cookie */
export const loginAt = async (app: TestApp, idp: Idp, developerId: string, sub: string, params: Record<string, string> = {}) => {
  const begun = await app.request("GET", `/sso/login?${new URLSearchParams({ org: developerId, ...params })}`)
  if (begun.status !== 200) throw new Error(`login: ${begun.status} ${begun.text}`)
  const back = await idp.login(begun.body.authorizeUrl, sub)
  return {
    code: back.searchParams.get("code")!, state: back.searchParams.get("state")!, callback: back, authorizeUrl: begun.body.authorizeUrl as string,
    cookie: preLoginCookie(begun.headers)!
  }
}

/** the JSON relay of a login: 200 with the session, or the error */
export const loginJson = async (app: TestApp, idp: Idp, developerId: string, sub: string, params: Record<string, string> = {}) => {
  const { code, state } = await loginAt(app, idp, developerId, sub, params)
  return app.request("POST", "/sso/callback/oidc", { body: { code, state } })
}
