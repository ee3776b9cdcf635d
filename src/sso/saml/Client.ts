/**
 * The node-saml service-provider client for one connection and one call. node-saml checks the XML
 * signatures (assertion signature required, several certificates tried in turn, signature wrapping
 * refused), the audience and InResponseTo; its own time checks read the machine's clock, so they
 * are switched off here and done on Effect's Clock instead (Response.ts).
 */
import type { CacheProvider } from "@node-saml/node-saml"
import { randomBytes } from "node:crypto"
import { samlLibraries } from "./Library.ts"
import type { SamlSettings, ServiceProvider } from "./Metadata.ts"

/** An AuthnRequest ID: an xs:ID (starts with a letter or underscore), 160 random bits. */
export const newRequestId = () => `_${randomBytes(20).toString("hex")}`

/**
 * InResponseTo is checked against the one request stored with the login state, not a cache shared
 * between requests: the state was already taken (single use, 10 minutes) when the Response arrives.
 * node-saml compares the entry's creation time with the machine's clock, so the entry says "now".
 */
const oneRequest = (requestId: string | undefined): CacheProvider => {
  const stored = new Map<string, string>()
  if (requestId !== undefined) stored.set(requestId, new Date().toISOString())
  return {
    saveAsync: async (key, value) => {
      stored.set(key, value)
      return { value, createdAt: Date.now() }
    },
    getAsync: async (key) => stored.get(key) ?? null,
    removeAsync: async (key) => {
      const value = key === null ? null : stored.get(key) ?? null
      if (key !== null) stored.delete(key)
      return value
    }
  }
}

export const samlClient = (
  settings: SamlSettings,
  sp: ServiceProvider,
  o: { readonly certificates: ReadonlyArray<string>; readonly requestId?: string }
) => {
  const { SAML, ValidateInResponseTo } = samlLibraries().saml
  return new SAML({
    issuer: sp.entityId,
    callbackUrl: sp.acsUrl,
    audience: sp.entityId,
    entryPoint: settings.idpSsoUrl,
    idpCert: [...o.certificates],
    idpIssuer: settings.idpEntityId,
    // a signed assertion is what we require (decisions §12); the Response around it may be unsigned
    wantAssertionsSigned: true,
    wantAuthnResponseSigned: false,
    validateInResponseTo: ValidateInResponseTo.always,
    cacheProvider: oneRequest(o.requestId),
    generateUniqueId: () => o.requestId ?? newRequestId(),
    // -1 turns node-saml's wall-clock checks off: Response.ts checks every time on Clock, with skew
    acceptedClockSkewMs: -1,
    // no NameIDPolicy format and no RequestedAuthnContext: the IdP sends what its administrator set
    // (asking for PasswordProtectedTransport would refuse people who signed in with a passkey or MFA)
    identifierFormat: null,
    disableRequestedAuthnContext: true,
    signatureAlgorithm: "sha256"
  })
}
