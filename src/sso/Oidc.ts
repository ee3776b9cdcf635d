/**
 * The OIDC relying party (decisions §12) as an Effect service over `openid-client` 6 and the
 * library it is built on (`oauth4webapi`, same author and release line): discovery, PKCE S256
 * (whenever the provider advertises it), nonce, the authorization URL, the code exchange with
 * `client_secret_basic` or `client_secret_post`, the ID token checks and userinfo. Every request
 * goes through `pinnedFetch` (https, public and pinned addresses unless SSO_ALLOW_PRIVATE_HOSTS)
 * with a 10 s deadline and a 1 MiB bound.
 *
 * The exchange uses oauth4webapi's steps directly because openid-client substitutes Entra's
 * `{tenantid}` issuer template only for the host login.microsoftonline.com; here the template
 * applies to any connection with `tenantMode: "entra-multi"`. ID token rules: asymmetric
 * signatures only, verified against the provider's JWKS; `iss` the discovery issuer (or the
 * template with the token's `tid`); `aud` contains the client id and `azp` equals it when `aud`
 * has several values; 60 s skew against the service's Clock (an `iat` further in the future is
 * refused too, which oauth4webapi does not check); the nonce matches; for entra-multi the token's
 * `tid` is one of the connection's `allowedTenants`. An email counts only when `email_verified` is
 * the JSON boolean true (never the string "true").
 */
import { Context, Effect, Layer } from "effect"
import * as oauth from "oauth4webapi"
import * as client from "openid-client"
import { Config } from "../Config.ts"
import { SsoAuthFailed, SsoError } from "../platform/Errors.ts"
import { pinnedFetch } from "../platform/Outbound.ts"
import { nowMillis } from "../platform/Time.ts"
import { type Connection, oidcRedirectUri, SsoConnections } from "./Connections.ts"
import type { TestCheck } from "./Protocol.ts"

export const OIDC_TIMEOUT_MS = 10_000
const MAX_ANSWER_BYTES = 1024 * 1024
const DISCOVERY_TTL_MS = 60 * 60 * 1000
export const CLOCK_TOLERANCE_SECONDS = 60
const ASYMMETRIC = new Set(["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"])

/** What a verified login tells the core (see Identity.ts), plus what the JSON answer shows. */
export interface OidcIdentity {
  readonly issuer: string
  readonly subject: string
  readonly email: string | null
  readonly emailVerified: boolean
  readonly groups: ReadonlyArray<string>
}

export interface OidcClientService {
  /** the provider's authorization URL; the PKCE verifier to keep when the provider supports S256 */
  readonly authorizationUrl: (
    connection: Connection,
    input: { readonly state: string; readonly nonce: string; readonly loginHint?: string | undefined }
  ) => Effect.Effect<{ readonly url: string; readonly codeVerifier: string | null }, SsoError>
  readonly exchange: (
    connection: Connection,
    input: { readonly code: string; readonly iss?: string | undefined; readonly codeVerifier: string | null; readonly nonce: string }
  ) => Effect.Effect<OidcIdentity, SsoAuthFailed | SsoError>
  readonly test: (connection: Connection) => Effect.Effect<{ readonly ok: boolean; readonly checks: ReadonlyArray<TestCheck> }>
}

export class OidcClient extends Context.Tag("agent-auth/OidcClient")<OidcClient, OidcClientService>() {}

/**
 * oauth4webapi's hook for an issuer that depends on the token (what openid-client sets for Entra ID):
 * exported at run time, left out of its type declarations. Checked at load so an upgrade that drops it fails loudly.
 */
const EXPECTED_ISSUER: symbol = (oauth as unknown as { _expectedIssuer: symbol })._expectedIssuer
if (typeof EXPECTED_ISSUER !== "symbol") throw new Error("oauth4webapi no longer exports _expectedIssuer: entra-multi cannot be checked")

/** A provider that could not be reached or answered garbage (502), as opposed to a refused identity (401). */
class Unreachable extends Error {}

const failed = (message: string) => new SsoAuthFailed({ message: `The identity provider's answer was refused: ${message}` })
const providerError = (message: string) => new SsoError({ message: `The identity provider failed: ${message}` })

