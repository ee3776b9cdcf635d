/**
 * Summaries, descriptions and examples of the SAML routes (decisions §12): what an identity provider
 * and a person's browser call, not a developer. SamlApi carries them.
 */
import type { OperationDoc } from "../../platform/OperationDocs.ts"
import { DEV, LATER } from "../../platform/DocExamples.ts"

const CONNECTION = "sso_01JDQ9P3Q4R5S6T7V8W9X0Y1Z2"
const BASE = "http://localhost:3001"
const RELAY_STATE = "mW0pQ3v8yF1kR6tZ2nB9xC4dH7jL5sA0eU3iO8gT1qY"
const SAML_RESPONSE = "PHNhbWxwOlJlc3BvbnNlIHhtbG5zOnNhbWxwPSJ1cm46b2FzaXM6bmFtZXM6dGM6U0FNTDoyLjA6cHJvdG9jb2wiIOKApj4uLi48L3NhbWxwOlJlc3BvbnNlPg=="
const RULES = "The Response must carry one assertion signed by one of the connection's IdP certificates (an expired certificate never verifies; " +
  "signature wrapping is refused), with the audience = the SP entity id, a bearer SubjectConfirmation whose Recipient is the ACS URL and whose " +
  "InResponseTo is the AuthnRequest made at `GET /sso/login`, the Response's Destination = the ACS URL, the issuer = the IdP entity id, within its " +
  "NotBefore/NotOnOrAfter (60 s skew) and at most 10 minutes old; each assertion id is accepted once. A SAMLResponse over 1 MiB is refused unread " +
  "(413). The person is the NameID (a transient one is refused; SAML has no `email_verified`: an email attribute counts as verified only when its domain is one of the connection's " +
  "`domains`); groups come from the attribute named by the connection's `groupsClaim`."

export const SAML_DOCS = {
  samlMetadata: {
    summary: "SAML SP metadata",
    description: "Public: the service provider metadata of a SAML connection, for the identity provider (its URL is the connection's `spEntityId` " +
      "and `spMetadataUrl`): entity id, the ACS URL with the HTTP-POST binding, signed assertions wanted. 404 for an unknown connection.",
    responseType: "application/samlmetadata+xml",
    response: `<?xml version="1.0"?><EntityDescriptor xmlns="urn:oasis:names:tc:SAML:2.0:metadata" entityID="${BASE}/sso/saml/metadata/${CONNECTION}">` +
      `<SPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol" AuthnRequestsSigned="false" WantAssertionsSigned="true">…` +
      `<AssertionConsumerService index="1" isDefault="true" Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="${BASE}/sso/saml/acs/${CONNECTION}"/>` +
      `</SPSSODescriptor></EntityDescriptor>`
  },
  samlAcs: {
    summary: "SAML assertion consumer service (browser form post)",
    description: "Public: where the identity provider's page posts the person's browser (`application/x-www-form-urlencoded` `SAMLResponse` and " +
      "`RelayState`, the state of `GET /sso/login`, single use, 10 minutes). Signed in: 303 to the consent page or the login's `redirect_uri` " +
      "(with `sso_session`) and the `__Host-` session cookie. Refused (also when the browser lacks the sign-in's pre-login cookie: login CSRF): 303 to the same place with `error=access_denied`, no session. With nowhere " +
      `to go back to, a page (200 signed in; 400 unknown, used or expired state, or no \`RelayState\`: IdP-initiated sign-in is not accepted; 401 refused; 502 the provider failed). Limited to 60 a minute per address, as \`GET /sso/login\`. ${RULES}`,
    request: { SAMLResponse: SAML_RESPONSE, RelayState: RELAY_STATE },
    response: "<!doctype html><html lang=\"en\">…</html>"
  },
  samlCallback: {
    summary: "SAML callback (JSON)",
    description: "Public, for applications that relay the SAML Response themselves (the published protocol's JSON shape): the same checks as the " +
      `ACS, for the connection the state was made for. 200 with the session; 401 \`SSO_AUTH_FAILED\` when the identity was refused (or the state is unknown, used or expired); 502 \`SSO_ERROR\` when the provider's setup failed (every certificate expired). ${RULES}`,
    request: { SAMLResponse: SAML_RESPONSE, RelayState: RELAY_STATE },
    response: {
      sessionId: "ssosess_01JDQ9Q4R5S6T7V8W9X0Y1Z2A3",
      principalId: "ann@example.com",
      developerId: DEV,
      expiresAt: LATER,
      groups: ["engineering"],
      mappedScopes: ["email:read", "profile:read"]
    }
  }
} satisfies Record<string, OperationDoc>
