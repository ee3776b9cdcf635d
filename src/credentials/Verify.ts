/**
 * Verification (decisions §18), fail closed: a credential is valid only when its format is one we
 * issue, its issuer is our DID, its signature checks with one of our keys (current or previous),
 * it is within its validity, and its status lists were read and say neither revoked nor suspended.
 * An unknown issuer answers UNKNOWN_ISSUER; a status list we cannot read answers STATUS_UNAVAILABLE.
 *
 * Accepted: our `vc+jwt` (EdDSA), our SD-JWT VCs (`dc+sd-jwt`, and the older `vc+sd-jwt` type), and
 * the published implementation's RS256 JWTs with a VCDM 1.1 `vc` claim (checked with the RSA keys).
 */
import { Effect } from "effect"
import * as jose from "jose"
import { createHash } from "node:crypto"
import { digestOf } from "./Formats.ts"
import type { VcKeyService } from "./Keys.ts"
import type { StatusLists } from "./Lists.ts"

/** iat of a key-binding JWT must be this close to now */
export const KB_WINDOW_SECONDS = 300
const LEEWAY_SECONDS = 60

export interface Checks {
  format: string | null
  signature: boolean
  issuer: boolean
  validity: boolean
  status: boolean
  disclosures?: boolean
  keyBinding?: boolean
}

export interface Outcome {
  readonly valid: boolean
  readonly error: string | null
  readonly payload: Record<string, unknown> | null
  readonly credentialId: string | null
  readonly disclosedClaims?: Record<string, unknown>
  readonly revoked: boolean
  readonly suspended: boolean
  readonly expired: boolean
  readonly checks: Checks
}

export interface VerifyDeps {
  readonly keys: VcKeyService
  readonly rsaJwks: { readonly keys: ReadonlyArray<Record<string, unknown>> }
  readonly lists: StatusLists
  readonly baseUrl: string
}

export interface PresentationOptions {
  /** a key-binding JWT is required (POST /v1/credentials/present) */
  readonly requireKeyBinding: boolean
  readonly nonce?: string
  readonly audience?: string
}

class Refused extends Error {
  constructor(readonly code: string, message?: string) {
    super(message ?? code)
  }
}

