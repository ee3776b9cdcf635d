/**
 * Summaries and descriptions of the OAuth authorization server's endpoints (decisions §22);
 * ResourceServersApi and OAuthApi carry them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { DEV, T } from "../platform/DocExamples.ts"

const RS = "rs_01JD2Q8ZK4M7N9P3R5T7V9X1Z3"
const ISSUER = `https://auth.example/oauth/${DEV}`
const server = {
  resourceServerId: RS, identifier: "https://mcp.acme.example/mcp", name: "Acme MCP",
  scopes: [{ name: "files:read", description: "Read your files" }], defaultScopes: ["files:read"], accessTokenTtl: "1h", grantTtl: "30d",
  openRegistration: { dcr: true, cimd: false }, login: { sso: false, passkey: false, developerLoginUrl: "https://app.acme.example/oauth-login" },
  issuer: ISSUER, protectedResourceMetadataUrl: `${ISSUER}/resource-servers/${RS}/.well-known/oauth-protected-resource`,
  wwwAuthenticate: `Bearer resource_metadata="${ISSUER}/resource-servers/${RS}/.well-known/oauth-protected-resource", scope="files:read"`,
  createdAt: T, updatedAt: T
}

export const RESOURCE_SERVER_DOCS = {
  create: {
    summary: "Register a resource server (an MCP server or API)",
    description: "Its `identifier` (an https URI; http only for a loopback host outside production; no query, fragment or userinfo; stored canonical) becomes the `aud` of every access token issued for it, and is unique across the service (409 `CONFLICT`). Scope names follow RFC 6749's scope-token grammar (422 `INVALID_SCOPES`). `openRegistration.dcr` opens dynamic client registration at your issuer and needs a login method (422 `LOGIN_METHOD_REQUIRED`). Sign-in methods: `login.sso` (your SSO connections, section 12), `login.passkey` (a usernameless passkey) and the developer login bridge (`login.developerLoginUrl`); with an SSO `enforce` connection only SSO is offered. The introspection secret is shown once. `wwwAuthenticate` is the exact header value your server sends with a 401. The plan's `resourceServers` cap answers 402 `PLAN_LIMIT_EXCEEDED` (free 5, pro 100).",
    request: { identifier: "https://mcp.acme.example/mcp", name: "Acme MCP", scopes: [{ name: "files:read", description: "Read your files" }], defaultScopes: ["files:read"], openRegistration: { dcr: true }, login: { developerLoginUrl: "https://app.acme.example/oauth-login" } },
    response: { ...server, introspection: { clientId: RS, clientSecret: "rss_…" } }
  },
  list: { summary: "List your resource servers", description: "Newest first (at most 500).", response: { resourceServers: [server] } },
  get: { summary: "Get a resource server", description: "404 `NOT_FOUND` for another developer's.", response: server },
  update: {
    summary: "Change a resource server",
    description: "Everything but `identifier` (400 `BAD_REQUEST` \"identifier is immutable\": changing it would silently change every token's audience). The same checks as registration; emits `resource_server.updated` with the changed field names.",
    request: { name: "Acme MCP (beta)", defaultScopes: ["files:read"] },
    response: server
  },
  rotateSecret: {
    summary: "Rotate the introspection secret",
    description: "A new `rss_…` secret, shown once; the previous one keeps working for 24 hours so a deployment can roll.",
    response: { clientId: RS, clientSecret: "rss_…" }
  },
  remove: { summary: "Delete a resource server", description: "Revokes every grant made for it through the one revocation path (cascade, `grant.revoked`), in one transaction; 204." },
  clientSecret: {
    summary: "Give an agent a client secret (a confidential OAuth client)",
    description: "An agent you registered with redirect URIs is a public OAuth client of your issuer; a secret (`cs_…`, shown once, stored as SHA-256) makes it confidential (`client_secret_basic` or `client_secret_post`). Calling again rotates it: the previous secret stays valid 24 hours. `tokenExchange: true` (ours) lets it use RFC 8693 token exchange. 404 for a dynamically registered client (read-only).",
    request: { tokenExchange: true },
    response: { clientSecret: "cs_…", createdAt: T, tokenExchange: true }
  },
  interaction: {
    summary: "Read an OAuth sign-in waiting for your login page",
    description: "The developer login bridge: the person's browser reached your `developerLoginUrl?interaction=<id>`; this tells your backend which client asks, for which resource and scopes. 404 for another developer's.",
    response: { interactionId: "areq_01JD…", status: "authenticating", clientId: "ag_01JD…", clientName: "Claude", resourceServerId: RS, resource: "https://mcp.acme.example/mcp", scopes: ["files:read"], expiresAt: T }
  },
  interactionPrincipal: {
    summary: "Say who signed in, and get the URL to send the browser back to",
    description: "After your own login, name the principal. The answer's `redirectTo` is single use, valid 2 minutes, and works only in the browser that started the authorization (its interaction cookie): 303 the person's browser there. 404 when the interaction is not yours or no longer waits for a sign-in.",
    request: { principalId: "user_42" },
    response: { redirectTo: `${ISSUER}/interaction/areq_01JD…/resume?token=…` }
  }
} satisfies Record<string, OperationDoc>

export const OAUTH_DOCS = {
  metadata: {
    summary: "Authorization server metadata (RFC 8414)",
    description: "Public, cacheable 5 minutes, CORS `*`. The issuer is `PUBLIC_BASE_URL/oauth/<developerId>`; 404 for a developer without a resource server. `registration_endpoint` appears only while some resource server has DCR open. No ID tokens are issued, so there is no OpenID configuration.",
    response: { issuer: ISSUER, authorization_endpoint: `${ISSUER}/authorize`, token_endpoint: `${ISSUER}/token`, code_challenge_methods_supported: ["S256"] }
  },
  protectedResource: {
    summary: "Protected resource metadata (RFC 9728) of a resource server",
    description: "Public, cacheable 5 minutes, CORS `*`: `{ resource, authorization_servers, scopes_supported, bearer_methods_supported, resource_name }`. Point your 401's `resource_metadata` here, or serve a copy at your own well-known URL.",
    response: { resource: "https://mcp.acme.example/mcp", authorization_servers: [ISSUER], scopes_supported: ["files:read"], bearer_methods_supported: ["header"], resource_name: "Acme MCP" }
  },
  authorize: {
    response: "<!doctype html><html lang=\"en\">…</html>",
    summary: "Authorization endpoint",
    description: "`response_type=code`, `client_id`, `redirect_uri` (may be left out when exactly one is registered), `code_challenge` with `code_challenge_method=S256`, `scope`, `state`, `resource` (RFC 8707). A bad client or redirect URI answers a 400 page and never redirects; every later error goes back to the redirect URI with `error`, `error_description`, `state` and `iss`. Otherwise 303 to sign-in, with the `__Host-oauth_ix` cookie that binds the flow to this browser.",
    responseType: "text/html"
  },
  authorizeForm: {
    summary: "Authorization endpoint (form post)", description: "As the GET, with the parameters in a urlencoded form.", responseType: "text/html",
    request: { response_type: "code", client_id: "ag_01JD…", code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", code_challenge_method: "S256", resource: "https://mcp.acme.example/mcp" },
    response: "<!doctype html><html lang=\"en\">…</html>"
  },
  login: { summary: "Sign-in for an authorization", description: "The chooser: a page listing the resource server's sign-in methods (only SSO while you have an SSO `enforce` connection); a single method is taken at once (303). Needs the interaction cookie.", responseType: "text/html", response: "<!doctype html><html lang=\"en\">…</html>" },
  resume: { summary: "Back from the developer's login", description: "The single-use URL `POST /v1/oauth/interactions/:id/principal` answered, in the browser that started the authorization. The gate then decides as for every authorization (a policy allow or a sandbox developer approves at once); otherwise 303 to the consent page.", responseType: "text/html", response: "<!doctype html><html lang=\"en\">…</html>" },
  register: {
    summary: "Dynamic client registration (RFC 7591)",
    description: "JSON, no initial access token; open only while some resource server of the developer has `openRegistration.dcr` (else 404). The client becomes an unverified agent of the developer. `token_endpoint_auth_method` defaults to `client_secret_basic`; `none` makes a public client. Errors: `invalid_redirect_uri`, `invalid_client_metadata` (also \"client limit reached\" at the plan's `oauthClients` cap). Limited to 20 an hour per address and 1,000 an hour per developer. CORS `*`.",
    request: { redirect_uris: ["http://127.0.0.1:33418/callback"], token_endpoint_auth_method: "none", grant_types: ["authorization_code", "refresh_token"], client_name: "Claude" },
    response: { client_id: "ag_01JD…", client_id_issued_at: 1764233000, redirect_uris: ["http://127.0.0.1:33418/callback"], token_endpoint_auth_method: "none", grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], application_type: "native", client_name: "Claude" }
  },
  token: {
    summary: "Token endpoint",
    request: { grant_type: "authorization_code", code: "…", code_verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", client_id: "ag_01JD…", redirect_uri: "http://127.0.0.1:33418/callback", resource: "https://mcp.acme.example/mcp" },
    description: "Form body. `authorization_code` (with `code_verifier`, `redirect_uri`, `resource`) and `refresh_token` (rotated on every use; a reused one revokes the grant), and RFC 8693 token exchange for confidential API agents allowed to (`subject_token` of this issuer, `resource`, `scope` at most the subject's; a child grant; the token carries `act`; no refresh token; `actor_token` refused). Confidential clients authenticate with `client_secret_basic` or `client_secret_post`, public ones send `client_id`. Answers `{ access_token, token_type: \"Bearer\", expires_in, scope, refresh_token? }` with an RFC 9068 access token (`typ: at+jwt`, `aud` = the resource). Errors in RFC 6749 §5.2's shape. Limited to 600 a minute per address and 120 per `client_id` (429 `temporarily_unavailable`). CORS `*`.",
    response: { access_token: "eyJhbGciOiJSUzI1NiIsInR5cCI6ImF0K2p3dCJ9…", token_type: "Bearer", expires_in: 3600, scope: "files:read", refresh_token: "ref_…" }
  },
  introspect: {
    summary: "Token introspection (RFC 7662)",
    request: { token: "eyJhbGciOiJSUzI1NiIsInR5cCI6ImF0K2p3dCJ9…" },
    description: "For a resource server (`client_secret_basic` with `rs_…` : `rss_…`; it sees only tokens whose `aud` is its identifier) or the developer's API key (Bearer). `active: true` only for a valid, unexpired access token whose grant and agent are active online and whose jti is not revoked; refresh tokens are never active.",
    response: { active: true, scope: "files:read", client_id: "ag_01JD…", token_type: "Bearer", exp: 1764236600, sub: "user_42", aud: "https://mcp.acme.example/mcp" }
  },
  revoke: {
    summary: "Token revocation (RFC 7009)",
    request: { token: "ref_…", client_id: "ag_01JD…" },
    description: "Client authentication as at the token endpoint. A refresh token revokes its grant (cascade, `grant.revoked`); an access token revokes its jti. An unknown or foreign token changes nothing. Always 200 with an empty body, except `invalid_request` and `invalid_client`."
  }
} satisfies Record<string, OperationDoc>

const PAGE = "<!doctype html><html lang=\"en\">…</html>"
const PASSKEY_OPTIONS = {
  challengeId: "wac_01JD…",
  publicKey: { challenge: "k3YQ…", rpId: "auth.example", allowCredentials: [], userVerification: "required", timeout: 300000 }
}

export const OAUTH_SIGN_IN_DOCS = {
  developer: { summary: "Sign in through your login page", description: "303 to the resource server's `developerLoginUrl?interaction=<id>` (the developer login bridge). Needs the interaction cookie; 404 page when the method is not offered.", responseType: "text/html", response: PAGE },
  sso: {
    summary: "Sign in through SSO",
    description: "A live SSO session of yours in this browser signs the person in (its creation time is the token's `auth_time`); otherwise 303 to the organisation's identity provider (`connection`, or the one the request's `login_hint` names), which comes back here with `done=1`. A refused sign-in answers the client `access_denied`. Needs the interaction cookie.",
    responseType: "text/html",
    response: PAGE
  },
  passkey: { summary: "Sign in with a passkey", description: "The passkey page: a usernameless assertion, or, with `fidoRequired`, the signed-in person's passkey after another method. Needs the interaction cookie.", responseType: "text/html", response: PAGE },
  passkeyOptions: {
    summary: "Passkey sign-in: options",
    description: "WebAuthn request options bound to the authorization request: empty `allowCredentials` when usernameless (the person's own passkeys for the `fidoRequired` step), user verification required. Needs the interaction cookie.",
    request: { ix: "areq_01JD…" },
    response: PASSKEY_OPTIONS
  },
  passkeyVerify: {
    summary: "Passkey sign-in: verify",
    description: "Checks the assertion: signature, user verification, the user handle (it names the principal) and the signature counter. Answers `{ location }`: the consent page, the client's redirect, or the next step. Errors: `{ error, error_description }` with the passkey error's code in lower case (`verification_failed`, `credential_not_allowed`, `unknown_credential`, `invalid_challenge`).",
    request: { ix: "areq_01JD…", challengeId: "wac_01JD…", response: { id: "AbC…", rawId: "AbC…", type: "public-key", response: { clientDataJSON: "…", authenticatorData: "…", signature: "…", userHandle: "…" } } },
    response: { location: "https://auth.example/consent?req=areq_01JD…" }
  },
  passkeyScript: { summary: "The passkey page's script", description: "Our own script for the passkey page (no third-party code).", responseType: "text/javascript", response: "(() => { … })();" }
} satisfies Record<string, OperationDoc>
