/**
 * A real SAML 2.0 identity provider on loopback for the SSO tests: samlify (with the xmllint schema
 * validator) parses our HTTP-Redirect AuthnRequests and signs the Responses, with keys and X.509
 * certificates made here (node:crypto keys, `openssl ca -selfsign` certificates with chosen validity
 * dates, so an expired certificate and a rollover certificate are real ones).
 *
 * - `GET /metadata`: the IdP's metadata (entity id, HTTP-Redirect SSO URL, signing certificates);
 * - `GET /sso?SAMLRequest&RelayState`: answers like a real IdP, with an auto-submitting HTML form
 *   that posts `SAMLResponse` and `RelayState` to the requesting SP's registered ACS URL;
 * - `issue(...)`: the same Response built directly (tests of single rules), with every field a
 *   test needs to get wrong (saml-tamper.ts rewrites signed Responses for the negative tests).
 */
import * as validator from "@authenio/samlify-node-xmllint"
import { execFileSync } from "node:child_process"
import { generateKeyPairSync, randomUUID } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { inflateRawSync } from "node:zlib"
import * as samlify from "samlify"
import { freePort } from "./net.ts"

samlify.setSchemaValidator(validator)

const UNSPECIFIED = "urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified"
export const EMAIL_ATTRIBUTE = "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress"
export const GROUPS_ATTRIBUTE = "http://schemas.microsoft.com/ws/2008/06/identity/claims/groups"

// ---- keys and certificates ---------------------------------------------------------------------

export interface SigningKey {
  readonly privateKeyPem: string
  readonly certificatePem: string
  readonly notBefore: Date
  readonly notAfter: Date
}

const opensslDate = (d: Date) => d.toISOString().replace(/[-:T]/g, "").slice(0, 14) + "Z"

const CA_CONFIG = `[ ca ]
default_ca = local
[ local ]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = any
unique_subject = no
[ any ]
commonName = supplied
`

/** An RSA key and a self-signed certificate valid exactly from `notBefore` to `notAfter`. */
export const makeSigningKey = (o: { readonly commonName?: string; readonly notBefore: Date; readonly notAfter: Date }): SigningKey => {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
  const privateKeyPem = privateKey.export({ type: "pkcs8", format: "pem" }) as string
  const dir = mkdtempSync(join(tmpdir(), "saml-idp-"))
  try {
    writeFileSync(join(dir, "key.pem"), privateKeyPem)
    writeFileSync(join(dir, "ca.cnf"), CA_CONFIG)
    writeFileSync(join(dir, "index.txt"), "")
    writeFileSync(join(dir, "serial"), randomUUID().replace(/-/g, "").slice(0, 16) + "\n")
    const run = (args: Array<string>) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] })
    run(["req", "-new", "-key", "key.pem", "-subj", `/CN=${o.commonName ?? "idp.test"}`, "-out", "req.csr"])
    run([
      "ca", "-config", "ca.cnf", "-selfsign", "-keyfile", "key.pem", "-in", "req.csr", "-batch", "-notext",
      "-startdate", opensslDate(o.notBefore), "-enddate", opensslDate(o.notAfter), "-out", "cert.pem"
    ])
    const certificatePem = execFileSync("openssl", ["x509", "-in", join(dir, "cert.pem")]).toString()
    return { privateKeyPem, certificatePem, notBefore: o.notBefore, notAfter: o.notAfter }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

// ---- responses -----------------------------------------------------------------------------------

export interface SamlUser {
  readonly nameId: string
  readonly email?: string
  readonly groups?: ReadonlyArray<string>
  /** further attributes, name → values */
  readonly attributes?: Record<string, ReadonlyArray<string>>
}

export interface Audience {
  readonly entityId: string
  readonly acsUrl: string
}

