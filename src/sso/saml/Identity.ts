/**
 * The identity a checked SAML assertion gives (decisions §12): issuer = the IdP's entity id, subject
 * = the NameID, groups from the attribute the connection names in `groupsClaim`, and the email from
 * the standard attributes.
 *
 * Whether that email counts as verified: SAML has no `email_verified`. An attribute is whatever the
 * IdP's administrator mapped (Entra's `user.mail`, Okta's `user.email`, often editable by the user or
 * unverified for guests: the "nOAuth" class of takeover), and a signed assertion only says the IdP
 * sent it. So the email counts as verified only when its domain is one of the connection's `domains`:
 * the developer declared this IdP authoritative for those domains, and no other active connection can
 * claim them (409). Otherwise the email is reported but never used to find a directory user.
 */
import type { ValidAssertion } from "./Response.ts"

/** Standard names of the email attribute: LDAP/eduPerson, Entra/AD FS claim URIs, common short names. */
export const EMAIL_ATTRIBUTES = [
  "urn:oid:0.9.2342.19200300.100.1.3",
  "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress",
  "http://schemas.xmlsoap.org/claims/EmailAddress",
  "email",
  "mail",
  "emailaddress",
  "emailAddress",
  "Email",
  "EmailAddress",
  "user.email"
]

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/

export interface SamlIdentity {
  readonly issuer: string
  readonly subject: string
  readonly email: string | null
  readonly emailVerified: boolean
  readonly groups: ReadonlyArray<string>
}

export const emailOf = (attributes: ValidAssertion["attributes"]): string | null => {
  for (const name of EMAIL_ATTRIBUTES) {
    const value = attributes[name]?.[0]?.trim()
    if (value !== undefined && EMAIL.test(value)) return value
  }
  return null
}

export const identityOf = (
  assertion: ValidAssertion,
  connection: { readonly domains: ReadonlyArray<string>; readonly groupsClaim: string | null }
): SamlIdentity => {
  const email = emailOf(assertion.attributes)
  const domain = email?.slice(email.lastIndexOf("@") + 1).toLowerCase()
  const emailVerified = domain !== undefined && connection.domains.some((d) => d.toLowerCase() === domain)
  const groups = connection.groupsClaim === null || connection.groupsClaim === ""
    ? []
    : [...new Set(assertion.attributes[connection.groupsClaim] ?? [])]
  return { issuer: assertion.issuer, subject: assertion.nameId, email, emailVerified, groups }
}
