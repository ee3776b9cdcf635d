/**
 * What SSO is for (decisions §12), through SAML: with an `enforce` SAML connection the consent page
 * sends the person to the IdP, the IdP's form post to our ACS brings them back to the consent page
 * signed in (session cookie), the approvable scopes are capped by their groups, and the approval is
 * bound to the SSO session; another person signed in is refused (403 PRINCIPAL_MISMATCH), and a
 * refused SAML Response comes back to the consent page with error=access_denied.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { type SamlIdp, startSamlIdp } from "../support/saml-idp.ts"
import { atIdp, PUBLIC_BASE_URL, postForm, rememberPreLogin, SAML_ENV, type SamlConnection, samlConnection } from "./saml-support.ts"

let app: TestApp
let idp: SamlIdp
const started = Date.now()

beforeAll(async () => {
  app = await startTestApp({ env: SAML_ENV, testClock: true, startTime: started })
  idp = await startSamlIdp({ now: () => new Date(started) })
})
afterAll(async () => {
  await idp.stop()
  await app.stop()
})

/** an enforce SAML connection and a pending request for ann (email:read is in her groups, calendar:read is not) */
const world = async () => {
  const c = await samlConnection(app, idp, { extra: { enforce: true } })
  const agentId = await createAgent(app, c.developerId, ["email:read", "calendar:read"])
  const res = await app.request("POST", "/v1/authorize", { apiKey: c.apiKey, body: { agentId, principalId: "ann@example.com", scopes: ["email:read", "calendar:read"] } })
  expect(res.status, res.text).toBe(201)
  return { c, requestId: res.body.authRequestId as string }
}

const page = async (path: string, cookie?: string) => {
  const res = await fetch(app.url + path, { redirect: "manual", headers: cookie === undefined ? {} : { cookie } })
  rememberPreLogin(res.headers)
  return { status: res.status, location: res.headers.get("location"), text: await res.text() }
}

/** consent page → IdP → ACS: the ACS's answer */
const signInFromConsent = async (c: SamlConnection, requestId: string) => {
  const consent = await page(`/consent?req=${requestId}`)
  expect(consent.status).toBe(303)
  expect(consent.location!.startsWith(idp.ssoUrl)).toBe(true)
  const form = await atIdp(consent.location!)
  expect(form.action).toBe(c.spAcsUrl)
  return postForm(app, form.action, form.fields)
}

const cookieOf = (setCookie: string | null) => setCookie!.split(";")[0]!

test("consent page → IdP → ACS → consent page signed in; approval capped by the groups and bound to the session", async () => {
  const { c, requestId } = await world()
  idp.login = { user: { nameId: "00u-ann", email: "ann@example.com", groups: ["engineering"] } }
  const back = await signInFromConsent(c, requestId)
  expect(back.status, back.text).toBe(303)
  expect(back.location).toBe(`${PUBLIC_BASE_URL}/consent?req=${encodeURIComponent(requestId)}`)
  const cookie = cookieOf(back.setCookie)

  const signedIn = await page(`/consent?req=${requestId}`, cookie)
  expect(signedIn.status).toBe(200)
  expect(signedIn.text).toContain("Signed in as ann@example.com through your organisation. 1 requested scope(s) are outside what your groups allow")

  const approved = await fetch(`${app.url}/consent/approve`, {
    method: "POST", redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie },
    body: new URLSearchParams({ req: requestId }).toString()
  })
  expect(approved.status).toBe(200)
  const [request] = await app.query(
    `SELECT r.status, r.sso_session_id, g.scopes, g.approval_method FROM auth_requests r JOIN grants g ON g.id = r.grant_id WHERE r.id = $1`, [requestId])
  const [session] = await app.query("SELECT id FROM sso_sessions WHERE connection_id = $1", [c.id])
  expect(request).toEqual({ status: "approved", ssoSessionId: session.id, scopes: ["email:read"], approvalMethod: "sso" })
})

