/**
 * A SAML Response at our ACS, checked in order (decisions §12), each check one small function:
 * 1. size (over 1 MiB refused before decoding), base64, no DTD, a `samlp:Response` root;
 * 2. a usable certificate: an expired one never verifies (all expired: the provider failed);
 * 3. node-saml: exactly one assertion, signed by one of the certificates (wrapping refused),
 *    audience = our entity id, InResponseTo = the request stored with the login state;
 * 4. ours, on the given time (Effect's Clock, 60 s skew): status Success, issuer = the IdP's entity
 *    id, Destination = our ACS, a bearer SubjectConfirmation for our ACS (Recipient) and this request
 *    not past its NotOnOrAfter, Conditions in their window, IssueInstant at most 10 minutes old, a
 *    NameID that is not transient (it is the identity key).
 * Single use of the assertion id is the caller's (a database claim, see Replay.ts).
 */
import type { Profile } from "@node-saml/node-saml"
import { samlClient } from "./Client.ts"
import { samlLibraries } from "./Library.ts"
import { usableCertificates } from "./Certificates.ts"
import { MAX_XML_BYTES, parseXml, type SamlSettings, type ServiceProvider } from "./Metadata.ts"

export const CLOCK_SKEW_MS = 60_000
export const MAX_ASSERTION_AGE_MS = 10 * 60_000

const PROTOCOL = "urn:oasis:names:tc:SAML:2.0:protocol"
const ASSERTION = "urn:oasis:names:tc:SAML:2.0:assertion"
const SUCCESS = "urn:oasis:names:tc:SAML:2.0:status:Success"
const BEARER = "urn:oasis:names:tc:SAML:2.0:cm:bearer"
const TRANSIENT = "urn:oasis:names:tc:SAML:2.0:nameid-format:transient"

export interface ValidAssertion {
  readonly assertionId: string
  readonly issuer: string
  readonly nameId: string
  readonly nameIdFormat: string | null
  /** attribute name → its string values */
  readonly attributes: Readonly<Record<string, ReadonlyArray<string>>>
  /** until when the id must stay claimed: after it the assertion is refused anyway */
  readonly retainUntilMs: number
}

/** `refused`: the identity was refused (401); `provider`: the provider or its setup failed (502). */
export type Outcome =
  | { readonly ok: true; readonly assertion: ValidAssertion }
  | { readonly ok: false; readonly kind: "refused" | "provider"; readonly reason: string }

export interface ResponseInput {
  readonly samlResponse: string
  readonly settings: SamlSettings
  readonly sp: ServiceProvider
  /** the AuthnRequest ID stored with the login state */
  readonly requestId: string
  readonly nowMs: number
}

const refused = (reason: string): Outcome => ({ ok: false, kind: "refused", reason })

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/

/** Step 1: the envelope, before any XML library sees it. */
const envelope = (samlResponse: string): { readonly xml: string; readonly root: Element } | string => {
  if (samlResponse.length > MAX_XML_BYTES) return `The SAMLResponse exceeds ${MAX_XML_BYTES} bytes`
  const compact = samlResponse.replace(/\s+/g, "")
  if (compact === "" || compact.length % 4 !== 0 || !BASE64.test(compact)) return "The SAMLResponse is not base64"
  const xml = Buffer.from(compact, "base64").toString("utf8")
  const doc = parseXml(xml)
  if (typeof doc === "string") return `The SAMLResponse ${doc}`
  const root = doc.documentElement
  if (root.namespaceURI !== PROTOCOL || root.localName !== "Response") return "The SAMLResponse is not a SAML 2.0 Response"
  return { xml, root }
}

const childElements = (parent: Element, ns: string, local: string): Array<Element> =>
  Array.from(parent.childNodes).filter((n): n is Element =>
    n.nodeType === 1 && (n as Element).namespaceURI === ns && (n as Element).localName === local
  )

/** Step 4a: what the Response element itself says (outside the assertion's signature). */
const responseProblem = (root: Element, input: ResponseInput): string | undefined => {
  const status = childElements(root, PROTOCOL, "Status")[0]
  const code = status === undefined ? undefined : childElements(status, PROTOCOL, "StatusCode")[0]?.getAttribute("Value")
  if (code !== SUCCESS) return `The IdP answered with status ${code ?? "(none)"}`
  const destination = root.getAttribute("Destination")
  if (destination !== input.sp.acsUrl) return `The Response's Destination ${JSON.stringify(destination ?? "")} is not this connection's ACS URL`
  const issuer = childElements(root, ASSERTION, "Issuer")[0]?.textContent?.trim()
  if (issuer !== undefined && issuer !== input.settings.idpEntityId) return `The Response's Issuer ${JSON.stringify(issuer)} is not the IdP's entity id`
  return undefined
}

type Js = Record<string, any>
const first = (v: unknown): Js | undefined => (Array.isArray(v) ? v[0] : undefined)
const time = (v: unknown): number | undefined => {
  if (typeof v !== "string") return undefined
  const ms = Date.parse(v)
  return Number.isFinite(ms) ? ms : undefined
}

