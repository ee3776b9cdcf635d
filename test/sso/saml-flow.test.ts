/**
 * SAML through the HTTP routes (decisions §12), against the samlify IdP on loopback: the SP
 * metadata, the SP-initiated login (login → IdP → the browser's form post to the ACS → 303 with the
 * session cookie, principal provisioned JIT and found again at the next login), the JSON callback,
 * and one refusal per rule as the browser sees it (303 with error=access_denied, no cookie, no
 * session) or as the JSON callback answers it (401 SSO_AUTH_FAILED / 502 SSO_ERROR).
 * Runs on TestClock started at the real time, so the IdP's times and ours agree and certificates
 * can be made to expire.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { SsoConnections } from "../../src/sso/Connections.ts"
import { claimAssertionId } from "../../src/sso/saml/Replay.ts"
import { SamlService } from "../../src/sso/saml/Service.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { type SamlIdp, startSamlIdp } from "../support/saml-idp.ts"
import { tamper } from "../support/saml-tamper.ts"
import {
  atIdp, beginLogin, expectRefused, postForm, REDIRECT_URI, SAML_ENV, type SamlConnection, samlConnection, sessionsOf, signIn
} from "./saml-support.ts"

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

const ann = { nameId: "00u-ann", email: "ann@example.com", groups: ["engineering", "admins"] }
const login = (settings: Partial<SamlIdp["login"]> = {}) => {
  idp.login = { user: ann, ...settings }
}

test("SP metadata: entity id, ACS with the HTTP-POST binding, signed assertions wanted; unknown connection 404", async () => {
  const c = await samlConnection(app, idp)
  const res = await app.request("GET", `/sso/saml/metadata/${c.id}`)
  expect(res.status).toBe(200)
  expect(res.headers.get("content-type")).toContain("application/samlmetadata+xml")
  expect(res.text).toContain(`entityID="${c.spEntityId}"`)
  expect(res.text).toContain(`Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="${c.spAcsUrl}"`)
  expect(res.text).toContain(`WantAssertionsSigned="true"`)
  const missing = await app.request("GET", "/sso/saml/metadata/ssoconn_nope")
  expect(missing.status).toBe(404)
  expect(missing.body.code).toBe("NOT_FOUND")
})

test("SP-initiated login: AuthnRequest to the IdP, form post to the ACS, 303 with the session cookie; JIT once, then found again", async () => {
  const c = await samlConnection(app, idp)
  login()
  const { form, answer } = await signIn(app, c)
  // the IdP received our AuthnRequest: our entity id, our ACS, addressed to it
  const request = idp.requests.at(-1)!
  expect(request).toMatchObject({ issuer: c.spEntityId, acsUrl: c.spAcsUrl, destination: idp.ssoUrl })
  expect(form.action).toBe(c.spAcsUrl)
  expect(form.fields.RelayState).toBe(request.relayState!)

  expect(answer.status, answer.text).toBe(303)
  const [session] = await sessionsOf(app, c)
  expect(answer.location).toBe(`${REDIRECT_URI}?sso_session=${session!.id}`)
  expect(answer.setCookie).toMatch(/^__Host-[^=]+=[^;]+; Path=\/; Max-Age=28800; HttpOnly; Secure; SameSite=Lax$/)
  expect(session!.groups).toEqual(["engineering", "admins"])
  expect(session!.mappedScopes).toEqual(["email:read", "email:send", "profile:read"])
  // JIT: a directory user with userName = the verified in-domain email, externalId = sso:<connection>:<NameID> (never a bare NameID)
  const users = await app.query("SELECT user_name, external_id, principal_id FROM scim_users WHERE developer_id = $1", [c.developerId])
  expect(users).toEqual([{ userName: "ann@example.com", externalId: `sso:${c.id}:00u-ann`, principalId: session!.principalId }])
  const [event] = await app.query("SELECT data FROM events WHERE developer_id = $1 AND type = 'sso.login'", [c.developerId])
  expect(event.data).toEqual({ connectionId: c.id, protocol: "saml", sessionId: session!.id })
  // the assertion id is held until it could no longer be accepted
  const [claim] = await app.query("SELECT assertion_id, expires_at FROM sso_saml_assertions WHERE connection_id = $1", [c.id])
  expect(new Date(claim.expiresAt).getTime()).toBe(started + 300_000 + 60_000)

  // the same person again: the same principal, no second directory user
  const again = await signIn(app, c)
  expect(again.answer.status).toBe(303)
  const sessions = await sessionsOf(app, c)
  expect(sessions.map((s) => s.principalId)).toEqual([session!.principalId, session!.principalId])
  expect((await app.query("SELECT count(*)::int AS n FROM scim_users WHERE developer_id = $1", [c.developerId]))[0].n).toBe(1)
})

test("an email outside the connection's domains is not used: the JIT user is named sso:<connection>:<NameID>", async () => {
  const c = await samlConnection(app, idp, { domains: ["corp.example"] })
  login({ user: { nameId: "00u-bob", email: "bob@gmail.com" } })
  expect((await signIn(app, c)).answer.status).toBe(303)
  const users = await app.query("SELECT user_name, external_id FROM scim_users WHERE developer_id = $1", [c.developerId])
  expect(users).toEqual([{ userName: `sso:${c.id}:00u-bob`, externalId: `sso:${c.id}:00u-bob` }])
})

test("rollover: a Response signed with the IdP's next certificate is accepted when the metadata lists both", async () => {
  const c = await samlConnection(app, idp, { metadataXml: idp.metadataXml([idp.keys.current, idp.keys.next]) })
  login({ issue: { key: idp.keys.next } })
  expect((await signIn(app, c)).answer.status).toBe(303)
})

describe("refusals at the ACS: 303 with error=access_denied, no cookie, no session", () => {
  // a function when the settings need the IdP (started in beforeAll)
  const refusedFor = (settings: Partial<SamlIdp["login"]> | (() => Partial<SamlIdp["login"]>)) => async () => {
    const c = await samlConnection(app, idp)
    login(typeof settings === "function" ? settings() : settings)
    await expectRefused(app, c, (await signIn(app, c)).answer)
  }
  test("unsigned", refusedFor({ issue: { sign: "none" } }))
  test("only the Response signed", refusedFor({ issue: { sign: "response" } }))
  test("signed by a key the connection does not hold", refusedFor(() => ({ issue: { key: idp.keys.unknown } })))
  test("audience of another SP", refusedFor({ issue: { audience: "https://other.example/sp" } }))
  test("Recipient of another ACS", refusedFor({ issue: { recipient: "https://other.example/acs" } }))
  test("Destination of another ACS", refusedFor({ issue: { destination: "https://other.example/acs" } }))
  test("XSW: evil assertion, signed original in Extensions", refusedFor({ rewrite: (x) => tamper.wrapInExtensions(x, "00u-admin") }))
  test("XSW: evil assertion beside the signed one", refusedFor({ rewrite: (x) => tamper.addSibling(x, "00u-admin") }))
  test("NameID changed after signing", refusedFor({ rewrite: (x) => tamper.nameId(x, "00u-admin") }))
  test("an assertion older than 10 minutes", refusedFor({ issue: { issuedAt: new Date(started - 11 * 60_000), validForSeconds: 3600 } }))
  test("an expired assertion", refusedFor({ issue: { issuedAt: new Date(started - 200_000), validForSeconds: 120 } }))
  test("InResponseTo of another request", refusedFor({ issue: { inResponseTo: "_someone-elses-request" } }))
  test("the IdP's error status", refusedFor({ issue: { statusCode: "urn:oasis:names:tc:SAML:2.0:status:Responder" } }))

  test("replayed assertion id in a new login", async () => {
    const c = await samlConnection(app, idp)
    login({ issue: { assertionId: "_replayed-assertion" } })
    expect((await signIn(app, c)).answer.status).toBe(303)
    const second = await signIn(app, c)
    expect(second.answer.status).toBe(303)
    expect(second.answer.location).toBe(`${REDIRECT_URI}?error=access_denied`)
    expect(second.answer.setCookie).toBeNull()
    expect(await sessionsOf(app, c)).toHaveLength(1)
  })

  test("posted to another connection's ACS", async () => {
    const c = await samlConnection(app, idp)
    const other = await samlConnection(app, idp)
    login()
    const form = await atIdp(await beginLogin(app, c))
    await expectRefused(app, c, await postForm(app, other.spAcsUrl, form.fields))
  })
})

describe("refusals with nowhere to send the browser back", () => {
  test("the same form posted twice: the state is single use (400 page, as the OIDC callback)", async () => {
    const c = await samlConnection(app, idp)
    login()
    const { form, answer } = await signIn(app, c)
    expect(answer.status).toBe(303)
    const replay = await postForm(app, form.action, form.fields)
    expect(replay.status).toBe(400)
    expect(replay.text).toContain("Sign-in expired")
    expect(replay.setCookie).toBeNull()
    expect(await sessionsOf(app, c)).toHaveLength(1)
  })
  test("unknown RelayState (400 page, nothing consumed)", async () => {
    const c = await samlConnection(app, idp)
    login()
    const form = await atIdp(await beginLogin(app, c))
    const res = await postForm(app, form.action, { ...form.fields, RelayState: "not-a-state" })
    expect(res.status).toBe(400)
    expect(res.text).toContain("Sign-in expired")
    expect(await sessionsOf(app, c)).toEqual([])
    // the real state still works afterwards
    expect((await postForm(app, form.action, form.fields)).status).toBe(303)
  })
  test("a signed Response padded past 1 MiB: the form post is refused before it is read (413), nothing consumed", async () => {
    const c = await samlConnection(app, idp)
    login({ rewrite: (x) => tamper.padTo(x, 1024 * 1024 + 4) })
    const form = await atIdp(await beginLogin(app, c))
    expect(form.fields.SAMLResponse!.length).toBe(1024 * 1024 + 4)
    const res = await fetch(app.url + new URL(form.action).pathname, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(form.fields).toString()
    })
    expect(res.status).toBe(413)
    expect((await res.json()).code).toBe("PAYLOAD_TOO_LARGE")
    expect(await sessionsOf(app, c)).toEqual([])
  })
  test("IdP-initiated (no RelayState, no InResponseTo): a 400 page saying to start from the application", async () => {
    const c = await samlConnection(app, idp)
    const samlResponse = await idp.issue({ sp: { entityId: c.spEntityId, acsUrl: c.spAcsUrl }, user: ann })
    const res = await postForm(app, c.spAcsUrl, { SAMLResponse: samlResponse })
    expect(res.status).toBe(400)
    expect(res.text).toContain("IdP-initiated")
    expect(res.setCookie).toBeNull()
    expect(await sessionsOf(app, c)).toEqual([])
  })
  test("missing SAMLResponse: 400", async () => {
    const c = await samlConnection(app, idp)
    const res = await postForm(app, `${c.spAcsUrl}`, { RelayState: "x" })
    expect(res.status).toBe(400)
  })
})

describe("JSON callback (POST /sso/callback/saml)", () => {
  const callback = (fields: Record<string, string>) => app.request("POST", "/sso/callback/saml", { body: fields })

  test("200 with the session, as the OIDC JSON callback", async () => {
    const c = await samlConnection(app, idp)
    login()
    const form = await atIdp(await beginLogin(app, c))
    const res = await callback(form.fields)
    expect(res.status, res.text).toBe(200)
    const [session] = await sessionsOf(app, c)
    expect(res.body).toEqual({
      sessionId: session!.id,
      principalId: session!.principalId,
      developerId: c.developerId,
      expiresAt: new Date(started + 8 * 3600_000).toISOString(),
      groups: ["engineering", "admins"],
      mappedScopes: ["email:read", "email:send", "profile:read"]
    })
  })
  test("a refused identity: 401 SSO_AUTH_FAILED", async () => {
    const c = await samlConnection(app, idp)
    login({ issue: { sign: "none" } })
    const res = await callback((await atIdp(await beginLogin(app, c))).fields)
    expect(res.status).toBe(401)
    expect(res.body.code).toBe("SSO_AUTH_FAILED")
    expect(await sessionsOf(app, c)).toEqual([])
  })
  test("an unknown state: 401 SSO_AUTH_FAILED", async () => {
    const res = await callback({ SAMLResponse: "PHg+", RelayState: "nope" })
    expect(res.status).toBe(401)
    expect(res.body.code).toBe("SSO_AUTH_FAILED")
  })
})

test("after the old certificate of a rollover expires: a Response it signs is refused, one the new certificate signs is accepted", async () => {
  const c = await samlConnection(app, idp, { metadataXml: idp.metadataXml([idp.keys.current, idp.keys.next]) })
  const later = started + 400 * 86_400_000 // the current certificate (365 days) has expired, the next (730 days) has not
  await app.setTime(later)
  try {
    login({ issue: { issuedAt: new Date(later), key: idp.keys.current } })
    await expectRefused(app, c, (await signIn(app, c)).answer)
    login({ issue: { issuedAt: new Date(later), key: idp.keys.next } })
    expect((await signIn(app, c)).answer.status).toBe(303)
    expect(await sessionsOf(app, c)).toHaveLength(1)
  } finally {
    await app.setTime(started)
  }
})

test("an IdP certificate that expired after import: the ACS refuses (303), the JSON callback answers 502 SSO_ERROR", async () => {
  const c = await samlConnection(app, idp)
  // a year and a month later the IdP's certificate (valid 365 days) has expired; the IdP still signs with it
  const later = started + 400 * 86_400_000
  await app.setTime(later)
  try {
    login({ issue: { issuedAt: new Date(later) } })
    await expectRefused(app, c, (await signIn(app, c)).answer)
    const res = await app.request("POST", "/sso/callback/saml", { body: (await atIdp(await beginLogin(app, c))).fields })
    expect(res.status).toBe(502)
    expect(res.body.code).toBe("SSO_ERROR")
    expect(res.body.message).toContain("expired")
  } finally {
    await app.setTime(started)
  }
})

test("assertion ids: claimed once per connection until their time, then taken over; rows past their time purged", async () => {
  const c = await samlConnection(app, idp)
  const other = await samlConnection(app, idp)
  const claim = (connectionId: string, assertionId: string, nowMs: number, retainUntilMs = started + 60_000) =>
    app.run(claimAssertionId({ connectionId, assertionId, retainUntilMs, nowMs }))
  expect(await claim(c.id, "_a1", started)).toBe(true)
  expect(await claim(c.id, "_a1", started + 59_999)).toBe(false)
  // the same id from another connection's IdP is another assertion
  expect(await claim(other.id, "_a1", started)).toBe(true)
  expect(await claim(c.id, "_a2", started, started + 10_000)).toBe(true)
  // past its time the id can be claimed again (its assertion is refused by then anyway), and old rows go
  expect(await claim(c.id, "_a1", started + 60_000, started + 120_000)).toBe(true)
  const rows = await app.query("SELECT connection_id, assertion_id FROM sso_saml_assertions WHERE connection_id IN ($1, $2) ORDER BY 1, 2", [c.id, other.id])
  expect(rows).toEqual([{ connectionId: c.id, assertionId: "_a1" }])
})

test("the connection test: the SSO URL and each certificate's validity; an expired one fails it", async () => {
  const c = await samlConnection(app, idp, { metadataXml: idp.metadataXml([idp.keys.current, idp.keys.next]) })
  const run = () => app.run(Effect.gen(function*() {
    const connection = yield* (yield* SsoConnections).findById(c.id)
    return yield* (yield* SamlService).test(connection!)
  }))
  const now = await run()
  expect(now.ok).toBe(true)
  expect(now.checks.map((check) => [check.name, check.ok])).toEqual([["idpSsoUrl", true], ["certificate[0]", true], ["certificate[1]", true]])
  expect(now.checks[1]!.detail).toMatch(/^CN=current\.idp\.test, valid until .* \(36[45] days\)$/)
  await app.setTime(started + 400 * 86_400_000)
  try {
    const later = await run()
    expect(later.ok).toBe(false)
    expect(later.checks.map((check) => [check.name, check.ok])).toEqual([["idpSsoUrl", true], ["certificate[0]", false], ["certificate[1]", true]])
    expect(later.checks[1]!.detail).toMatch(/^CN=current\.idp\.test expired on /)
  } finally {
    await app.setTime(started)
  }
})