test("another person signed in at the IdP: 403 PRINCIPAL_MISMATCH, nothing approved", async () => {
  const { c, requestId } = await world()
  idp.login = { user: { nameId: "00u-bob", email: "bob@example.com", groups: ["engineering"] } }
  const back = await signInFromConsent(c, requestId)
  expect(back.status).toBe(303)
  const mismatch = await page(`/consent?req=${requestId}`, cookieOf(back.setCookie))
  expect(mismatch.status).toBe(403)
  expect(mismatch.text).toContain("PRINCIPAL_MISMATCH")
  expect((await app.query("SELECT status FROM auth_requests WHERE id = $1", [requestId]))[0].status).toBe("pending")
})

test("a refused SAML Response: back to the consent page with error=access_denied, no session", async () => {
  const { c, requestId } = await world()
  idp.login = { user: { nameId: "00u-ann", email: "ann@example.com" }, issue: { sign: "none" } }
  const back = await signInFromConsent(c, requestId)
  expect(back.status).toBe(303)
  expect(back.location).toBe(`${PUBLIC_BASE_URL}/consent?req=${encodeURIComponent(requestId)}&error=access_denied`)
  expect(back.setCookie).toBeNull()
  const refused = await page(`/consent?req=${requestId}&error=access_denied`)
  expect(refused.status).toBe(401)
  expect(refused.text).toContain("Sign-in refused")
})

test("a NameID equal to another principal's id does not become them: the JIT user is sso:<connection>:<NameID>, 403 PRINCIPAL_MISMATCH", async () => {
  const c = await samlConnection(app, idp, { extra: { enforce: true } })
  const agentId = await createAgent(app, c.developerId, ["email:read"])
  // ceo@corp.example is named freely by the developer (no directory user); the IdP controls NameID and the email attribute
  const res = await app.request("POST", "/v1/authorize", { apiKey: c.apiKey, body: { agentId, principalId: "ceo@corp.example", scopes: ["email:read"] } })
  const requestId = res.body.authRequestId as string
  idp.login = { user: { nameId: "ceo@corp.example", email: "ceo@corp.example", groups: ["engineering"] } }
  const back = await signInFromConsent(c, requestId)
  expect(back.status, back.text).toBe(303)
  const [session] = await app.query("SELECT principal_id FROM sso_sessions WHERE connection_id = $1", [c.id])
  expect(session.principalId).toBe(`sso:${c.id}:ceo@corp.example`)
  expect(await app.query("SELECT user_name, principal_id FROM scim_users WHERE developer_id = $1", [c.developerId]))
    .toEqual([{ userName: `sso:${c.id}:ceo@corp.example`, principalId: `sso:${c.id}:ceo@corp.example` }])
  const cookie = cookieOf(back.setCookie)
  const mismatch = await page(`/consent?req=${requestId}`, cookie)
  expect(mismatch.status).toBe(403)
  expect(mismatch.text).toContain("PRINCIPAL_MISMATCH")
  const approve = await app.request("POST", `/v1/consent/${requestId}/approve`, { headers: { cookie } })
  expect(approve.status).toBe(403)
  expect(approve.body.code).toBe("PRINCIPAL_MISMATCH")
  expect((await app.query("SELECT status FROM auth_requests WHERE id = $1", [requestId]))[0].status).toBe("pending")
})

test("login CSRF: a Response posted to the ACS by a browser that did not start the sign-in plants no session", async () => {
  const { c, requestId } = await world()
  idp.login = { user: { nameId: "00u-ann", email: "ann@example.com", groups: ["engineering"] } }
  // the attacker starts the sign-in (consent page → IdP) and keeps the IdP's form; the victim's browser posts it, without the attacker's cookie
  const consent = await page(`/consent?req=${requestId}`)
  const form = await atIdp(consent.location!)
  const planted = await postForm(app, form.action, form.fields, "")
  expect(planted.status).toBe(303)
  expect(planted.location).toBe(`${PUBLIC_BASE_URL}/consent?req=${encodeURIComponent(requestId)}&error=access_denied`)
  expect(planted.setCookie).toBeNull()
  expect(await app.query("SELECT count(*)::int AS n FROM sso_sessions WHERE connection_id = $1", [c.id])).toEqual([{ n: 0 }])
})
