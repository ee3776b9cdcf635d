/**
 * SAML metadata (decisions §12): the IdP's, pasted by an administrator as `idpMetadataXml`, gives
 * the entity id, the HTTP-Redirect single sign-on URL and the signing certificates; the SP's, served
 * at `GET /sso/saml/metadata/:connectionId`, gives what an administrator pastes into Okta, Entra ID
 * or Google Workspace (entity id, ACS URL with the HTTP-POST binding, signed assertions wanted).
 *
 * `resolveSamlSettings` is the one check of a SAML connection's settings, whichever form they came
 * in (metadata or the three fields): create, patch and test use it.
 */
import { checkReceiverUrl } from "../../platform/Outbound.ts"
import { checkCertificates } from "./Certificates.ts"
import { samlLibraries } from "./Library.ts"
import { scanXml } from "./XmlScan.ts"

const MD = "urn:oasis:names:tc:SAML:2.0:metadata"
const DSIG = "http://www.w3.org/2000/09/xmldsig#"
const PROTOCOL = "urn:oasis:names:tc:SAML:2.0:protocol"
export const HTTP_REDIRECT = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect"
export const NAMEID_UNSPECIFIED = "urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified"

/** Metadata, settings and Responses above this are refused unread (decisions §12, §19). */
export const MAX_XML_BYTES = 1024 * 1024

export interface SamlSettings {
  readonly idpEntityId: string
  readonly idpSsoUrl: string
  readonly idpCertificates: ReadonlyArray<string>
}

export type Problem = { readonly path: string; readonly message: string }
export type Checked<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly problems: ReadonlyArray<Problem> }

const refuse = <A>(path: string, message: string): Checked<A> => ({ ok: false, problems: [{ path, message }] })

/**
 * XML from outside, parsed without surprises: the pre-scan first (no DTD, which SAML forbids and
 * which carries entity expansion; bounded depth, elements and attributes: XmlScan.ts), and a parse
 * error is a refusal rather than a half-built document.
 */
export const parseXml = (xml: string): Document | string => {
  const problem = scanXml(xml)
  if (problem !== undefined) return problem
  let error: string | undefined
  const doc = new (samlLibraries().xmldom.DOMParser)({
    locator: {},
    errorHandler: (level: string, message: string) => {
      if (level !== "warning") error ??= message.replace(/^\[xmldom \w+\]\s*/, "")
    }
  }).parseFromString(xml, "text/xml")
  if (error !== undefined || !doc?.documentElement) return `is not well-formed XML (${(error ?? "no root element").split("\n")[0]})`
  return doc
}

const childrenNamed = (parent: Element, ns: string, local: string): Array<Element> =>
  Array.from(parent.childNodes).filter((n): n is Element =>
    n.nodeType === 1 && (n as Element).namespaceURI === ns && (n as Element).localName === local
  )

/** The IdP's EntityDescriptor: the root, or the one IdP inside an EntitiesDescriptor. */
const idpEntity = (root: Element): Element | string => {
  if (root.namespaceURI === MD && root.localName === "EntityDescriptor") return root
  if (root.namespaceURI === MD && root.localName === "EntitiesDescriptor") {
    const idps = childrenNamed(root, MD, "EntityDescriptor").filter((e) => childrenNamed(e, MD, "IDPSSODescriptor").length > 0)
    if (idps.length === 1) return idps[0]!
    return idps.length === 0 ? "holds no identity provider" : "holds several identity providers (paste the metadata of one)"
  }
  return "is not SAML 2.0 metadata (an EntityDescriptor is expected)"
}

/** IdP metadata → entity id, HTTP-Redirect SSO URL and signing certificates (not yet checked). */
export const parseIdpMetadata = (xml: string, path = "idpMetadataXml"): Checked<SamlSettings> => {
  if (typeof xml !== "string" || xml.trim() === "") return refuse(path, "The IdP metadata is empty")
  if (Buffer.byteLength(xml, "utf8") > MAX_XML_BYTES) return refuse(path, `The IdP metadata exceeds ${MAX_XML_BYTES} bytes`)
  const doc = parseXml(xml)
  if (typeof doc === "string") return refuse(path, `The IdP metadata ${doc}`)
  const entity = idpEntity(doc.documentElement)
  if (typeof entity === "string") return refuse(path, `The IdP metadata ${entity}`)
  const entityId = entity.getAttribute("entityID")?.trim() ?? ""
  if (entityId === "") return refuse(path, "The IdP metadata has no entityID")
  const descriptor = childrenNamed(entity, MD, "IDPSSODescriptor")
    .find((d) => (d.getAttribute("protocolSupportEnumeration") ?? "").split(/\s+/).includes(PROTOCOL))
  if (descriptor === undefined) return refuse(path, "The IdP metadata has no IDPSSODescriptor for SAML 2.0")
  const sso = childrenNamed(descriptor, MD, "SingleSignOnService").find((s) => s.getAttribute("Binding") === HTTP_REDIRECT)
  const ssoUrl = sso?.getAttribute("Location")?.trim() ?? ""
  if (ssoUrl === "") return refuse(path, "The IdP metadata has no SingleSignOnService with the HTTP-Redirect binding")
  // signing keys: use="signing", or no use at all (then the key serves both purposes)
  const certificates = childrenNamed(descriptor, MD, "KeyDescriptor")
    .filter((k) => ["", "signing"].includes(k.getAttribute("use") ?? "")) // xmldom: "" when absent
    .flatMap((k) => Array.from(k.getElementsByTagNameNS(DSIG, "X509Certificate")))
    .map((c) => (c.textContent ?? "").replace(/\s+/g, ""))
    .filter((c) => c !== "")
  if (certificates.length === 0) return refuse(path, "The IdP metadata has no signing certificate")
  return { ok: true, value: { idpEntityId: entityId, idpSsoUrl: ssoUrl, idpCertificates: certificates } }
}