export interface IssueOptions {
  readonly sp: Audience
  readonly user: SamlUser
  /** the AuthnRequest ID answered (InResponseTo on the Response and the SubjectConfirmationData) */
  readonly inResponseTo?: string
  /** the assertion's IssueInstant (default: the IdP's clock) */
  readonly issuedAt?: Date
  /** NotOnOrAfter of the Conditions and the SubjectConfirmationData, after issuedAt (default 300) */
  readonly validForSeconds?: number
  /** which elements carry a signature (default: the assertion, as Okta and Entra do by default) */
  readonly sign?: "assertion" | "response" | "both" | "none"
  /** the signing key (default: the IdP's current key) */
  readonly key?: SigningKey
  readonly assertionId?: string
  // re-targeting: each defaults to the SP's value
  readonly audience?: string
  readonly recipient?: string
  readonly destination?: string
  readonly issuer?: string
  readonly statusCode?: string
  /** default unspecified */
  readonly nameIdFormat?: string
}

const escapeXml = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;")

const attributeStatement = (user: SamlUser): string => {
  const all: Array<[string, ReadonlyArray<string>]> = []
  if (user.email !== undefined) all.push([EMAIL_ATTRIBUTE, [user.email]])
  if (user.groups !== undefined) all.push([GROUPS_ATTRIBUTE, user.groups])
  for (const [name, values] of Object.entries(user.attributes ?? {})) all.push([name, values])
  if (all.length === 0) return ""
  const attrs = all.map(([name, values]) =>
    `<saml:Attribute Name="${escapeXml(name)}" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:uri">${
      values.map((v) => `<saml:AttributeValue xsi:type="xs:string">${escapeXml(v)}</saml:AttributeValue>`).join("")
    }</saml:Attribute>`
  ).join("")
  return `<saml:AttributeStatement>${attrs}</saml:AttributeStatement>`
}

const authnStatement = (at: string, sessionIndex: string) =>
  `<saml:AuthnStatement AuthnInstant="${at}" SessionIndex="${sessionIndex}"><saml:AuthnContext>` +
  `<saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef>` +
  `</saml:AuthnContext></saml:AuthnStatement>`

export const decodeResponse = (b64: string) => Buffer.from(b64, "base64").toString("utf8")
export const encodeResponse = (xml: string) => Buffer.from(xml, "utf8").toString("base64")

// ---- the IdP -------------------------------------------------------------------------------------

export interface SamlIdpOptions {
  /** the IdP's clock for the times it writes (tests on TestClock pass the app's time) */
  readonly now?: () => Date
  /** validity of the current certificate (default: a year around the clock's start) */
  readonly validity?: { readonly notBefore: Date; readonly notAfter: Date }
}

export interface LoginSettings {
  readonly user: SamlUser
  /** options of the Response answered on `GET /sso` (sp comes from the request; inResponseTo too unless given) */
  readonly issue?: Omit<IssueOptions, "sp" | "user">
  /** applied to the signed Response XML before it is posted (tampering in flows) */
  readonly rewrite?: (xml: string) => string
}

export interface SamlIdp {
  readonly url: string
  readonly entityId: string
  readonly ssoUrl: string
  /** the key signing by default, a second one for rollover, and one whose certificate has expired */
  readonly keys: { readonly current: SigningKey; readonly next: SigningKey; readonly expired: SigningKey; readonly unknown: SigningKey }
  /** metadata listing these signing certificates (default: the current one) */
  readonly metadataXml: (keys?: ReadonlyArray<SigningKey>) => string
  readonly issue: (o: IssueOptions) => Promise<string>
  /** who signs in at `GET /sso` next, and how the answer is made */
  login: LoginSettings
  /** the AuthnRequests received on `GET /sso`, parsed by samlify */
  readonly requests: Array<{ id: string; issuer: string; acsUrl: string; destination: string; relayState: string | undefined }>
  /** an SP this IdP answers, registered from its metadata as an administrator does; its entity id and ACS URL */
  readonly trust: (spMetadataXml: string) => Audience
  readonly stop: () => Promise<void>
}

const redirect = samlify.Constants.namespace.binding.redirect

