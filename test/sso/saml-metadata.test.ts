/**
 * SAML metadata and certificates (decisions §12): the IdP metadata an administrator pastes, the
 * explicit settings, certificate validity (an expired or not-yet-valid certificate refused, each
 * problem named by its field), and our SP metadata as an IdP library reads it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { loadSamlLibraries } from "../../src/sso/saml/Library.ts"
import * as samlify from "samlify"
import { checkCertificates, toPem, usableCertificates } from "../../src/sso/saml/Certificates.ts"
import { parseIdpMetadata, resolveSamlSettings, serviceProviderFor, serviceProviderMetadataXml } from "../../src/sso/saml/Metadata.ts"
import { makeSigningKey, type SamlIdp, startSamlIdp } from "../support/saml-idp.ts"

let idp: SamlIdp
const now = Date.now()
beforeAll(async () => {
  // what the SAML service does before its first SAML work (issue 37: loaded on first use)
  await loadSamlLibraries()
  idp = await startSamlIdp()
})
afterAll(() => idp.stop())

const bare = (pem: string) => pem.replace(/-----[A-Z ]+-----/g, "").replace(/\s+/g, "")
const metadata = (o: { sso?: string; keys?: string; root?: (inner: string) => string } = {}) => {
  const inner = `<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="https://idp.example/entity">` +
    `<md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">` +
    (o.keys ?? `<md:KeyDescriptor><ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:X509Data><ds:X509Certificate>\n${bare(idp.keys.current.certificatePem)}\n</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>`) +
    (o.sso ?? `<md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="https://idp.example/post"/>` +
      `<md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="https://idp.example/sso?idpid=C01"/>`) +
    `</md:IDPSSODescriptor></md:EntityDescriptor>`
  return o.root ? o.root(inner) : inner
}
const keyDescriptor = (use: string | null, pem: string) =>
  `<md:KeyDescriptor${use === null ? "" : ` use="${use}"`}><ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:X509Data><ds:X509Certificate>${bare(pem)}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>`

describe("IdP metadata", () => {
  test("samlify's metadata: entity id, the HTTP-Redirect SSO URL, both signing certificates", () => {
    const parsed = parseIdpMetadata(idp.metadataXml([idp.keys.current, idp.keys.next]))
    expect(parsed).toEqual({
      ok: true,
      value: { idpEntityId: idp.entityId, idpSsoUrl: idp.ssoUrl, idpCertificates: [bare(idp.keys.current.certificatePem), bare(idp.keys.next.certificatePem)] }
    })
  })
  test("prefixed elements, a key without `use`, the Redirect binding chosen among several, its query kept", () => {
    const parsed = parseIdpMetadata(metadata())
    expect(parsed.ok && parsed.value).toEqual({ idpEntityId: "https://idp.example/entity", idpSsoUrl: "https://idp.example/sso?idpid=C01", idpCertificates: [bare(idp.keys.current.certificatePem)] })
  })
  test("an encryption key is not a signing certificate", () => {
    const parsed = parseIdpMetadata(metadata({ keys: keyDescriptor("encryption", idp.keys.next.certificatePem) + keyDescriptor("signing", idp.keys.current.certificatePem) }))
    expect(parsed.ok && parsed.value.idpCertificates).toEqual([bare(idp.keys.current.certificatePem)])
  })
  test("one IdP inside an EntitiesDescriptor", () => {
    const parsed = parseIdpMetadata(metadata({ root: (inner) => `<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata">${inner}</md:EntitiesDescriptor>` }))
    expect(parsed.ok).toBe(true)
  })
  // thunks: the IdP's keys exist only once beforeAll has run
  const refusals: Array<[string, () => string, RegExp]> = [
    ["empty", () => "", /empty/],
    ["not XML", () => "<md:EntityDescriptor", /not well-formed/],
    ["a DOCTYPE", () => `<!DOCTYPE x [<!ENTITY a "b">]>${metadata()}`, /DOCTYPE/],
    ["not metadata", () => "<html><body>Sign in</body></html>", /not SAML 2.0 metadata/],
    ["no HTTP-Redirect SSO service", () => metadata({ sso: `<md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="https://idp.example/post"/>` }), /HTTP-Redirect/],
    ["no signing certificate", () => metadata({ keys: keyDescriptor("encryption", "AAAA") }), /no signing certificate/],
    ["several IdPs", () => `<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata">${metadata()}${metadata()}</md:EntitiesDescriptor>`, /several identity providers/]
  ]
  for (const [name, xml, reason] of refusals) {
    test(`refused: ${name}`, () => {
      const parsed = parseIdpMetadata(xml())
      expect(parsed.ok).toBe(false)
      if (!parsed.ok) {
        expect(parsed.problems[0]!.path).toBe("idpMetadataXml")
        expect(parsed.problems[0]!.message).toMatch(reason)
      }
    })
  }
})

describe("settings of a SAML connection", () => {
  const resolve = (input: Parameters<typeof resolveSamlSettings>[0], o: Partial<Parameters<typeof resolveSamlSettings>[1]> = {}) =>
    resolveSamlSettings(input, { nowMs: now, allowPrivateHosts: false, ...o })

  test("from metadata: certificates stored as PEM", () => {
    const resolved = resolve({ idpMetadataXml: metadata() })
    expect(resolved).toEqual({ ok: true, value: { idpEntityId: "https://idp.example/entity", idpSsoUrl: "https://idp.example/sso?idpid=C01", idpCertificates: [toPem(idp.keys.current.certificatePem)] } })
  })
  test("an expired certificate in the metadata is refused, named by the field", () => {
    const resolved = resolve({ idpMetadataXml: metadata({ keys: keyDescriptor("signing", idp.keys.expired.certificatePem) }) })
    expect(resolved.ok).toBe(false)
    if (!resolved.ok) {
      expect(resolved.problems).toEqual([{ path: "idpMetadataXml[0]", message: expect.stringMatching(/^The certificate expired on \d{4}-.*\(CN=expired\.idp\.test\)$/) }])
    }
  })
  test("explicit fields: each problem named; http and private hosts only with SSO_ALLOW_PRIVATE_HOSTS", () => {
    const resolved = resolve({ idpEntityId: "", idpSsoUrl: "http://idp.example/sso", idpCertificates: ["not a certificate", idp.keys.expired.certificatePem] })
    expect(resolved.ok).toBe(false)
    if (!resolved.ok) expect(resolved.problems.map((p) => p.path)).toEqual(["idpEntityId", "idpSsoUrl", "idpCertificates[0]", "idpCertificates[1]"])
    expect(resolve({ idpEntityId: "e", idpSsoUrl: "http://127.0.0.1:9/sso", idpCertificates: [idp.keys.current.certificatePem] }, { allowPrivateHosts: true }).ok).toBe(true)
  })
  test("a patch: given fields replace the stored ones; stored certificates are kept as they are", () => {
    const current = { idpEntityId: "https://idp.example/entity", idpSsoUrl: "https://idp.example/sso", idpCertificates: [toPem(idp.keys.current.certificatePem)] }
    const resolved = resolve({ idpCertificates: [idp.keys.current.certificatePem, idp.keys.next.certificatePem] }, { current })
    expect(resolved.ok && resolved.value).toEqual({ ...current, idpCertificates: [toPem(idp.keys.current.certificatePem), toPem(idp.keys.next.certificatePem)] })
    // a year and a half later the stored certificate has expired: a patch of the URL still goes through,
    // one giving the expired certificate again does not
    const later = now + 540 * 86_400_000
    expect(resolve({ idpSsoUrl: "https://idp.example/sso2" }, { current, nowMs: later })).toEqual({ ok: true, value: { ...current, idpSsoUrl: "https://idp.example/sso2" } })
    expect(resolve({ idpCertificates: current.idpCertificates }, { current, nowMs: later }).ok).toBe(false)
  })
})

describe("certificates", () => {
  test("not yet valid, no certificate at all, more than ten, a private key instead, duplicates kept once", () => {
    const future = makeSigningKey({ notBefore: new Date(now + 86_400_000), notAfter: new Date(now + 2 * 86_400_000) })
    const check = (texts: Array<string>) => checkCertificates(texts, now)
    const problems = (texts: Array<string>) => {
      const c = check(texts)
      return c.ok ? [] : c.problems.map((p) => p.message)
    }
    expect(problems([future.certificatePem])[0]).toMatch(/is not valid before/)
    expect(problems([])[0]).toMatch(/At least one/)
    expect(problems(Array(11).fill(idp.keys.current.certificatePem))[0]).toMatch(/At most 10/)
    expect(problems([idp.keys.current.privateKeyPem])[0]).toMatch(/not a certificate/)
    const twice = check([idp.keys.current.certificatePem, bare(idp.keys.current.certificatePem)])
    expect(twice.ok && twice.certificates.length).toBe(1)
  })
  test("only the certificates valid at the time verify", () => {
    const pems = [idp.keys.current.certificatePem, idp.keys.expired.certificatePem, idp.keys.next.certificatePem]
    expect(usableCertificates(pems, now)).toEqual([toPem(idp.keys.current.certificatePem), toPem(idp.keys.next.certificatePem)])
    expect(usableCertificates(pems, now + 500 * 86_400_000)).toEqual([toPem(idp.keys.next.certificatePem)])
  })
})

test("our SP metadata, read by samlify as an IdP would: entity id, ACS (HTTP-POST), signed assertions wanted; stable", () => {
  const sp = serviceProviderFor("https://auth.example.com/", "ssoconn_1")
  expect(sp).toEqual({ entityId: "https://auth.example.com/sso/saml/metadata/ssoconn_1", acsUrl: "https://auth.example.com/sso/saml/acs/ssoconn_1" })
  const xml = serviceProviderMetadataXml(sp, "ssoconn_1")
  const read = samlify.ServiceProvider({ metadata: xml })
  expect(read.entityMeta.getEntityID()).toBe(sp.entityId)
  expect(read.entityMeta.getAssertionConsumerService("post")).toBe(sp.acsUrl)
  expect(read.entityMeta.isWantAssertionsSigned()).toBe(true)
  expect(serviceProviderMetadataXml(sp, "ssoconn_1")).toBe(xml)
})