/** oauth4webapi and openid-client errors → ours; messages carry no secrets (never the token, the code or an address). */
const classify = (e: unknown): SsoAuthFailed | SsoError => {
  if (e instanceof Unreachable) return providerError(e.message)
  if (e instanceof oauth.WWWAuthenticateChallengeError) {
    return providerError("the token endpoint refused the client (check clientId, clientSecret and tokenEndpointAuthMethod)")
  }
  if (e instanceof oauth.ResponseBodyError) {
    // our client refused (a wrong secret, a disabled app) is a configuration failure, not the person's
    return e.status >= 500 || e.error === "invalid_client" || e.error === "unauthorized_client"
      ? providerError(`token endpoint answered ${e.status} ${e.error}`)
      : failed(`token endpoint answered ${e.error}`)
  }
  if (e instanceof oauth.OperationProcessingError) {
    return e.code === oauth.RESPONSE_IS_NOT_JSON || e.code === oauth.RESPONSE_IS_NOT_CONFORM ? providerError(e.message) : failed(e.message)
  }
  if (e instanceof oauth.UnsupportedOperationError) return failed(e.message)
  if (e instanceof client.ClientError) return providerError(e.message)
  return providerError(e instanceof Error ? e.message : "unexpected failure")
}

const wellKnown = (issuerUrl: string) => `${issuerUrl.replace(/\/+$/, "")}/.well-known/openid-configuration`

interface Discovered {
  readonly as: oauth.AuthorizationServer
  readonly at: number
}