/** Step 4b: the signed assertion's times, audience subject confirmation and issuer, on `nowMs`. */
const assertionProblem = (assertion: Js, input: ResponseInput): string | undefined => {
  const now = input.nowMs
  const issuer = first(assertion.Issuer)?._?.trim()
  if (issuer !== input.settings.idpEntityId) return `The assertion's Issuer ${JSON.stringify(issuer ?? "")} is not the IdP's entity id`
  const issued = time(assertion.$?.IssueInstant)
  if (issued === undefined) return "The assertion has no valid IssueInstant"
  if (issued > now + CLOCK_SKEW_MS) return "The assertion was issued in the future"
  if (now - CLOCK_SKEW_MS >= issued + MAX_ASSERTION_AGE_MS) return "The assertion is older than 10 minutes"
  const conditions = first(assertion.Conditions)?.$ ?? {}
  const notBefore = time(conditions.NotBefore)
  const notOnOrAfter = time(conditions.NotOnOrAfter)
  if (notBefore !== undefined && now + CLOCK_SKEW_MS < notBefore) return "The assertion is not yet valid (Conditions NotBefore)"
  if (notOnOrAfter !== undefined && now - CLOCK_SKEW_MS >= notOnOrAfter) return "The assertion has expired (Conditions NotOnOrAfter)"
  const confirmations: Array<Js> = first(assertion.Subject)?.SubjectConfirmation ?? []
  const bearer = confirmations.filter((c) => c.$?.Method === BEARER)
  if (bearer.length === 0) return "The assertion has no bearer SubjectConfirmation"
  // one bearer confirmation must satisfy every rule (SAML profiles §4.1.4.2); report the first's fault
  const faults = bearer.map((c) => {
    const data = first(c.SubjectConfirmationData)?.$ ?? {}
    if (data.Recipient !== input.sp.acsUrl) return `The SubjectConfirmation's Recipient ${JSON.stringify(data.Recipient ?? "")} is not this connection's ACS URL`
    if (data.InResponseTo !== input.requestId) return "The SubjectConfirmation's InResponseTo is not the stored request"
    const until = time(data.NotOnOrAfter)
    if (until === undefined) return "The SubjectConfirmation has no NotOnOrAfter"
    if (now - CLOCK_SKEW_MS >= until) return "The assertion has expired (SubjectConfirmation NotOnOrAfter)"
    const from = time(data.NotBefore)
    if (from !== undefined && now + CLOCK_SKEW_MS < from) return "The SubjectConfirmation is not yet valid"
    return undefined
  })
  return faults.includes(undefined) ? undefined : faults[0]
}

/** Until when the assertion could still be accepted: its latest NotOnOrAfter, capped by the age limit. */
const retainUntil = (assertion: Js): number => {
  const issued = time(assertion.$?.IssueInstant)!
  const ends = [
    time(first(assertion.Conditions)?.$?.NotOnOrAfter),
    ...((first(assertion.Subject)?.SubjectConfirmation ?? []) as Array<Js>).map((c) => time(first(c.SubjectConfirmationData)?.$?.NotOnOrAfter))
  ].filter((t): t is number => t !== undefined)
  return Math.min(Math.max(...ends), issued + MAX_ASSERTION_AGE_MS) + CLOCK_SKEW_MS
}

/** Attribute values as strings (xml2js gives a string, an array, or an object for complex values). */
const attributesOf = (profile: Profile): Record<string, ReadonlyArray<string>> => {
  const raw = (profile.attributes ?? {}) as Record<string, unknown>
  const out: Record<string, Array<string>> = {}
  for (const [name, value] of Object.entries(raw)) {
    const values = (Array.isArray(value) ? value : [value]).filter((v): v is string => typeof v === "string")
    if (values.length > 0) out[name] = values
  }
  return out
}

export const checkSamlResponse = async (input: ResponseInput): Promise<Outcome> => {
  const env = envelope(input.samlResponse)
  if (typeof env === "string") return refused(env)
  const certificates = usableCertificates(input.settings.idpCertificates, input.nowMs)
  if (certificates.length === 0) {
    return { ok: false, kind: "provider", reason: "Every IdP signing certificate of this connection has expired or is not yet valid: import the IdP's current metadata" }
  }
  let profile: Profile | null
  try {
    const client = samlClient(input.settings, input.sp, { certificates, requestId: input.requestId })
    profile = (await client.validatePostResponseAsync({ SAMLResponse: input.samlResponse.replace(/\s+/g, "") })).profile
  } catch (error) {
    if (error instanceof samlLibraries().saml.SamlStatusError) return refused(`The IdP refused the sign-in: ${error.message}`)
    const message = error instanceof Error ? error.message : String(error)
    return refused(/signature/i.test(message) ? `The assertion is not signed by the IdP's certificate (${message})` : `The SAML Response is invalid: ${message}`)
  }
  if (profile === null) return refused("The SAML Response carries no assertion")
  const problem = responseProblem(env.root, input)
  if (problem !== undefined) return refused(problem)
  const assertion = (profile.getAssertion?.() as Js | undefined)?.Assertion as Js | undefined
  if (assertion === undefined) return refused("The SAML Response carries no assertion")
  const assertionFault = assertionProblem(assertion, input)
  if (assertionFault !== undefined) return refused(assertionFault)
  const assertionId = assertion.$?.ID
  if (typeof assertionId !== "string" || assertionId === "") return refused("The assertion has no ID")
  if (typeof profile.nameID !== "string" || profile.nameID.trim() === "") return refused("The assertion has no NameID")
  // the NameID is the person's identity key: a transient one changes at every sign-in (SAML core §8.3.8)
  if (profile.nameIDFormat === TRANSIENT) {
    return refused("The IdP sent a transient NameID, which changes at every sign-in: configure a persistent, email or unspecified NameID format")
  }
  return {
    ok: true,
    assertion: {
      assertionId,
      issuer: input.settings.idpEntityId,
      nameId: profile.nameID,
      nameIdFormat: profile.nameIDFormat ?? null,
      attributes: attributesOf(profile),
      retainUntilMs: retainUntil(assertion)
    }
  }
}
