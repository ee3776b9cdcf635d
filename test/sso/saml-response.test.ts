/**
 * SAML Response checks (decisions §12) against a real samlify IdP: one accepted Response, then one
 * refusal per rule, each asserting the reason a person's login would be refused for. No server:
 * `checkSamlResponse` on a given time, as the service calls it with Effect's Clock.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { loadSamlLibraries } from "../../src/sso/saml/Library.ts"
import { inflateRawSync } from "node:zlib"
import { parseIdpMetadata, type SamlSettings } from "../../src/sso/saml/Metadata.ts"
import { authnRequestUrl } from "../../src/sso/saml/Request.ts"
import { checkSamlResponse, type ResponseInput } from "../../src/sso/saml/Response.ts"
import { identityOf } from "../../src/sso/saml/Identity.ts"
import { decodeResponse, encodeResponse, GROUPS_ATTRIBUTE, type SamlIdp, startSamlIdp } from "../support/saml-idp.ts"
import { tamper } from "../support/saml-tamper.ts"

let idp: SamlIdp
let settings: SamlSettings
const sp = { entityId: "https://auth.example.com/sso/saml/metadata/ssoc_1", acsUrl: "https://auth.example.com/sso/saml/acs/ssoc_1" }
const user = { nameId: "00u1abcd", email: "ann@example.com", groups: ["engineering", "admins"] }
const requestId = "_a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2"

beforeAll(async () => {
  // what the SAML service does before its first SAML work (issue 37: loaded on first use)
  await loadSamlLibraries()
  idp = await startSamlIdp()
  const parsed = parseIdpMetadata(idp.metadataXml([idp.keys.current, idp.keys.next]))
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems))
  settings = parsed.value
})
afterAll(() => idp.stop())

const check = (samlResponse: string, o: Partial<ResponseInput> = {}) =>
  checkSamlResponse({ samlResponse, settings, sp, requestId, nowMs: Date.now(), ...o })

const issue = (o: Partial<Parameters<SamlIdp["issue"]>[0]> = {}) => idp.issue({ sp, user, inResponseTo: requestId, ...o })
const rewrite = async (f: (xml: string) => string, o: Partial<Parameters<SamlIdp["issue"]>[0]> = {}) =>
  encodeResponse(f(decodeResponse(await issue(o))))

const refusedWith = async (samlResponse: string | Promise<string>, reason: RegExp, o: Partial<ResponseInput> = {}) => {
  const outcome = await check(await samlResponse, o)
  expect(outcome).toMatchObject({ ok: false, kind: "refused" })
  if (!outcome.ok) expect(outcome.reason).toMatch(reason)
}

test("a signed assertion answering our request is accepted: NameID, issuer, attributes, retention", async () => {
  const issuedAt = new Date(Date.now() - 5_000)
  const outcome = await check(await issue({ issuedAt, validForSeconds: 300 }))
  expect(outcome.ok).toBe(true)
  if (!outcome.ok) return
  expect(outcome.assertion.nameId).toBe("00u1abcd")
  expect(outcome.assertion.issuer).toBe(idp.entityId)
  expect(outcome.assertion.attributes[GROUPS_ATTRIBUTE]).toEqual(["engineering", "admins"])
  // kept until NotOnOrAfter (issue + 300 s, under the 10-minute cap) plus the 60 s skew
  expect(outcome.assertion.retainUntilMs).toBe(issuedAt.getTime() + 300_000 + 60_000)
  const identity = identityOf(outcome.assertion, { domains: ["example.com"], groupsClaim: GROUPS_ATTRIBUTE })
  expect(identity).toEqual({ issuer: idp.entityId, subject: "00u1abcd", email: "ann@example.com", emailVerified: true, groups: ["engineering", "admins"] })
})

test("a Response signed as a whole with a signed assertion inside is accepted; the rollover certificate verifies", async () => {
  expect((await check(await issue({ sign: "both" }))).ok).toBe(true)
  expect((await check(await issue({ key: idp.keys.next }))).ok).toBe(true)
})

describe("signatures", () => {
  test("unsigned", () => refusedWith(issue({ sign: "none" }), /not signed/))
  test("only the Response signed, the assertion not: a signed assertion is required", () => refusedWith(issue({ sign: "response" }), /not signed/))
  test("signatures stripped", () => refusedWith(rewrite(tamper.stripSignatures), /not signed/))
  test("a key the connection does not hold", () => refusedWith(issue({ key: idp.keys.unknown }), /not signed/))
  test("NameID changed after signing", () => refusedWith(rewrite((x) => tamper.nameId(x, "admin")), /not signed/))
  test("XSW: evil assertion, signed original in Extensions", () => refusedWith(rewrite((x) => tamper.wrapInExtensions(x, "admin")), /not signed/))
  test("XSW: evil assertion wrapping the signed original", () => refusedWith(rewrite((x) => tamper.nestOriginal(x, "admin")), /not signed/))
  test("XSW: evil assertion before the signed one", () => refusedWith(rewrite((x) => tamper.addSibling(x, "admin", true)), /multiple assertions/))
  test("XSW: evil assertion after the signed one", () => refusedWith(rewrite((x) => tamper.addSibling(x, "admin", false)), /multiple assertions/))
  test("XSW: evil assertion with the original's ID and signature", () => refusedWith(rewrite((x) => tamper.stealSignature(x, "admin")), /signature|ID cannot refer/i))
  test("a comment in the NameID does not truncate it (the signed text is the whole name)", async () => {
    const outcome = await check(await rewrite((x) => tamper.commentInNameId(x, 4), { user: { ...user, nameId: "admin.attacker" } }))
    expect(outcome.ok && outcome.assertion.nameId).toBe("admin.attacker")
  })
})

describe("certificates", () => {
  test("a certificate that has expired since import verifies nothing; with none left the provider failed (502)", async () => {
    const later = Date.now() + 800 * 86_400_000 // both certificates have expired by then
    const outcome = await check(await issue({ issuedAt: new Date(later) }), { nowMs: later })
    expect(outcome).toMatchObject({ ok: false, kind: "provider" })
  })
  test("signed with an expired certificate the connection still lists: refused", async () => {
    const withExpired = { ...settings, idpCertificates: [...settings.idpCertificates, idp.keys.expired.certificatePem] }
    await refusedWith(issue({ key: idp.keys.expired }), /not signed/, { settings: withExpired })
  })
})

describe("targets", () => {
  test("audience of another SP", () => refusedWith(issue({ audience: "https://other.example/sp" }), /audience/i))
  test("Recipient of another ACS", () => refusedWith(issue({ recipient: "https://other.example/acs" }), /Recipient/))
  test("Destination of another ACS (signed)", () => refusedWith(issue({ destination: "https://other.example/acs", sign: "both" }), /Destination/))
  test("Destination changed on an unsigned Response envelope", () => refusedWith(rewrite((x) => tamper.destination(x, "https://other.example/acs")), /Destination/))
  test("issuer of another IdP", () => refusedWith(issue({ issuer: "https://evil.example/idp" }), /Issuer/))
})

describe("InResponseTo", () => {
  test("answers another request", () => refusedWith(issue({ inResponseTo: "_another" }), /InResponseTo/))
  test("unsolicited (IdP-initiated, no InResponseTo)", () => refusedWith(issue({ inResponseTo: undefined }), /InResponseTo/))
})

describe("time (60 s skew)", () => {
  const now = Date.now()
  test("older than 10 minutes (even if NotOnOrAfter is later)", () =>
    refusedWith(issue({ issuedAt: new Date(now - 11 * 60_000 - 1), validForSeconds: 3600 }), /older than 10 minutes/, { nowMs: now }))
  test("10 minutes old plus 59 s of skew is still accepted", async () =>
    expect((await check(await issue({ issuedAt: new Date(now - 10 * 60_000 - 59_000), validForSeconds: 3600 }), { nowMs: now })).ok).toBe(true))
  test("past NotOnOrAfter (beyond the skew)", () =>
    refusedWith(issue({ issuedAt: new Date(now - 200_000), validForSeconds: 120 }), /expired/, { nowMs: now }))
  test("issued in the future beyond the skew", () => refusedWith(issue({ issuedAt: new Date(now + 120_000) }), /future/, { nowMs: now }))
  test("30 s in the future is within the skew", async () =>
    expect((await check(await issue({ issuedAt: new Date(now + 30_000) }), { nowMs: now })).ok).toBe(true))
})

describe("envelope", () => {
  test("over 1 MiB: refused before decoding", async () => {
    // valid base64 that would decode to 768 KiB of garbage: the refusal names the size, not the content
    await refusedWith("A".repeat(1024 * 1024 + 4), /exceeds 1048576 bytes/)
  })
  test("a validly signed Response padded outside its assertion: accepted at 1 MiB, refused beyond", async () => {
    const exactly = await rewrite((x) => tamper.padTo(x, 1024 * 1024))
    expect(exactly.length).toBe(1024 * 1024)
    expect((await check(exactly)).ok).toBe(true)
    const over = await rewrite((x) => tamper.padTo(x, 1024 * 1024 + 4))
    expect(over.length).toBe(1024 * 1024 + 4)
    await refusedWith(over, /exceeds 1048576 bytes/)
  })
  test("not base64", () => refusedWith("<samlp:Response/>", /not base64/))
  test("a DOCTYPE (entity expansion) is refused unparsed", () =>
    refusedWith(encodeResponse(`<!DOCTYPE r [<!ENTITY a "aaaa">]><samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol"/>`), /DOCTYPE/))
  test("not XML", () => refusedWith(encodeResponse("hello"), /not well-formed|not a SAML/))
  test("a transient NameID (a new identity at every sign-in)", () =>
    refusedWith(issue({ nameIdFormat: "urn:oasis:names:tc:SAML:2.0:nameid-format:transient" }), /transient NameID/))
  test("an IdP error status", () => refusedWith(issue({ statusCode: "urn:oasis:names:tc:SAML:2.0:status:Responder" }), /status/))
})

test("the AuthnRequest: HTTP-Redirect to the IdP's SSO URL, our Issuer and ACS, RelayState = state, the returned ID", async () => {
  const { url, requestId: id } = await authnRequestUrl(settings, sp, { relayState: "st_123" })
  const u = new URL(url)
  expect(u.origin + u.pathname).toBe(idp.ssoUrl)
  expect(u.searchParams.get("RelayState")).toBe("st_123")
  const xml = inflateRawSync(Buffer.from(u.searchParams.get("SAMLRequest")!, "base64")).toString()
  expect(xml).toContain(`ID="${id}"`)
  expect(xml).toContain(`AssertionConsumerServiceURL="${sp.acsUrl}"`)
  expect(xml).toContain(`Destination="${idp.ssoUrl}"`)
  expect(xml).toContain(`>${sp.entityId}</saml:Issuer>`)
  expect(xml).not.toContain("RequestedAuthnContext")
  expect(id).toMatch(/^_[0-9a-f]{40}$/)
})

describe("identity", () => {
  const assertion = (attributes: Record<string, ReadonlyArray<string>>) =>
    ({ assertionId: "_x", issuer: "https://idp", nameId: "n1", nameIdFormat: null, attributes, retainUntilMs: 0 })
  test("an email outside the connection's domains is reported but not verified", () => {
    expect(identityOf(assertion({ mail: ["bob@elsewhere.org"] }), { domains: ["example.com"], groupsClaim: null }))
      .toMatchObject({ email: "bob@elsewhere.org", emailVerified: false, groups: [] })
  })
  test("without domains no email is verified", () => {
    expect(identityOf(assertion({ email: ["bob@example.com"] }), { domains: [], groupsClaim: null }).emailVerified).toBe(false)
  })
  test("the standard OID attribute, domain compared case-insensitively; groups deduplicated", () => {
    expect(identityOf(assertion({ "urn:oid:0.9.2342.19200300.100.1.3": ["Bob@Example.COM"], g: ["a", "a", "b"] }), { domains: ["example.com"], groupsClaim: "g" }))
      .toMatchObject({ email: "Bob@Example.COM", emailVerified: true, groups: ["a", "b"] })
  })
})
