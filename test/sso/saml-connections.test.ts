/**
 * SAML connections through the connections API (decisions §12): created from the IdP's metadata or
 * from the three fields, answered with the SP values an administrator pastes at the IdP; an expired
 * certificate refused at import (400 naming the field) and reported by the connection test; a
 * rollover by patching new metadata; a connection whose certificate expired can still be changed.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { toPem } from "../../src/sso/saml/Certificates.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { type SamlIdp, startSamlIdp } from "../support/saml-idp.ts"
import { PUBLIC_BASE_URL, SAML_ENV, samlConnection } from "./saml-support.ts"

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

const create = (apiKey: string, body: Record<string, unknown>) =>
  app.request("POST", "/v1/sso/connections", { apiKey, body: { name: "Entra ID", protocol: "saml", ...body } })
const count = async (developerId: string) =>
  (await app.query("SELECT count(*)::int AS n FROM sso_connections WHERE developer_id = $1", [developerId]))[0].n

test("created from metadata: the IdP's values, certificates as PEM, and the SP values to paste at the IdP", async () => {
  const { apiKey } = await app.signup()
  const res = await create(apiKey, { idpMetadataXml: idp.metadataXml([idp.keys.current, idp.keys.next]) })
  expect(res.status, res.text).toBe(201)
  const id = res.body.id
  expect(res.body).toMatchObject({
    protocol: "saml",
    idpEntityId: idp.entityId,
    idpSsoUrl: idp.ssoUrl,
    idpCertificates: [toPem(idp.keys.current.certificatePem), toPem(idp.keys.next.certificatePem)],
    spEntityId: `${PUBLIC_BASE_URL}/sso/saml/metadata/${id}`,
    spAcsUrl: `${PUBLIC_BASE_URL}/sso/saml/acs/${id}`,
    spMetadataUrl: `${PUBLIC_BASE_URL}/sso/saml/metadata/${id}`
  })
  expect(res.body.idpMetadataXml).toBeUndefined()
})

test("an expired certificate in the metadata: 400 naming it, nothing stored", async () => {
  const { apiKey, developerId } = await app.signup()
  const res = await create(apiKey, { idpMetadataXml: idp.metadataXml([idp.keys.expired]) })
  expect(res.status).toBe(400)
  expect(res.body.code).toBe("BAD_REQUEST")
  expect(res.body.details).toEqual([{ path: "idpMetadataXml[0]", message: expect.stringMatching(/^The certificate expired on .*CN=expired\.idp\.test/) }])
  expect(await count(developerId)).toBe(0)
})

test("metadata that is not metadata, or without the HTTP-Redirect binding: 400 on idpMetadataXml", async () => {
  const { apiKey, developerId } = await app.signup()
  const html = await create(apiKey, { idpMetadataXml: "<html><body>Sign in</body></html>" })
  expect(html.status).toBe(400)
  expect(html.body.details).toEqual([{ path: "idpMetadataXml", message: "The IdP metadata is not SAML 2.0 metadata (an EntityDescriptor is expected)" }])
  const postOnly = await create(apiKey, { idpMetadataXml: idp.metadataXml().replace(/HTTP-Redirect/g, "HTTP-POST") })
  expect(postOnly.status).toBe(400)
  expect(postOnly.body.details[0].message).toContain("HTTP-Redirect")
  expect(await count(developerId)).toBe(0)
})

test("created from the three fields; an expired or malformed certificate named by its index", async () => {
  const { apiKey } = await app.signup()
  const fields = { idpEntityId: idp.entityId, idpSsoUrl: idp.ssoUrl }
  const ok = await create(apiKey, { ...fields, idpCertificates: [idp.keys.current.certificatePem] })
  expect(ok.status, ok.text).toBe(201)
  expect(ok.body.idpCertificates).toEqual([toPem(idp.keys.current.certificatePem)])
  const bad = await create(apiKey, { ...fields, idpCertificates: [idp.keys.current.certificatePem, idp.keys.expired.certificatePem, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----"] })
  expect(bad.status).toBe(400)
  expect(bad.body.details.map((d: { path: string }) => d.path)).toEqual(["idpCertificates[1]", "idpCertificates[2]"])
})

test("rollover by patching new metadata; the connection test reports each certificate", async () => {
  const c = await samlConnection(app, idp)
  const patched = await app.request("PATCH", `/v1/sso/connections/${c.id}`, {
    apiKey: c.apiKey, body: { idpMetadataXml: idp.metadataXml([idp.keys.current, idp.keys.next]) }
  })
  expect(patched.status, patched.text).toBe(200)
  expect(patched.body.idpCertificates).toHaveLength(2)
  const tested = await app.request("POST", `/v1/sso/connections/${c.id}/test`, { apiKey: c.apiKey })
  expect(tested.status).toBe(200)
  expect(tested.body.success).toBe(true)
  expect(tested.body.protocol).toBe("saml")
  expect(tested.body.checks.map((check: { name: string; ok: boolean }) => [check.name, check.ok]))
    .toEqual([["idpSsoUrl", true], ["certificate[0]", true], ["certificate[1]", true]])
})

test("after the certificate expires: the test fails on it, a rename still works, a patch giving it again is refused", async () => {
  const c = await samlConnection(app, idp)
  await app.setTime(started + 400 * 86_400_000)
  try {
    const tested = await app.request("POST", `/v1/sso/connections/${c.id}/test`, { apiKey: c.apiKey })
    expect(tested.body.success).toBe(false)
    expect(tested.body.checks[1]).toMatchObject({ name: "certificate[0]", ok: false, detail: expect.stringContaining("expired on") })
    const renamed = await app.request("PATCH", `/v1/sso/connections/${c.id}`, { apiKey: c.apiKey, body: { name: "Okta (old)" } })
    expect(renamed.status, renamed.text).toBe(200)
    const again = await app.request("PATCH", `/v1/sso/connections/${c.id}`, { apiKey: c.apiKey, body: { idpMetadataXml: idp.metadataXml() } })
    expect(again.status).toBe(400)
  } finally {
    await app.setTime(started)
  }
})
