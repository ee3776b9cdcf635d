/**
 * decisions §19 (revised), issue 32: XML from outside is pre-scanned before any DOM is built. A
 * SAML Response nested 90,000 deep or carrying 40,000 attributes outside its signed assertion
 * (under the 1 MiB limit) is refused at once, and /health of the same process stays responsive;
 * IdP metadata gets the same scan.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { loadSamlLibraries } from "../../src/sso/saml/Library.ts"
import { parseIdpMetadata, type SamlSettings } from "../../src/sso/saml/Metadata.ts"
import { checkSamlResponse } from "../../src/sso/saml/Response.ts"
import { scanXml } from "../../src/sso/saml/XmlScan.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { decodeResponse, encodeResponse, type SamlIdp, startSamlIdp } from "../support/saml-idp.ts"
import { atIdp, beginLogin, SAML_ENV, samlConnection } from "./saml-support.ts"

let app: TestApp
let idp: SamlIdp
let settings: SamlSettings
beforeAll(async () => {
  // what the SAML service does before its first SAML work (issue 37: loaded on first use)
  await loadSamlLibraries()
  app = await startTestApp({ env: SAML_ENV })
  idp = await startSamlIdp()
  const parsed = parseIdpMetadata(idp.metadataXml())
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems))
  settings = parsed.value
})
afterAll(async () => {
  await idp?.stop()
  await app?.stop()
})

/** hostile XML put outside the signed assertion, where an attacker holding one valid Response can add it */
const outside = (extension: string) => (xml: string) => xml.replace("<samlp:Status>", `<samlp:Extensions>${extension}</samlp:Extensions><samlp:Status>`)
const hostile = {
  deep: outside(`${"<a>".repeat(90_000)}${"</a>".repeat(90_000)}`),
  attributes: outside(`<a ${Array.from({ length: 40_000 }, (_, i) => `a${i}=""`).join(" ")}/>`),
  wide: outside("<a/>".repeat(6_000)),
  samlAttributes: (xml: string) =>
    xml.replace("</saml:AttributeStatement>", `${Array.from({ length: 101 }, (_, i) => `<saml:Attribute Name="x${i}"/>`).join("")}</saml:AttributeStatement>`)
}
const reasons = {
  deep: "The SAMLResponse nests elements deeper than 32 levels",
  attributes: "The SAMLResponse has an element with more than 50 attributes",
  wide: "The SAMLResponse has more than 5000 elements",
  samlAttributes: "The SAMLResponse has an assertion with more than 100 attributes"
}

describe("the ACS's check", () => {
  const sp = { entityId: "https://auth.example.com/sso/saml/metadata/ssoc_1", acsUrl: "https://auth.example.com/sso/saml/acs/ssoc_1" }
  const requestId = "_a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2"

  for (const kind of Object.keys(hostile) as Array<keyof typeof hostile>) {
    test(`${kind}: refused before the DOM, within a second, under 1 MiB`, async () => {
      const signed = await idp.issue({ sp, user: { nameId: "u1", email: "u1@example.com", groups: ["g"] }, inResponseTo: requestId })
      const samlResponse = encodeResponse(hostile[kind](decodeResponse(signed)))
      expect(samlResponse.length).toBeLessThan(1024 * 1024)
      const started = performance.now()
      const outcome = await checkSamlResponse({ samlResponse, settings, sp, requestId, nowMs: Date.now() })
      expect(performance.now() - started).toBeLessThan(1_000)
      expect(outcome).toEqual({ ok: false, kind: "refused", reason: reasons[kind] })
    })
  }
})

describe("the scan", () => {
  const nested = (levels: number) => `${"<a>".repeat(levels)}${"</a>".repeat(levels)}`
  const withAttributes = (count: number) => `<a ${Array.from({ length: count }, (_, i) => `b${i}='='`).join(" ")}/>`
  const assertion = (attributes: number) =>
    `<r><s:Assertion>${"<s:Attribute/>".repeat(attributes)}</s:Assertion><s:Assertion>${"<s:Attribute/>".repeat(attributes)}</s:Assertion></r>`
  test.each([
    ["32 levels", nested(32), undefined],
    ["33 levels", nested(33), "nests elements deeper than 32 levels"],
    ["5,000 elements", `<r>${"<a/>".repeat(4_999)}</r>`, undefined],
    ["5,001 elements", `<r>${"<a/>".repeat(5_000)}</r>`, "has more than 5000 elements"],
    ["50 attributes (an = inside a value is not one)", withAttributes(50), undefined],
    ["51 attributes", withAttributes(51), "has an element with more than 50 attributes"],
    ["100 Attribute elements in each of two assertions", assertion(100), undefined],
    ["101 Attribute elements in one assertion", assertion(101), "has an assertion with more than 100 attributes"],
    ["markup inside comments, CDATA and a declaration", `<?xml version="1.0"?><r><!-- ${nested(40)} --><![CDATA[${nested(40)}]]></r>`, undefined],
    ["a DOCTYPE", `<!DOCTYPE r [<!ENTITY a "b">]><r/>`, "must not contain a DOCTYPE"],
    ["an ENTITY declaration alone", `<r><!ENTITY a "b"></r>`, "must not contain a DOCTYPE"]
  ])("%s", (_label, xml, expected) => {
    expect(scanXml(xml)).toBe(expected)
  })
})

describe("over HTTP", () => {
  test("hostile Responses at the JSON callback are 401 SSO_AUTH_FAILED while /health of the same process stays responsive", async () => {
    const c = await samlConnection(app, idp)
    const posts = await Promise.all((["deep", "attributes", "deep", "attributes"] as const).map(async (kind) => {
      idp.login = { user: { nameId: "u1", email: "u1@example.com", groups: [] }, rewrite: hostile[kind] }
      const form = await atIdp(await beginLogin(app, c))
      return form.fields
    }))
    const latencies: Array<number> = []
    let done = false
    const probe = (async () => {
      while (!done) {
        const started = performance.now()
        expect((await fetch(`${app.url}/health`)).status).toBe(200)
        latencies.push(performance.now() - started)
      }
    })()
    const answers = await Promise.all(posts.map((fields) => app.request("POST", "/sso/callback/saml", { body: fields })))
    done = true
    await probe
    expect(answers.map((a) => [a.status, a.body.code])).toEqual(Array(4).fill([401, "SSO_AUTH_FAILED"]))
    // before the scan, one of these held the event loop ~15 s
    expect(Math.max(...latencies)).toBeLessThan(1_000)
  })

  test("IdP metadata nested too deep is 400 on idpMetadataXml, nothing stored", async () => {
    const { apiKey, developerId } = await app.signup()
    const deep = idp.metadataXml().replace(/(<\/(?:md:)?EntityDescriptor>)/, `${"<x>".repeat(90_000)}${"</x>".repeat(90_000)}$1`)
    const res = await app.request("POST", "/v1/sso/connections", {
      apiKey,
      body: { name: "Okta", protocol: "saml", idpMetadataXml: deep, domains: ["example.com"], allowedRedirectUris: ["https://app.example.test/after-sso"] }
    })
    expect([res.status, res.body.code, res.body.details]).toEqual([400, "BAD_REQUEST", [
      { path: "idpMetadataXml", message: "The IdP metadata nests elements deeper than 32 levels" }
    ]])
    expect(await app.query("SELECT id FROM sso_connections WHERE developer_id = $1", [developerId])).toEqual([])
  })
})