export const OidcClientLive = Layer.effect(
  OidcClient,
  Effect.gen(function*() {
    const config = yield* Config
    const connections = yield* SsoConnections
    const allowPrivate = config.sso.allowPrivateHosts
    const pinned = pinnedFetch({ allowPrivateHosts: allowPrivate, timeoutMs: OIDC_TIMEOUT_MS, maxBodyBytes: MAX_ANSWER_BYTES })
    // a failure to reach the provider is told apart from a refusal by its class
    const fetch = (async (input: string | URL | Request, init?: RequestInit) => {
      try {
        return await pinned(input, init)
      } catch (e) {
        throw new Unreachable(e instanceof Error && e.name === "TimeoutError" ? "timed out" : e instanceof Error ? e.message : "unreachable")
      }
    }) as typeof globalThis.fetch
    const io = { [oauth.customFetch]: fetch, [oauth.allowInsecureRequests]: allowPrivate } as const
    /** discovery answers by issuer, an hour (the JWKS cache of oauth4webapi hangs off the same object) */
    const cache = new Map<string, Discovered>()

    const discover = (connection: Connection, fresh = false) =>
      Effect.gen(function*() {
        const oidc = connection.oidc!
        const key = `${oidc.tenantMode}|${oidc.issuerUrl}`
        const ms = yield* nowMillis
        const hit = cache.get(key)
        if (!fresh && hit !== undefined && ms - hit.at < DISCOVERY_TTL_MS) return hit.as
        // entra-multi: the document's issuer is a template, so it is fetched by its full URL (no issuer equality check)
        const url = new URL(oidc.tenantMode === "entra-multi" ? wellKnown(oidc.issuerUrl) : oidc.issuerUrl)
        const configuration = yield* Effect.tryPromise({
          try: () =>
            client.discovery(url, oidc.clientId, undefined, undefined, {
              [client.customFetch]: fetch as any,
              execute: allowPrivate ? [client.allowInsecureRequests] : [],
              timeout: OIDC_TIMEOUT_MS / 1000
            }),
          catch: (e) => new SsoError({ message: `Discovery failed: ${classify(e).message}` })
        }).pipe(Effect.timeoutFail({ duration: OIDC_TIMEOUT_MS + 1000, onTimeout: () => providerError("discovery timed out") }))
        const metadata = configuration.serverMetadata() as oauth.AuthorizationServer
        if (oidc.tenantMode === "entra-multi" && !metadata.issuer.includes("{tenantid}")) {
          return yield* Effect.fail(new SsoError({ message: "Discovery failed: tenantMode entra-multi needs an issuer with {tenantid}" }))
        }
        const as: oauth.AuthorizationServer = oidc.tenantMode === "entra-multi"
          ? Object.assign({ ...metadata }, {
            [EXPECTED_ISSUER]: ({ claims }: { claims: { tid?: unknown } }) =>
              typeof claims.tid === "string" && /^[A-Za-z0-9-]{1,64}$/.test(claims.tid) ? metadata.issuer.replace("{tenantid}", claims.tid) : "(no valid tid)"
          })
          : metadata
        cache.set(key, { as, at: ms })
        return as
      })

    const authorizationUrl: OidcClientService["authorizationUrl"] = (connection, input) =>
      Effect.gen(function*() {
        const oidc = connection.oidc!
        const as = yield* discover(connection)
        const pkce = as.code_challenge_methods_supported?.includes("S256") === true
        const codeVerifier = pkce ? client.randomPKCECodeVerifier() : null
        const params: Record<string, string> = {
          redirect_uri: oidcRedirectUri(config.publicBaseUrl),
          scope: oidc.scopes,
          state: input.state,
          nonce: input.nonce,
          response_type: "code"
        }
        if (codeVerifier !== null) {
          params.code_challenge = yield* Effect.promise(() => client.calculatePKCECodeChallenge(codeVerifier))
          params.code_challenge_method = "S256"
        }
        if (input.loginHint !== undefined) params.login_hint = input.loginHint
        const configuration = new client.Configuration(as as client.ServerMetadata, oidc.clientId)
        if (allowPrivate) client.allowInsecureRequests(configuration)
        const url = yield* Effect.try({
          try: () => client.buildAuthorizationUrl(configuration, params).href,
          catch: (e) => providerError(`no usable authorization endpoint (${e instanceof Error ? e.message : "invalid"})`)
        })
        return { url, codeVerifier }
      })

    /** the client metadata for one check: the service's Clock decides what "now" is (TestClock in tests) */
    const clientFor = (connection: Connection, ms: number): oauth.Client => ({
      client_id: connection.oidc!.clientId,
      [oauth.clockSkew]: Math.round((ms - Date.now()) / 1000),
      [oauth.clockTolerance]: CLOCK_TOLERANCE_SECONDS
    })

    const groupsOf = (connection: Connection, claims: Record<string, unknown>): Array<string> => {
      if (connection.groupsClaim === null) return []
      const value = claims[connection.groupsClaim]
      const list = Array.isArray(value) ? value : typeof value === "string" ? [value] : []
      return list.filter((g): g is string => typeof g === "string" && g.length > 0 && g.length <= 256).slice(0, 1000)
    }

    const exchange: OidcClientService["exchange"] = (connection, input) =>
      Effect.gen(function*() {
        const oidc = connection.oidc!
        const as = yield* discover(connection)
        const secret = yield* connections.clientSecret(connection)
        const ms = yield* nowMillis
        const meta = clientFor(connection, ms)
        // RFC 9207: an `iss` in the callback names the provider that answered (mix-up defence)
        if (input.iss !== undefined && oidc.tenantMode === "single" && input.iss !== as.issuer) {
          return yield* Effect.fail(failed("the callback's iss is not this connection's issuer"))
        }
        const auth = oidc.tokenEndpointAuthMethod === "client_secret_post" ? oauth.ClientSecretPost(secret) : oauth.ClientSecretBasic(secret)
        const run = async () => {
          const params = oauth.validateAuthResponse({ ...as, authorization_response_iss_parameter_supported: false }, meta, new URLSearchParams({ code: input.code }), oauth.skipStateCheck)
          const response = await oauth.authorizationCodeGrantRequest(
            as, meta, auth, params, oidcRedirectUri(config.publicBaseUrl), input.codeVerifier ?? oauth.nopkce, io
          )
          const result = await oauth.processAuthorizationCodeResponse(as, meta, response, { expectedNonce: input.nonce, requireIdToken: true })
          const alg = JSON.parse(Buffer.from(result.id_token!.split(".")[0]!, "base64url").toString("utf8")).alg as string
          if (!ASYMMETRIC.has(alg)) throw new oauth.UnsupportedOperationError(`ID token signed with ${alg}: only asymmetric algorithms are accepted`)
          await oauth.validateApplicationLevelSignature(as, response, io)
          const claims = oauth.getValidatedIdTokenClaims(result)! as unknown as Record<string, unknown>
          if (typeof claims.iat === "number" && claims.iat > Math.floor(ms / 1000) + CLOCK_TOLERANCE_SECONDS) {
            throw new oauth.UnsupportedOperationError("iat is in the future beyond the 60 s skew")
          }
          // entra-multi: any Entra tenant can sign a valid token for a multi-tenant app; only the listed ones count
          if (oidc.tenantMode === "entra-multi" && !(typeof claims.tid === "string" && oidc.allowedTenants.includes(claims.tid.toLowerCase()))) {
            throw new oauth.UnsupportedOperationError("the token's tid is not one of the connection's allowedTenants")
          }
          // several audiences: azp must name us (oauth4webapi checks it too when azp is present)
          if (Array.isArray(claims.aud) && claims.aud.length > 1 && claims.azp !== oidc.clientId) {
            throw new oauth.UnsupportedOperationError("aud has several values and azp is not the client id")
          }
          const overage = typeof claims._claim_names === "object" && claims._claim_names !== null && "groups" in claims._claim_names
          const needsUserinfo = as.userinfo_endpoint !== undefined &&
            (claims.email === undefined || (connection.groupsClaim !== null && claims[connection.groupsClaim] === undefined && !overage))
          let merged: Record<string, unknown> = claims
          if (needsUserinfo && typeof result.access_token === "string") {
            const answer = await oauth.userInfoRequest(as, meta, result.access_token, io)
            const userinfo = await oauth.processUserInfoResponse(as, meta, claims.sub as string, answer) as Record<string, unknown>
            // the ID token wins for what it says; userinfo only fills what it left out
            merged = { ...userinfo, ...claims }
          }
          return { claims: merged, overage }
        }
        const { claims, overage } = yield* Effect.tryPromise({ try: run, catch: classify }).pipe(
          Effect.timeoutFail({ duration: 3 * OIDC_TIMEOUT_MS, onTimeout: () => providerError("timed out") })
        )
        // strictly the JSON boolean: a provider that lets users edit claims may send the string "true"
        const emailVerified = claims.email_verified === true
        const email = emailVerified && typeof claims.email === "string" && claims.email.includes("@") ? claims.email.toLowerCase() : null
        // Google Workspace: the hosted domain must be one of the connection's domains when they are set
        if (connection.domains.length > 0) {
          const hd = typeof claims.hd === "string" ? claims.hd.toLowerCase() : undefined
          if (hd !== undefined && !connection.domains.includes(hd)) {
            return yield* Effect.fail(failed(`hd ${hd} is not one of the connection's domains`))
          }
          if (hd === undefined && claims.iss === "https://accounts.google.com") {
            return yield* Effect.fail(failed("a Google account outside the connection's Workspace domains"))
          }
        }
        return {
          issuer: claims.iss as string,
          subject: claims.sub as string,
          email,
          emailVerified,
          // an Entra groups overage points at Graph, which is not asked: no groups (default scopes only)
          groups: overage ? [] : groupsOf(connection, claims)
        }
      })

    const test: OidcClientService["test"] = (connection) =>
      Effect.gen(function*() {
        const discovered = yield* Effect.either(discover(connection, true))
        if (discovered._tag === "Left") return { ok: false, checks: [{ name: "discovery", ok: false, detail: discovered.left.message }] }
        const as = discovered.right
        const checks: Array<TestCheck> = [{ name: "discovery", ok: true, detail: as.issuer }]
        const jwks = yield* Effect.either(Effect.tryPromise({
          try: async () => {
            if (as.jwks_uri === undefined) throw new Unreachable("no jwks_uri")
            const answer = await fetch(as.jwks_uri)
            if (answer.status !== 200) throw new Unreachable(`jwks_uri answered ${answer.status}`)
            const body = await answer.json() as { keys?: Array<{ kty?: string }> }
            const usable = (body.keys ?? []).filter((k) => k.kty === "RSA" || k.kty === "EC" || k.kty === "OKP")
            if (usable.length === 0) throw new Unreachable("the JWKS has no asymmetric key")
            return usable.length
          },
          catch: (e) => classify(e)
        }))
        checks.push(jwks._tag === "Right"
          ? { name: "jwks", ok: true, detail: `${jwks.right} signing key(s)` }
          : { name: "jwks", ok: false, detail: jwks.left.message })
        return { ok: checks.every((c) => c.ok), checks }
      })

    return { authorizationUrl, exchange, test }
  })
)
