/**
 * Summaries, descriptions and examples of SSO connections, sessions and sign-in (decisions §12);
 * SsoConnectionsApi and SsoLoginApi carry them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { DEV as DEVELOPER, T } from "../platform/DocExamples.ts"

const CONN = "sso_01JDQ9SC6DEFGHJKMNPQRSTVWX"
const SESSION = "ssosess_01JDQ9TD7EFGHJKMNPQRSTVWXY"
const BASE = "https://auth.example.com"
const LATER = "2026-11-24T18:00:00.000Z"
const oidc = {
  id: CONN, connectionId: CONN, name: "Okta workforce", protocol: "oidc", status: "active", domains: ["example.com"], jitProvisioning: true,
  enforce: true, groupsClaim: "groups", groupMappings: { engineering: ["repo:read", "repo:write"] }, defaultScopes: ["profile:read"],
  allowedRedirectUris: ["https://app.example.com/after-sso"], issuerUrl: "https://example.okta.com", clientId: "0oa1b2c3d4", 
  tokenEndpointAuthMethod: "client_secret_basic", scopes: "openid email profile groups", tenantMode: "single", hasClientSecret: true,
  redirectUri: `${BASE}/sso/oidc/callback`, createdAt: T, updatedAt: T
}
const saml = {
  id: CONN, connectionId: CONN, name: "Entra ID (SAML)", protocol: "saml", status: "active", domains: ["contoso.com"], jitProvisioning: true,
  enforce: false, groupsClaim: null, groupMappings: {}, defaultScopes: [], allowedRedirectUris: [],
  idpEntityId: "https://sts.windows.net/7f1e…/", idpSsoUrl: "https://login.microsoftonline.com/7f1e…/saml2",
  idpCertificates: ["-----BEGIN CERTIFICATE-----\nMIIC…\n-----END CERTIFICATE-----"],
  spEntityId: `${BASE}/sso/saml/metadata/${CONN}`, spAcsUrl: `${BASE}/sso/saml/acs/${CONN}`, spMetadataUrl: `${BASE}/sso/saml/metadata/${CONN}`,
  createdAt: T, updatedAt: T
}
const legacy = { connectionId: CONN, issuerUrl: "https://example.okta.com", clientId: "0oa1b2c3d4", redirectUri: "https://app.example.com/after-sso", createdAt: T, updatedAt: T }
const session = { sessionId: SESSION, principalId: "alice@example.com", developerId: DEVELOPER, expiresAt: LATER, groups: ["engineering"], mappedScopes: ["profile:read", "repo:read", "repo:write"] }
const FIELDS = "`domains` (at most 50; a domain another active connection of yours claims is 409) route `GET /sso/login?domain=`; `jitProvisioning` (default true) creates a directory user at first sign-in; `enforce` makes the consent page require the person to sign in here first; `groupsClaim` names the claim holding groups, `groupMappings` maps a group to scopes, and with `defaultScopes` they cap what an SSO-approved consent grants (requested ∩ (mapped ∪ `defaultScopes`): a connection that maps nothing grants nothing); a first sign-in links to an existing directory user only by a verified email of one of `domains`, else JIT names the user by that email or `sso:<connectionId>:<subject>`; `allowedRedirectUris` are the only `redirect_uri` values a login may name."

export const SSO_CONNECTIONS_DOCS = {
  create: {
    summary: "Create an SSO connection",
    description: `Called by your backend: an identity provider your users sign in with. OIDC: \`issuerUrl\` (discovery is fetched from it), \`clientId\`, \`clientSecret\` (sealed with the vault keys, never answered), \`tokenEndpointAuthMethod\` (\`client_secret_basic\`, the default, or \`client_secret_post\`), \`scopes\` (default \`openid email profile\`), \`tenantMode\` (\`entra-multi\` for Entra ID's /common or /organizations, whose issuer carries the token's \`tid\`) with \`allowedTenants\` (required with \`entra-multi\`, refused with \`single\`: 1-100 Entra tenant ids, GUIDs; a token whose \`tid\` is not listed is refused, 401 \`SSO_AUTH_FAILED\`). The redirect URI to register at the provider is in the answer (\`redirectUri\`). SAML: \`idpMetadataXml\`, or \`idpEntityId\`, \`idpSsoUrl\` and \`idpCertificates\` (PEM); the answer carries the values to paste into the provider (\`spEntityId\`, \`spAcsUrl\`, \`spMetadataUrl\`). ${FIELDS} At most 20 connections (409); \`protocol: "ldap"\` answers 422 \`PROTOCOL_NOT_SUPPORTED\`. Emits \`sso.connection.created\`.`,
    request: { name: "Okta workforce", protocol: "oidc", issuerUrl: "https://example.okta.com", clientId: "0oa1b2c3d4", clientSecret: "…", domains: ["example.com"], groupsClaim: "groups", groupMappings: { engineering: ["repo:read", "repo:write"] }, defaultScopes: ["profile:read"], enforce: true },
    response: oidc
  },
  list: { summary: "List SSO connections", description: "Your connections, oldest first, without secrets.", response: { connections: [oidc, saml] } },
  get: { summary: "Read an SSO connection", description: "One connection by its `sso_` id; 404 for another developer's.", response: saml },
  update: {
    summary: "Change an SSO connection",
    description: `Changes the fields sent; the result is checked as a whole, as on create (the protocol cannot change). A new \`clientSecret\` replaces the sealed one. \`status: "inactive"\` stops its logins and sessions. Emits \`sso.connection.updated\` with the names of the fields that changed; a change of \`enforce\` is written to your audit chain. ${FIELDS}`,
    request: { enforce: false, defaultScopes: ["profile:read", "calendar:read"] },
    response: { ...oidc, enforce: false, defaultScopes: ["profile:read", "calendar:read"] }
  },
  remove: { summary: "Delete an SSO connection", description: "Removes the connection; its sessions end with it. Emits `sso.connection.deleted`." },
  test: {
    summary: "Test an SSO connection",
    description: "Reaches the provider now: OIDC discovery and its JWKS (at least one asymmetric key); SAML the metadata and certificate validity. Answers 200 with `success` and each check; a failing check says why.",
    response: { success: true, protocol: "oidc", checks: [{ name: "discovery", ok: true, detail: "https://example.okta.com" }, { name: "jwks", ok: true, detail: "2 signing key(s)" }] }
  },
  enforce: {
    summary: "Require SSO at consent",
    description: "Sets `enforce` on all your active connections. With it, the consent page sends the person to their provider first; only the request's principal, signed in there, approves, for at most the scopes their groups allow; policy auto-approval and consent bundles then need such an approval. Written to your audit chain.",
    request: { enforce: true },
    response: { enforce: true, developerId: DEVELOPER, connections: 1 }
  },
  sessions: {
    summary: "List SSO sessions",
    description: "People signed in through your connections whose session is live, newest first; page with `cursor` / `limit` (1–100).",
    response: { sessions: [{ sessionId: SESSION, connectionId: CONN, principalId: "alice@example.com", groups: ["engineering"], createdAt: T, expiresAt: LATER }], nextCursor: null }
  },
  removeSession: { summary: "End an SSO session", description: "The session stops counting at once (the consent page asks the person to sign in again)." },
  setConfig: {
    summary: "Set the legacy SSO configuration",
    description: "Compatibility with the published protocol: creates or replaces the OIDC connection named `legacy` (`redirectUri` becomes its only allowed redirect). Answers 201 whether it creates or replaces, as the published protocol does. Prefer the connections API.",
    request: { issuerUrl: "https://example.okta.com", clientId: "0oa1b2c3d4", clientSecret: "…", redirectUri: "https://app.example.com/after-sso" },
    response: legacy
  },
  getConfig: { summary: "Read the legacy SSO configuration", description: "The `legacy` connection, without its secret; 404 when none.", response: legacy },
  removeConfig: { summary: "Delete the legacy SSO configuration", description: "Deletes the `legacy` connection; 404 when none." }
} satisfies Record<string, OperationDoc>

export const SSO_LOGIN_DOCS = {
  login: {
    summary: "Start an SSO sign-in",
    description: "Public. `org` is your developer id; the connection is `connection`, else the one claiming `domain` (422 `DOMAIN_NOT_CONFIGURED` when none does: no fallback), else your only active one. `redirect_uri` must be one of the connection's `allowedRedirectUris` exactly; after sign-in the browser returns there with `sso_session=<id>` (or `error=access_denied`). State and nonce are stored on the server, single use, 10 minutes; PKCE S256 whenever the provider supports it. `mode=json` (the default) answers the provider's URL; `mode=redirect` answers 302 to it. Either answer sets a `__Host-aas_login_…` pre-login cookie (HttpOnly, Secure, 10 minutes; SameSite=Lax for OIDC, None for SAML, whose IdP answers with a cross-site form post) bound to the state: the browser callback and the ACS refuse a browser without it (login CSRF).",
    response: { authorizeUrl: "https://example.okta.com/oauth2/v1/authorize?client_id=0oa1b2c3d4&…", protocol: "oidc", connectionId: CONN }
  },
  oidcCallback: {
    summary: "OIDC sign-in callback (browser)",
    description: "Where the provider sends the browser (the redirect URI to register: `PUBLIC_BASE_URL/sso/oidc/callback`). On success a `__Host-` session cookie (HttpOnly, Secure, SameSite=Lax) and 303 to the consent page, the permissions page or the stored redirect; refused, 303 there with `error=access_denied` and no session. A browser that does not carry the sign-in's pre-login cookie (it did not start this sign-in: login CSRF) is refused so.",
    response: "<!doctype html>…", responseType: "text/html"
  },
  oidcCallbackJson: {
    summary: "OIDC sign-in callback (JSON)",
    description: "For applications that relay the provider's `code` and `state`. ID token rules: asymmetric signature checked against the provider's JWKS, `iss` the discovery issuer (for `entra-multi`, with the token's `tid`), `aud` containing the client id (and `azp` equal to it when `aud` has several values), 60 s skew, the nonce. `iat` at most 60 s in the future; `entra-multi`: the token's `tid` one of `allowedTenants`. The person is identified by (connection, `iss`, `sub`); a first sign-in links to a directory user only by an email whose `email_verified` is the boolean true and whose domain is one of the connection's `domains`, else JIT names a new user by that email or `sso:<connectionId>:<sub>`; Google's `hd` must be one of `domains`. 401 `SSO_AUTH_FAILED` when refused, 502 `SSO_ERROR` when the provider failed.",
    request: { code: "c0de…", state: "st4te…" },
    response: session
  },
  permissionsLogin: {
    summary: "Sign in to the permissions page through SSO",
    description: "Public. For a developer with an `enforce` connection: sends the person to their provider, then to the permissions page with a fresh session (`#session=…`). 404 page otherwise.",
    response: "<!doctype html>…", responseType: "text/html"
  }
} satisfies Record<string, OperationDoc>
