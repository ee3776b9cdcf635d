/**
 * The SAML flow as a browser walks it, for the route tests: create a SAML connection from the
 * IdP's metadata, start a login, follow the redirect to the samlify IdP, and post its auto-submit
 * form to our ACS (application/x-www-form-urlencoded, as a browser does).
 */
import { expect } from "bun:test"
import type { TestApp } from "../support/app.ts"
import { GROUPS_ATTRIBUTE, readPostForm, type SamlIdp } from "../support/saml-idp.ts"

export const PUBLIC_BASE_URL = "https://auth.example.test"
export const REDIRECT_URI = "https://app.example.test/after-sso"
// the flow tests sign in more often a minute than the per-address route limits allow one person
export const SAML_ENV = { PUBLIC_BASE_URL, SSO_ALLOW_PRIVATE_HOSTS: "true", RATE_LIMIT_SCALE: "10" }

export interface SamlConnection {
  readonly id: string
  readonly developerId: string
  readonly apiKey: string
  readonly spEntityId: string
  readonly spAcsUrl: string
}

/** A SAML connection of a new developer, made from the IdP's metadata; the IdP trusts its SP values. */
export const samlConnection = async (
  app: TestApp,
  idp: SamlIdp,
  o: {
    readonly domains?: ReadonlyArray<string>
    readonly metadataXml?: string
    readonly developer?: { apiKey: string; developerId: string }
    /** further fields of the create body (enforce, …) */
    readonly extra?: Record<string, unknown>
  } = {}
): Promise<SamlConnection> => {
  const developer = o.developer ?? await app.signup()
  const res = await app.request("POST", "/v1/sso/connections", {
    apiKey: developer.apiKey,
    body: {
      name: "Okta",
      protocol: "saml",
      idpMetadataXml: o.metadataXml ?? idp.metadataXml(),
      domains: o.domains ?? ["example.com"],
      groupsClaim: GROUPS_ATTRIBUTE,
      groupMappings: { engineering: ["email:read"], admins: ["email:send"] },
      defaultScopes: ["profile:read"],
      allowedRedirectUris: [REDIRECT_URI],
      ...o.extra
    }
  })
  expect(res.status, res.text).toBe(201)
  const connection = { id: res.body.id, developerId: developer.developerId, apiKey: developer.apiKey, spEntityId: res.body.spEntityId, spAcsUrl: res.body.spAcsUrl }
  // the administrator gives the IdP our SP metadata (its URL is spMetadataUrl)
  const metadata = await app.request("GET", new URL(connection.spEntityId).pathname)
  expect(metadata.status).toBe(200)
  expect(idp.trust(metadata.text)).toEqual({ entityId: connection.spEntityId, acsUrl: connection.spAcsUrl })
  return connection
}

/** The test browser's pre-login cookies (login CSRF binding): kept from the answers that start a sign-in, sent to the ACS. */
const preLogin = new Map<string, string>()
export const rememberPreLogin = (headers: Headers) => {
  for (const c of headers.getSetCookie()) {
    const [pair] = c.split(";")
    const [name, ...value] = pair!.split("=")
    if (name!.startsWith("__Host-aas_login_")) preLogin.set(name!, value.join("="))
  }
}
export const preLoginCookies = () => [...preLogin].map(([k, v]) => `${k}=${v}`).join("; ")

/** `GET /sso/login` for the connection, back to REDIRECT_URI: the IdP URL (HTTP-Redirect binding). */
export const beginLogin = async (app: TestApp, c: SamlConnection): Promise<string> => {
  const query = new URLSearchParams({ org: c.developerId, connection: c.id, redirect_uri: REDIRECT_URI })
  const res = await app.request("GET", `/sso/login?${query}`)
  expect(res.status, res.text).toBe(200)
  rememberPreLogin(res.headers)
  expect(res.body).toMatchObject({ protocol: "saml", connectionId: c.id })
  return res.body.authorizeUrl
}

/** The browser at the IdP: its answer is the auto-submitting form to the ACS. */
export const atIdp = async (authorizeUrl: string) => {
  const res = await fetch(authorizeUrl, { redirect: "manual" })
  const text = await res.text()
  expect(res.status, text).toBe(200)
  return readPostForm(text)
}

export interface Answer {
  readonly status: number
  readonly location: string | null
  readonly setCookie: string | null
  readonly text: string
}

/** The form posted by the browser to our ACS (the action's path, on the test server), with the browser's pre-login cookies. */
export const postForm = async (app: TestApp, action: string, fields: Record<string, string>, cookie = preLoginCookies()): Promise<Answer> => {
  const res = await fetch(app.url + new URL(action).pathname, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...(cookie === "" ? {} : { cookie }) },
    body: new URLSearchParams(fields).toString(),
    redirect: "manual"
  })
  return { status: res.status, location: res.headers.get("location"), setCookie: res.headers.get("set-cookie"), text: await res.text() }
}

/** login → IdP → ACS: what the browser gets back from the ACS */
export const signIn = async (app: TestApp, c: SamlConnection) => {
  const form = await atIdp(await beginLogin(app, c))
  return { form, answer: await postForm(app, form.action, form.fields) }
}

export const sessionsOf = (app: TestApp, c: SamlConnection) =>
  app.query<{ id: string; principalId: string; groups: Array<string>; mappedScopes: Array<string> }>(
    "SELECT id, principal_id, groups, mapped_scopes FROM sso_sessions WHERE connection_id = $1 ORDER BY created_at, id", [c.id])

/** 303 back to the stored redirect with error=access_denied, no cookie, no session */
export const expectRefused = async (app: TestApp, c: SamlConnection, answer: Answer) => {
  expect(answer.status, answer.text).toBe(303)
  expect(answer.location).toBe(`${REDIRECT_URI}?error=access_denied`)
  expect(answer.setCookie).toBeNull()
  expect(await sessionsOf(app, c)).toEqual([])
}