/** What create and patch receive for a SAML connection: the metadata, or the three fields. */
export interface SamlSettingsInput {
  readonly idpMetadataXml?: string | undefined
  readonly idpEntityId?: string | undefined
  readonly idpSsoUrl?: string | undefined
  readonly idpCertificates?: ReadonlyArray<string> | undefined
}

/**
 * The settings of a SAML connection, checked: from `idpMetadataXml` when given (a field given
 * beside it overrides the metadata's value), else from the three fields (`current` fills those a
 * patch leaves out). The SSO URL follows the outbound rules (https and no credentials, unless
 * private hosts are allowed); every certificate given must be valid at `nowMs`. Stored
 * certificates a patch leaves alone are not judged again: a connection whose certificate expired
 * can still be renamed or deactivated (the connection test and the ACS report the expiry).
 */
export const resolveSamlSettings = (
  input: SamlSettingsInput,
  o: { readonly nowMs: number; readonly allowPrivateHosts: boolean; readonly current?: SamlSettings | null }
): Checked<SamlSettings> => {
  let base: Partial<SamlSettings> = o.current ?? {}
  if (input.idpMetadataXml !== undefined) {
    const parsed = parseIdpMetadata(input.idpMetadataXml)
    if (!parsed.ok) return parsed
    base = parsed.value
  }
  const idpEntityId = (input.idpEntityId ?? base.idpEntityId)?.trim()
  const idpSsoUrl = (input.idpSsoUrl ?? base.idpSsoUrl)?.trim()
  const idpCertificates = input.idpCertificates ?? base.idpCertificates
  const certificatesGiven = input.idpCertificates !== undefined || input.idpMetadataXml !== undefined
  const problems: Array<Problem> = []
  if (idpEntityId === undefined || idpEntityId === "") problems.push({ path: "idpEntityId", message: "Required for a SAML connection (or give idpMetadataXml)" })
  else if (idpEntityId.length > 1024) problems.push({ path: "idpEntityId", message: "At most 1024 characters" })
  if (idpSsoUrl === undefined || idpSsoUrl === "") problems.push({ path: "idpSsoUrl", message: "Required for a SAML connection (or give idpMetadataXml)" })
  else {
    const check = checkReceiverUrl(idpSsoUrl, o.allowPrivateHosts)
    if (!check.ok) problems.push({ path: "idpSsoUrl", message: `The IdP SSO URL: ${check.reason.replace(/^url /, "")}` })
  }
  let certificates: ReadonlyArray<string> = []
  if (idpCertificates === undefined) problems.push({ path: "idpCertificates", message: "Required for a SAML connection (or give idpMetadataXml)" })
  else if (!certificatesGiven) certificates = idpCertificates
  else {
    const checked = checkCertificates(idpCertificates, o.nowMs, input.idpMetadataXml !== undefined && input.idpCertificates === undefined ? "idpMetadataXml" : "idpCertificates")
    if (!checked.ok) problems.push(...checked.problems)
    else certificates = checked.certificates.map((c) => c.pem)
  }
  if (problems.length > 0) return { ok: false, problems }
  return { ok: true, value: { idpEntityId: idpEntityId!, idpSsoUrl: idpSsoUrl!, idpCertificates: certificates } }
}

/** Our side of a connection: the values an administrator pastes at the IdP. */
export interface ServiceProvider {
  readonly entityId: string
  readonly acsUrl: string
}

export const serviceProviderFor = (publicBaseUrl: string, connectionId: string): ServiceProvider => {
  const base = publicBaseUrl.replace(/\/+$/, "")
  return { entityId: `${base}/sso/saml/metadata/${connectionId}`, acsUrl: `${base}/sso/saml/acs/${connectionId}` }
}

/** The SP metadata of a connection (stable: the same connection always gives the same document). */
export const serviceProviderMetadataXml = (sp: ServiceProvider, connectionId: string): string =>
  samlLibraries().saml.generateServiceProviderMetadata({
    issuer: sp.entityId,
    callbackUrl: sp.acsUrl,
    identifierFormat: NAMEID_UNSPECIFIED,
    wantAssertionsSigned: true,
    generateUniqueId: () => `_${connectionId}`
  })
