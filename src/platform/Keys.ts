/**
 * Keys: the RS256 signing key, the published JWKS and grant-token signing and verification.
 *
 * The key comes from RSA_PRIVATE_KEY, or is generated when AUTO_GENERATE_KEYS=true (development; with
 * an embedded database directory it is kept there, see `dataDirSigningKey`).
 * `kid` is the RFC 7638 thumbprint. Previous public keys (RSA_PREVIOUS_PUBLIC_KEYS) stay in the
 * JWKS and keep verifying, so a rotation never breaks tokens already issued.
 */
import { Context, Data, Effect, Layer } from "effect"
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, verify as cryptoVerify } from "node:crypto"
import * as jose from "jose"
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
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
const CLOCK_TOLERANCE_SECONDS = 60

const decodeSegment = (segment: string): Buffer => {
  // strict base64url: the alphabet only, no padding
  if (!/^[A-Za-z0-9_-]*$/.test(segment)) throw new Error("bad base64url")
  return Buffer.from(segment, "base64url")
}

const parseSegment = (segment: string): Record<string, any> => {
  const value = JSON.parse(decodeSegment(segment).toString("utf8"))
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error("not a JSON object")
  return value
}

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

  // Verification runs synchronously through node:crypto (an RS256 check is tens of microseconds;
  // the promise machinery around WebCrypto cost more than the check itself). Tokens are checked
  // again and again by the services that hold them, so the claims of a token whose signature
  // verified are kept by its exact text; the time-dependent checks run on every call.
  const publicKeys = new Map<string, KeyObject>()
  for (const jwk of keys) publicKeys.set(jwk.kid, createPublicKey({ key: { kty: jwk.kty, n: jwk.n, e: jwk.e }, format: "jwk" }))
  const verified = new Map<string, GrantTokenClaims>()
  const VERIFIED_CACHE_SIZE = 10_000

  const checkSignatureAndClaims = (token: string): GrantTokenClaims => {
    const parts = token.split(".")
    if (parts.length !== 3) throw new Error("not a compact JWS")
    const [headerPart, payloadPart, signaturePart] = parts as [string, string, string]
    const header = parseSegment(headerPart)
    if (header.alg !== "RS256") throw new Error("alg not allowed")
    // no extensions are understood, so a token that requires one is refused (RFC 7515 §4.1.11)
    if (header.crit !== undefined || header.b64 !== undefined) throw new Error("unsupported header parameter")
    const kid = header.kid === undefined ? current.kid : header.kid
    const key = typeof kid === "string" ? publicKeys.get(kid) : undefined
    if (key === undefined) throw new Error("unknown kid")
    const signature = decodeSegment(signaturePart)
    if (!cryptoVerify("sha256", Buffer.from(`${headerPart}.${payloadPart}`), key, signature)) throw new Error("bad signature")
    const payload = parseSegment(payloadPart)
    if (payload.iss !== options.issuer) throw new Error("unexpected iss")
    if (typeof payload.exp !== "number" || !Number.isFinite(payload.exp)) throw new Error("missing exp")
    if (payload.iat !== undefined && typeof payload.iat !== "number") throw new Error("bad iat")
    if (payload.nbf !== undefined && typeof payload.nbf !== "number") throw new Error("bad nbf")
    for (const claim of REQUIRED_CLAIMS) {
      if (payload[claim] === undefined) throw new Error(`missing ${claim}`)
    }
    if (!Array.isArray(payload.scp) || payload.scp.some((s: unknown) => typeof s !== "string")) throw new Error("bad scp")
    return payload as unknown as GrantTokenClaims
  }

  const verify = (token: string, nowSeconds: number) =>
    Effect.suspend(() => {
      let claims = verified.get(token)
      if (claims === undefined) {
        try {
          claims = checkSignatureAndClaims(token)
        } catch (e) {
          return Effect.fail(new InvalidToken({ reason: e instanceof Error ? e.message : "invalid" }))
        }
        if (verified.size >= VERIFIED_CACHE_SIZE) verified.delete(verified.keys().next().value!)
        verified.set(token, claims)
      }
      // 60 s leeway either side, as for any clock-skewed issuer
      if (claims.exp <= nowSeconds - CLOCK_TOLERANCE_SECONDS) return Effect.fail(new InvalidToken({ reason: "expired" }))
      const nbf = (claims as { nbf?: number }).nbf
      if (nbf !== undefined && nbf > nowSeconds + CLOCK_TOLERANCE_SECONDS) return Effect.fail(new InvalidToken({ reason: "not yet valid" }))
      return Effect.succeed(claims)
    })

  return {
    kid: current.kid,
    jwks: { keys },
    sign,
    verify,
    privateKeyPem: () => options.privateKeyPem
  }
}

/**
 * The generated signing key of the embedded mode, kept in `<dataDir>/signing.key` (0600) like the
 * vault key: created once, then reused, so tokens issued before a restart still verify.
 */
export const dataDirSigningKey = (dataDir: string): string => {
  const path = join(dataDir, "signing.key")
  if (existsSync(path)) return readFileSync(path, "utf8")
  mkdirSync(dataDir, { recursive: true })
  const pem = generateRsaPrivateKeyPem()
  try {
    writeFileSync(path, pem, { mode: 0o600, flag: "wx" })
  } catch (e) {
    // another process created it first: use theirs
    if ((e as { code?: string }).code === "EEXIST") return readFileSync(path, "utf8")
    throw e
  }
  chmodSync(path, 0o600)
  return pem
}

export const KeysLive = Layer.effect(
  Keys,
  Effect.gen(function*() {
    const config = yield* Config
    const privateKeyPem = config.rsaPrivateKey ??
      (config.dataDir !== undefined ? dataDirSigningKey(config.dataDir) : generateRsaPrivateKeyPem())
    return yield* Effect.promise(() =>
      makeKeys({ privateKeyPem, previousPublicKeys: config.rsaPreviousPublicKeys, issuer: config.jwtIssuer })
    )
  })
)