const decodeJson = (segment: string): Record<string, unknown> => {
  if (!/^[A-Za-z0-9_-]+$/.test(segment)) throw new Refused("MALFORMED")
  let value: unknown
  try {
    value = JSON.parse(Buffer.from(segment, "base64url").toString("utf8"))
  } catch {
    throw new Refused("MALFORMED")
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Refused("MALFORMED")
  return value as Record<string, unknown>
}

export const makeVerifier = (deps: VerifyDeps) => {
  const { keys } = deps
  const rsaKeySet = jose.createLocalJWKSet({ keys: deps.rsaJwks.keys as Array<jose.JWK> })
  const listPattern = new RegExp(`^${deps.baseUrl.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/v1/credentials/status/(vcsl_[0-9A-Z]{26})$`)

  /** a list that cannot be read (the database away) is a status we do not know: fail closed */
  const readBit = (run: <A>(e: Effect.Effect<A>) => Promise<A>, listId: string, index: number) =>
    run(deps.lists.bit(listId, index)).catch(() => {
      throw new Refused("STATUS_UNAVAILABLE")
    })

  const issuerOf = (payload: Record<string, unknown>): unknown => {
    const issuer = payload.issuer ?? payload.iss
    return typeof issuer === "object" && issuer !== null ? (issuer as { id?: unknown }).id : issuer
  }

  /** the EdDSA signature with the key its header names (current or previous); the issuer first */
  const checkEd25519 = async (jws: string, header: jose.ProtectedHeaderParameters, payload: Record<string, unknown>, checks: Checks) => {
    if (issuerOf(payload) !== keys.did) throw new Refused("UNKNOWN_ISSUER")
    checks.issuer = true
    const kid = typeof header.kid === "string" && header.kid.startsWith(`${keys.did}#`) ? header.kid.slice(keys.did.length + 1) : undefined
    const key = kid === undefined ? undefined : keys.byKid.get(kid)
    if (key === undefined || header.alg !== "EdDSA" || header.crit !== undefined) throw new Refused("INVALID_SIGNATURE")
    await jose.compactVerify(jws, key.key, { algorithms: ["EdDSA"] }).catch(() => {
      throw new Refused("INVALID_SIGNATURE")
    })
    checks.signature = true
  }

  const checkValidity = (notBefore: number | undefined, notAfter: number | undefined, now: number, checks: Checks) => {
    if (notAfter === undefined || !Number.isFinite(notAfter)) throw new Refused("MALFORMED")
    if (notAfter <= now - LEEWAY_SECONDS) return "EXPIRED"
    if (notBefore !== undefined && notBefore > now + LEEWAY_SECONDS) throw new Refused("NOT_YET_VALID")
    checks.validity = true
    return undefined
  }

  const seconds = (value: unknown) => typeof value === "string" && !Number.isNaN(Date.parse(value)) ? Date.parse(value) / 1000 : typeof value === "number" ? value : undefined

  /** Bitstring entries: every list read, or STATUS_UNAVAILABLE */
  const checkEntries = async (entries: unknown, run: <A>(e: Effect.Effect<A>) => Promise<A>) => {
    const list = Array.isArray(entries) ? entries : entries === undefined ? [] : [entries]
    if (list.length === 0) throw new Refused("STATUS_UNAVAILABLE", "the credential names no status list")
    let revoked = false, suspended = false
    for (const entry of list) {
      const e = entry as Record<string, unknown>
      const match = typeof e?.statusListCredential === "string" ? listPattern.exec(e.statusListCredential) : null
      const index = typeof e?.statusListIndex === "string" && /^\d{1,7}$/.test(e.statusListIndex) ? Number(e.statusListIndex) : undefined
      if (match === null || index === undefined) throw new Refused("STATUS_UNAVAILABLE", "status list not ours or not readable")
      const bit = await readBit(run, match[1]!, index)
      if (bit === undefined) throw new Refused("STATUS_UNAVAILABLE", "status list not found")
      const purpose = e.statusPurpose === "revocation" || e.statusPurpose === "suspension" ? e.statusPurpose : bit.purpose
      if (purpose !== bit.purpose) throw new Refused("STATUS_UNAVAILABLE", "status purpose does not match the list")
      if (bit.set && purpose === "revocation") revoked = true
      if (bit.set && purpose === "suspension") suspended = true
    }
    return { revoked, suspended }
  }

  const sdJwt = async (text: string, now: number, options: PresentationOptions, checks: Checks, run: <A>(e: Effect.Effect<A>) => Promise<A>) => {
    const parts = text.split("~")
    const jws = parts[0]!
    const kb = parts[parts.length - 1]!
    const disclosures = parts.slice(1, -1)
    const segments = jws.split(".")
    if (segments.length !== 3) throw new Refused("MALFORMED")
    const header = decodeJson(segments[0]!) as jose.ProtectedHeaderParameters
    if (header.typ !== "dc+sd-jwt" && header.typ !== "vc+sd-jwt") throw new Refused("UNSUPPORTED_FORMAT")
    checks.format = String(header.typ)
    const payload = decodeJson(segments[1]!)
    await checkEd25519(jws, header, payload, checks)
    // disclosures: each once, each listed by the issuer, none overriding a signed claim
    const listed = Array.isArray(payload._sd) ? payload._sd.filter((d): d is string => typeof d === "string") : []
    if (payload._sd_alg !== undefined && payload._sd_alg !== "sha-256") throw new Refused("MALFORMED")
    if (new Set(listed).size !== listed.length) throw new Refused("DUPLICATE_DISCLOSURE")
    const seen = new Set<string>()
    const disclosed: Record<string, unknown> = {}
    for (const disclosure of disclosures) {
      if (disclosure === "") throw new Refused("MALFORMED")
      const digest = digestOf(disclosure)
      if (seen.has(digest)) throw new Refused("DUPLICATE_DISCLOSURE")
      seen.add(digest)
      if (!listed.includes(digest)) throw new Refused("INVALID_DISCLOSURE")
      let value: unknown
      try {
        value = JSON.parse(Buffer.from(disclosure, "base64url").toString("utf8"))
      } catch {
        throw new Refused("INVALID_DISCLOSURE")
      }
      if (!Array.isArray(value) || value.length !== 3 || typeof value[0] !== "string" || typeof value[1] !== "string") throw new Refused("INVALID_DISCLOSURE")
      const name = value[1]
      if (name === "_sd" || name === "..." || name === "__proto__") throw new Refused("INVALID_DISCLOSURE")
      if (Object.hasOwn(payload, name) || Object.hasOwn(disclosed, name)) throw new Refused("DUPLICATE_DISCLOSURE")
      disclosed[name] = value[2]
    }
    checks.disclosures = true
    // key binding: against cnf.jwk, over exactly what was presented before it
    const cnf = (payload.cnf as { jwk?: jose.JWK } | undefined)?.jwk
    if (kb !== "") {
      if (cnf === undefined) throw new Refused("INVALID_KEY_BINDING", "the credential has no holder key")
      const kbHeader = decodeJson(kb.split(".")[0] ?? "") as jose.ProtectedHeaderParameters
      if (kbHeader.typ !== "kb+jwt" || (kbHeader.alg !== "EdDSA" && kbHeader.alg !== "ES256")) throw new Refused("INVALID_KEY_BINDING")
      const key = await jose.importJWK(cnf, kbHeader.alg).catch(() => {
        throw new Refused("INVALID_KEY_BINDING")
      })
      const { payload: kbPayload } = await jose.compactVerify(kb, key as jose.CryptoKey, { algorithms: [kbHeader.alg] }).then(
        (r) => ({ payload: JSON.parse(new TextDecoder().decode(r.payload)) as Record<string, unknown> }),
        () => {
          throw new Refused("INVALID_KEY_BINDING")
        }
      )
      const sdHash = createHash("sha256").update(text.slice(0, text.length - kb.length), "ascii").digest("base64url")
      if (kbPayload.sd_hash !== sdHash) throw new Refused("INVALID_KEY_BINDING", "sd_hash does not match the presentation")
      if (typeof kbPayload.iat !== "number" || Math.abs(kbPayload.iat - now) > KB_WINDOW_SECONDS) throw new Refused("INVALID_KEY_BINDING", "iat outside 5 minutes")
      // aud and nonce are required claims of a key-binding JWT (RFC 9901 §4.3)
      if (typeof kbPayload.nonce !== "string" || (typeof kbPayload.aud !== "string" && !Array.isArray(kbPayload.aud))) {
        throw new Refused("INVALID_KEY_BINDING", "aud and nonce are required")
      }
      const aud = kbPayload.aud
      if (options.audience !== undefined && !(aud === options.audience || (Array.isArray(aud) && aud.includes(options.audience)))) {
        throw new Refused("INVALID_KEY_BINDING", "aud does not match")
      }
      if (options.nonce !== undefined && kbPayload.nonce !== options.nonce) throw new Refused("INVALID_KEY_BINDING", "nonce does not match")
      checks.keyBinding = true
    } else if (options.requireKeyBinding) {
      throw new Refused("KEY_BINDING_REQUIRED", cnf === undefined ? "the credential has no holder key" : "no key-binding JWT")
    }
    const expired = checkValidity(seconds(payload.nbf), seconds(payload.exp), now, checks)
    // status: the IETF reference points at our revocation list; its partner carries suspension
    const ref = (payload.status as { status_list?: { idx?: unknown; uri?: unknown } } | undefined)?.status_list
    const match = typeof ref?.uri === "string" ? listPattern.exec(ref.uri) : null
    if (match === null || typeof ref?.idx !== "number" || !Number.isInteger(ref.idx)) throw new Refused("STATUS_UNAVAILABLE")
    const bit = await readBit(run, match[1]!, ref.idx)
    if (bit === undefined || bit.partnerSet === undefined) throw new Refused("STATUS_UNAVAILABLE")
    checks.status = true
    const status = bit.purpose === "revocation" ? { revoked: bit.set, suspended: bit.partnerSet } : { revoked: bit.partnerSet, suspended: bit.set }
    return { payload: { ...payload, ...disclosed }, disclosed, expired, ...status }
  }

  const jwt = async (text: string, now: number, checks: Checks, run: <A>(e: Effect.Effect<A>) => Promise<A>) => {
    const segments = text.split(".")
    if (segments.length !== 3) throw new Refused("MALFORMED")
    const header = decodeJson(segments[0]!) as jose.ProtectedHeaderParameters
    const payload = decodeJson(segments[1]!)
    if (header.typ === "vc+jwt") {
      checks.format = "vc+jwt"
      await checkEd25519(text, header, payload, checks)
      const expired = checkValidity(seconds(payload.validFrom ?? payload.nbf), seconds(payload.validUntil ?? payload.exp), now, checks)
      const status = await checkEntries(payload.credentialStatus, run)
      checks.status = true
      return { payload, expired, ...status }
    }
    if (header.alg === "RS256" && typeof payload.vc === "object" && payload.vc !== null) {
      // the published implementation's VC-JWT: VCDM 1.1 `vc` claim, RS256 with the grant-token keys
      checks.format = "jwt-vc-1.1"
      if (payload.iss !== keys.did) throw new Refused("UNKNOWN_ISSUER")
      checks.issuer = true
      await jose.compactVerify(text, rsaKeySet, { algorithms: ["RS256"] }).catch(() => {
        throw new Refused("INVALID_SIGNATURE")
      })
      checks.signature = true
      const expired = checkValidity(seconds(payload.nbf), seconds(payload.exp), now, checks)
      const status = await checkEntries((payload.vc as Record<string, unknown>).credentialStatus, run)
      checks.status = true
      return { payload, expired, ...status }
    }
    throw new Refused("UNSUPPORTED_FORMAT")
  }

  /** never fails: every problem is an outcome with `valid: false` and its code */
  const verify = (text: string, nowSeconds: number, options: PresentationOptions, run: <A>(e: Effect.Effect<A>) => Promise<A>) =>
    Effect.promise(async (): Promise<Outcome> => {
      const checks: Checks = { format: null, signature: false, issuer: false, validity: false, status: false }
      try {
        const result = text.includes("~") ? await sdJwt(text, nowSeconds, options, checks, run) : await jwt(text, nowSeconds, checks, run)
        const error = result.expired ?? (result.revoked ? "REVOKED" : result.suspended ? "SUSPENDED" : null)
        return {
          valid: error === null,
          error,
          payload: result.payload,
          credentialId: null,
          ...("disclosed" in result ? { disclosedClaims: result.disclosed as Record<string, unknown> } : {}),
          revoked: result.revoked,
          suspended: result.suspended,
          expired: result.expired !== undefined,
          checks
        }
      } catch (e) {
        return {
          valid: false,
          error: e instanceof Refused ? e.code : "MALFORMED",
          payload: null,
          credentialId: null,
          revoked: false,
          suspended: false,
          expired: false,
          checks
        }
      }
    })

  return { verify }
}
