/**
 * Keys: the RS256 signing key, the published JWKS and grant-token signing and verification.
 *
 * The key comes from RSA_PRIVATE_KEY, or is generated when AUTO_GENERATE_KEYS=true (development).
 * `kid` is the RFC 7638 thumbprint. Previous public keys (RSA_PREVIOUS_PUBLIC_KEYS) stay in the
 * JWKS and keep verifying, so a rotation never breaks tokens already issued.
 */
import { Context, Data, Effect, Layer } from "effect"
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto"
import * as jose from "jose"
import { Config } from "../Config.ts"

export interface PublicJwk {
  readonly kty: string
  readonly kid: string
  readonly n: string
  readonly e: string
  readonly alg: "RS256"
  readonly use: "sig"
}

export interface GrantTokenClaims {
  readonly sub: string
  readonly agt: string
  readonly dev: string
  readonly scp: ReadonlyArray<string>
  readonly jti: string
  readonly grnt: string
  readonly iat: number
  readonly exp: number
  readonly iss: string
  readonly aud?: string | ReadonlyArray<string>
  readonly parentAgt?: string
  readonly parentGrnt?: string
  readonly delegationDepth?: number
  readonly bdg?: number
}

export type GrantTokenInput = Omit<GrantTokenClaims, "iss">

export class InvalidToken extends Data.TaggedError("InvalidToken")<{ readonly reason: string }> {}

export interface KeyService {
  readonly kid: string
  readonly jwks: { readonly keys: ReadonlyArray<PublicJwk> }
  readonly sign: (claims: GrantTokenInput) => Effect.Effect<string>
  /** signature (RS256 only), `iss`, `exp` (60 s leeway) and the required claims */
  readonly verify: (token: string, nowSeconds: number) => Effect.Effect<GrantTokenClaims, InvalidToken>
  readonly privateKeyPem: () => string
}

export class Keys extends Context.Tag("agent-auth/Keys")<Keys, KeyService>() {}

const toPublicJwk = async (key: KeyObject): Promise<PublicJwk> => {
  const jwk = key.export({ format: "jwk" }) as { kty: string; n: string; e: string }
  const kid = await jose.calculateJwkThumbprint({ kty: jwk.kty, n: jwk.n, e: jwk.e }, "sha256")
  return { kty: jwk.kty, kid, n: jwk.n, e: jwk.e, alg: "RS256", use: "sig" }
}

export const generateRsaPrivateKeyPem = (): string =>
  generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ type: "pkcs8", format: "pem" }).toString()

const REQUIRED_CLAIMS = ["sub", "dev", "scp", "jti", "grnt"] as const

export const makeKeys = async (options: {
  privateKeyPem: string
  previousPublicKeys: ReadonlyArray<string>
  issuer: string
}): Promise<KeyService> => {
  const privateKey = createPrivateKey(options.privateKeyPem)
  if (privateKey.asymmetricKeyType !== "rsa") throw new Error("RSA_PRIVATE_KEY must be an RSA key")
  const current = await toPublicJwk(createPublicKey(privateKey))
  const previous = await Promise.all(options.previousPublicKeys.map((pem) => toPublicJwk(createPublicKey(pem))))
  const keys = [current, ...previous.filter((k) => k.kid !== current.kid)]
  const signingKey = await jose.importPKCS8(privateKey.export({ type: "pkcs8", format: "pem" }).toString(), "RS256")
  const verificationKeys = new Map<string, CryptoKey | Uint8Array | jose.KeyObject>()
  for (const jwk of keys) verificationKeys.set(jwk.kid, await jose.importJWK({ ...jwk }, "RS256") as any)

  const sign = (claims: GrantTokenInput) =>
    Effect.promise(() => {
      const { iat, exp, ...rest } = claims
      return new jose.SignJWT({ ...rest, scp: [...claims.scp] } as jose.JWTPayload)
        .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: current.kid })
        .setIssuer(options.issuer)
        .setIssuedAt(iat)
        .setExpirationTime(exp)
        .sign(signingKey)
    })

  const verify = (token: string, nowSeconds: number) =>
    Effect.tryPromise({
      try: async () => {
        const { payload } = await jose.jwtVerify(
          token,
          async (header) => {
            if (header.alg !== "RS256") throw new Error("alg not allowed")
            const key = header.kid !== undefined ? verificationKeys.get(header.kid) : verificationKeys.get(current.kid)
            if (key === undefined) throw new Error("unknown kid")
            return key as any
          },
          { algorithms: ["RS256"], issuer: options.issuer, clockTolerance: 60, currentDate: new Date(nowSeconds * 1000) }
        )
        for (const claim of REQUIRED_CLAIMS) {
          if (payload[claim] === undefined) throw new Error(`missing ${claim}`)
        }
        if (!Array.isArray(payload.scp) || payload.scp.some((s) => typeof s !== "string")) throw new Error("bad scp")
        if (typeof payload.exp !== "number") throw new Error("missing exp")
        return payload as unknown as GrantTokenClaims
      },
      catch: (e) => new InvalidToken({ reason: e instanceof Error ? e.message : "invalid" })
    })

  return {
    kid: current.kid,
    jwks: { keys },
    sign,
    verify,
    privateKeyPem: () => options.privateKeyPem
  }
}

export const KeysLive = Layer.effect(
  Keys,
  Effect.gen(function*() {
    const config = yield* Config
    const privateKeyPem = config.rsaPrivateKey ?? generateRsaPrivateKeyPem()
    return yield* Effect.promise(() =>
      makeKeys({ privateKeyPem, previousPublicKeys: config.rsaPreviousPublicKeys, issuer: config.jwtIssuer })
    )
  })
)