export const startSamlIdp = async (options: SamlIdpOptions = {}): Promise<SamlIdp> => {
  const now = options.now ?? (() => new Date())
  const start = now().getTime()
  const day = 86_400_000
  const keys = {
    current: makeSigningKey({ commonName: "current.idp.test", ...(options.validity ?? { notBefore: new Date(start - 30 * day), notAfter: new Date(start + 365 * day) }) }),
    next: makeSigningKey({ commonName: "next.idp.test", notBefore: new Date(start - day), notAfter: new Date(start + 730 * day) }),
    expired: makeSigningKey({ commonName: "expired.idp.test", notBefore: new Date(start - 400 * day), notAfter: new Date(start - 35 * day) }),
    unknown: makeSigningKey({ commonName: "unknown.idp.test", notBefore: new Date(start - day), notAfter: new Date(start + 365 * day) })
  }
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const entityId = `${url}/metadata`
  const ssoUrl = `${url}/sso`

  const identityProvider = (key: SigningKey, certificates: ReadonlyArray<SigningKey> = [key]) =>
    samlify.IdentityProvider({
      entityID: entityId,
      privateKey: key.privateKeyPem,
      signingCert: certificates.map((k) => k.certificatePem),
      nameIDFormat: [UNSPECIFIED],
      requestSignatureAlgorithm: "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256",
      singleSignOnService: [{ Binding: redirect, Location: ssoUrl }],
      singleLogoutService: [{ Binding: redirect, Location: `${url}/slo` }]
    })
  const serviceProvider = (sp: Audience, signAssertion: boolean, signMessage: boolean) =>
    samlify.ServiceProvider({
      entityID: sp.entityId,
      wantAssertionsSigned: signAssertion,
      wantMessageSigned: signMessage,
      assertionConsumerService: [{ Binding: samlify.Constants.namespace.binding.post, Location: sp.acsUrl }]
    })

  const fill = (o: IssueOptions, responseId: string): string => {
    const issued = o.issuedAt ?? now()
    const at = issued.toISOString()
    const until = new Date(issued.getTime() + (o.validForSeconds ?? 300) * 1000).toISOString()
    const values: Record<string, string> = {
      ID: responseId,
      AssertionID: o.assertionId ?? `_${randomUUID()}`,
      Destination: o.destination ?? o.sp.acsUrl,
      Audience: o.audience ?? o.sp.entityId,
      SubjectRecipient: o.recipient ?? o.sp.acsUrl,
      Issuer: o.issuer ?? entityId,
      IssueInstant: at,
      StatusCode: o.statusCode ?? "urn:oasis:names:tc:SAML:2.0:status:Success",
      ConditionsNotBefore: at,
      ConditionsNotOnOrAfter: until,
      SubjectConfirmationDataNotOnOrAfter: until,
      NameIDFormat: o.nameIdFormat ?? UNSPECIFIED,
      NameID: escapeXml(o.user.nameId),
      InResponseTo: o.inResponseTo ?? "",
      AuthnStatement: authnStatement(at, `_${randomUUID()}`),
      AttributeStatement: attributeStatement(o.user)
    }
    // samlify's own replacer escapes every value, statements too: fill the template here instead
    const raw = new Set(["AuthnStatement", "AttributeStatement", "NameID"])
    let xml = samlify.SamlLib.defaultLoginResponseTemplate.context.replace(/\{(\w+)\}/g, (_: string, key: string) =>
      raw.has(key) ? values[key] ?? "" : escapeXml(values[key] ?? ""))
    // an unsolicited Response has no InResponseTo at all (not an empty one)
    if (o.inResponseTo === undefined) xml = xml.replace(/ InResponseTo=""/g, "")
    return xml
  }

  const issue = async (o: IssueOptions): Promise<string> => {
    const sign = o.sign ?? "assertion"
    const responseId = `_${randomUUID()}`
    if (sign === "none") return encodeResponse(fill(o, responseId))
    const key = o.key ?? keys.current
    const response = await identityProvider(key).createLoginResponse(
      serviceProvider(o.sp, sign !== "response", sign !== "assertion"),
      { extract: { request: { id: o.inResponseTo ?? "" } } } as any,
      "post",
      { email: o.user.nameId },
      { customTagReplacement: () => ({ id: responseId, context: fill(o, responseId) }) }
    )
    return (response as { context: string }).context
  }

  const trusted = new Map<string, string>()
  const requests: SamlIdp["requests"] = []
  const idp: SamlIdp = {
    url,
    entityId,
    ssoUrl,
    keys,
    metadataXml: (list = [keys.current]) => identityProvider(list[0]!, list).getMetadata(),
    issue,
    login: { user: { nameId: "user@example.com", email: "user@example.com" } },
    requests,
    trust: (spMetadataXml) => {
      const meta = samlify.ServiceProvider({ metadata: spMetadataXml }).entityMeta
      const sp = { entityId: meta.getEntityID(), acsUrl: meta.getAssertionConsumerService("post") as string }
      if (!sp.entityId || !sp.acsUrl) throw new Error("SP metadata without entity id or HTTP-POST ACS")
      trusted.set(sp.entityId, sp.acsUrl)
      return sp
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }

  const answerLogin = async (query: Record<string, string>): Promise<{ status: number; body: string }> => {
    const xml = inflateRawSync(Buffer.from(query.SAMLRequest ?? "", "base64")).toString("utf8")
    const issuer = /<(?:\w+:)?Issuer[^>]*>([^<]+)</.exec(xml)?.[1]
    const acsUrl = issuer === undefined ? undefined : trusted.get(issuer)
    if (issuer === undefined || acsUrl === undefined) return { status: 400, body: `unknown service provider ${issuer}` }
    const sp = { entityId: issuer, acsUrl }
    const parsed = await identityProvider(keys.current).parseLoginRequest(serviceProvider(sp, true, false), "redirect", { query })
    const request = parsed.extract.request as { id: string; destination: string; assertionConsumerServiceUrl: string }
    requests.push({ id: request.id, issuer, acsUrl: request.assertionConsumerServiceUrl, destination: request.destination, relayState: query.RelayState })
    // a real IdP answers only at the ACS registered for the SP, and only requests addressed to it
    if (request.destination !== ssoUrl) return { status: 400, body: "AuthnRequest Destination is not this IdP" }
    if (request.assertionConsumerServiceUrl !== undefined && request.assertionConsumerServiceUrl !== acsUrl) {
      return { status: 400, body: "AuthnRequest ACS URL is not registered" }
    }
    const signed = await issue({ inResponseTo: request.id, ...idp.login.issue, sp, user: idp.login.user })
    const samlResponse = idp.login.rewrite === undefined ? signed : encodeResponse(idp.login.rewrite(decodeResponse(signed)))
    const relay = query.RelayState === undefined ? "" : `<input type="hidden" name="RelayState" value="${escapeXml(query.RelayState)}"/>`
    return {
      status: 200,
      body: `<!doctype html><html><body onload="document.forms[0].submit()"><form method="post" action="${escapeXml(acsUrl)}">` +
        `<input type="hidden" name="SAMLResponse" value="${samlResponse}"/>${relay}<noscript><button>Continue</button></noscript></form></body></html>`
    }
  }

  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? "/", url)
    const send = (status: number, type: string, body: string) => {
      res.writeHead(status, { "content-type": type })
      res.end(body)
    }
    if (req.method === "GET" && u.pathname === "/metadata") return send(200, "application/samlmetadata+xml", idp.metadataXml())
    if (req.method === "GET" && u.pathname === "/sso") {
      answerLogin(Object.fromEntries(u.searchParams)).then(
        (a) => send(a.status, a.status === 200 ? "text/html; charset=utf-8" : "text/plain", a.body),
        (e) => send(400, "text/plain", `bad AuthnRequest: ${e instanceof Error ? e.message : String(e)}`)
      )
      return
    }
    send(404, "text/plain", "not found")
  })
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", () => resolve()))
  return idp
}

/** The auto-submitting form an IdP answers with: its action and fields (what a browser would post). */
export const readPostForm = (html: string): { action: string; fields: Record<string, string> } => {
  const unescape = (s: string) => s.replace(/&quot;/g, "\"").replace(/&apos;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&")
  const action = /<form[^>]*action="([^"]*)"/.exec(html)?.[1]
  if (action === undefined) throw new Error(`no form in ${html.slice(0, 200)}`)
  const fields: Record<string, string> = {}
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"\/>/g)) fields[m[1]!] = unescape(m[2]!)
  return { action: unescape(action), fields }
}
