/**
 * RFC 9068 access tokens (decisions §22.7): header `{ alg: RS256, typ: at+jwt, kid }`, signed with
 * the grant-token key (its kid is in the JWKS), `iss` the developer's issuer, `aud` the resource
 * server's identifier, `scope` (space-separated) and `scp` (array), `client_id`, `sub`, `jti`,
 * `auth_time`, and ours: `agt`, `dev`, `grnt`. A platform service, as grant tokens are
 * (./Keys.ts): the OAuth token endpoint signs them, and `POST /v1/tokens/verify` (grants) checks
 * them too.
 */
import { Context, Effect, Layer } from "effect"
import * as jose from "jose"
import { createPrivateKey, createPublicKey, verify as cryptoVerify } from "node:crypto"
import { Keys, type KeyService } from "./Keys.ts"

/** a developer's OAuth issuer (decisions §22.1): `{OAUTH_ISSUER_BASE}/oauth/{developerId}` */
export const issuerOf = (base: string, developerId: string) => `${base}/oauth/${developerId}`

/** the `typ` of a compact JWS's header, without checking anything else (which verifier to ask) */
export const headerTyp = (token: string): string | undefined => {
  const dot = token.indexOf(".")
  if (dot <= 0 || dot > 2000) return undefined
  try {
    const header = JSON.parse(Buffer.from(token.slice(0, dot), "base64url").toString("utf8"))
    return typeof header?.typ === "string" ? header.typ : undefined
  } catch {
    return undefined
  }
}

export interface AccessTokenClaims {
  readonly iss: string
  readonly sub: string
  readonly aud: string
  readonly client_id: string
  readonly scope: string
  readonly scp: ReadonlyArray<string>
  readonly iat: number
  readonly exp: number
  readonly jti: string
  readonly auth_time?: number
  readonly agt: string
  readonly dev: string
  readonly grnt: string
  readonly act?: unknown
}

export interface AccessTokenSigner {
  readonly sign: (claims: AccessTokenClaims) => Effect.Effect<string>
  /** signature (RS256, a key of ours), typ at+jwt, the required claims, exp (60 s leeway): the claims, or undefined */
  readonly verify: (token: string, nowSeconds: number) => Effect.Effect<AccessTokenClaims | undefined>
}

export const makeAccessTokenSigner = (keys: KeyService): Effect.Effect<AccessTokenSigner> =>
  Effect.promise(async () => {
    const privateKey = createPrivateKey(keys.privateKeyPem())
    const signingKey = await jose.importPKCS8(privateKey.export({ type: "pkcs8", format: "pem" }).toString(), "RS256")
    const publicKeys = new Map(keys.jwks.keys.map((jwk) => [jwk.kid, createPublicKey({ key: { kty: jwk.kty, n: jwk.n, e: jwk.e }, format: "jwk" })]))
    const sign = (claims: AccessTokenClaims) =>
      Effect.promise(() =>
        new jose.SignJWT({ ...claims, scp: [...claims.scp] } as unknown as jose.JWTPayload)
          .setProtectedHeader({ alg: "RS256", typ: "at+jwt", kid: keys.kid })
          .sign(signingKey)
      )
    // Verification runs synchronously through node:crypto and keeps the claims of a token whose signature
    // verified by its exact text (as platform/Keys.ts does for grant tokens): introspection went from 315 to
    // 441 answers a second with jose's async verify replaced (16 clients, real PostgreSQL and Redis, 2 cores).
    // The time checks run on every call.
    const verified = new Map<string, AccessTokenClaims>()
    const check = (token: string): AccessTokenClaims | undefined => {
      const parts = token.split(".")
      if (parts.length !== 3 || parts.some((p) => !/^[A-Za-z0-9_-]*$/.test(p))) return undefined
      const header = JSON.parse(Buffer.from(parts[0]!, "base64url").toString("utf8"))
      if (header?.alg !== "RS256" || header.typ !== "at+jwt" || header.crit !== undefined) return undefined
      const key = typeof header.kid === "string" ? publicKeys.get(header.kid) : undefined
      if (key === undefined) return undefined
      if (!cryptoVerify("sha256", Buffer.from(`${parts[0]}.${parts[1]}`), key, Buffer.from(parts[2]!, "base64url"))) return undefined
      const payload = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8"))
      if (typeof payload !== "object" || payload === null) return undefined
      for (const claim of ["iss", "sub", "client_id", "scope", "jti", "dev", "grnt"]) if (typeof payload[claim] !== "string") return undefined
      if (typeof payload.aud !== "string" || typeof payload.exp !== "number" || typeof payload.iat !== "number") return undefined
      return payload as AccessTokenClaims
    }
    const verify = (token: string, nowSeconds: number) =>
      Effect.sync(() => {
        let claims = verified.get(token)
        if (claims === undefined) {
          try {
            claims = check(token)
          } catch {
            claims = undefined
          }
          if (claims === undefined) return undefined
          if (verified.size >= 10_000) verified.delete(verified.keys().next().value!)
          verified.set(token, claims)
        }
        // 60 s leeway, as for grant tokens
        if (claims.exp <= nowSeconds - 60) return undefined
        return claims
      })
    return { sign, verify }
  })

export class AccessTokens extends Context.Tag("agent-auth/AccessTokens")<AccessTokens, AccessTokenSigner>() {}

export const AccessTokensLive = Layer.effect(AccessTokens, Effect.flatMap(Keys, makeAccessTokenSigner))
