/**
 * What a credential says (decisions §18), pure: the VCDM 2.0 claims of a `vc+jwt`, the claims and
 * disclosures of a `dc+sd-jwt`, the status list credentials, and the checks of a holder key.
 */
import { createHash, createPublicKey, randomBytes } from "node:crypto"
import { LIST_TTL_SECONDS } from "./StatusList.ts"

export const VC_CONTEXT = "https://www.w3.org/ns/credentials/v2"

/** `credentialFormat` of POST /v1/token and /v1/grants/delegate */
export type CredentialFormat = "jwt" | "vc-jwt" | "both" | "sd-jwt"
const FORMATS: ReadonlyArray<string> = ["jwt", "vc-jwt", "both", "sd-jwt"]

/** undefined: accepted; else the message of the 400 */
export const checkFormat = (format: string): string | undefined =>
  FORMATS.includes(format)
    ? undefined
    : format === "agent-passport"
    ? "credentialFormat agent-passport is not issued by this service (use vc-jwt or sd-jwt)"
    : "credentialFormat must be one of jwt, vc-jwt, both, sd-jwt"

export interface SubjectGrant {
  readonly id: string
  readonly agentDid: string
  readonly agentId: string
  readonly principalId: string
  readonly developerId: string
  readonly scopes: ReadonlyArray<string>
  readonly delegationDepth: number
  readonly expiresAt: Date
}

export interface StatusPlacement {
  readonly revocationUrl: string
  readonly suspensionUrl: string
  readonly index: number
}

export const statusListUrl = (baseUrl: string, listId: string) => `${baseUrl}/v1/credentials/status/${listId}`

export const vcJwtClaims = (input: {
  readonly issuer: string
  readonly baseUrl: string
  readonly uuid: string
  readonly grant: SubjectGrant
  readonly status: StatusPlacement
  readonly issuedAtMs: number
  readonly fidoVerifiedAt?: Date | null
}) => {
  const { grant, status } = input
  const entry = (purpose: "revocation" | "suspension", url: string) => ({
    id: `${url}#${status.index}`,
    type: "BitstringStatusListEntry",
    statusPurpose: purpose,
    statusListIndex: String(status.index),
    statusListCredential: url
  })
  const exp = Math.floor(grant.expiresAt.getTime() / 1000)
  return {
    "@context": [VC_CONTEXT, `${input.baseUrl}/ns/agent-auth/v1`],
    id: `urn:uuid:${input.uuid}`,
    type: ["VerifiableCredential", "AgentGrantCredential"],
    issuer: input.issuer,
    validFrom: new Date(Math.floor(input.issuedAtMs / 1000) * 1000).toISOString(),
    validUntil: new Date(exp * 1000).toISOString(),
    credentialSubject: {
      id: grant.agentDid,
      principalId: grant.principalId,
      grantId: grant.id,
      scopes: [...grant.scopes],
      delegationDepth: grant.delegationDepth
    },
    credentialStatus: [entry("revocation", status.revocationUrl), entry("suspension", status.suspensionUrl)],
    ...(input.fidoVerifiedAt
      ? { evidence: [{ type: ["FidoEvidence"], verifiedAt: input.fidoVerifiedAt.toISOString() }] }
      : {}),
    // the JWT registered claims agree with the credential (VC-JOSE-COSE allows them)
    iss: input.issuer,
    jti: `urn:uuid:${input.uuid}`,
    sub: grant.agentDid,
    iat: Math.floor(input.issuedAtMs / 1000),
    nbf: Math.floor(input.issuedAtMs / 1000),
    exp
  }
}

export const digestOf = (disclosure: string) => createHash("sha256").update(disclosure, "ascii").digest("base64url")

const disclose = (name: string, value: unknown) =>
  Buffer.from(JSON.stringify([randomBytes(16).toString("base64url"), name, value]), "utf8").toString("base64url")

/** SD-JWT VC claims and disclosures: principalId, scopes and delegationDepth selectively disclosable */
export const sdJwtParts = (input: {
  readonly issuer: string
  readonly baseUrl: string
  readonly uuid: string
  readonly grant: SubjectGrant
  readonly status: StatusPlacement
  readonly issuedAtMs: number
  readonly holderJwk?: Record<string, unknown>
}) => {
  const { grant } = input
  const disclosures = [
    disclose("principalId", grant.principalId),
    disclose("scopes", [...grant.scopes]),
    disclose("delegationDepth", grant.delegationDepth)
  ]
  const claims = {
    iss: input.issuer,
    iat: Math.floor(input.issuedAtMs / 1000),
    exp: Math.floor(grant.expiresAt.getTime() / 1000),
    vct: `${input.baseUrl}/vct/agent-grant`,
    jti: `urn:uuid:${input.uuid}`,
    sub: grant.agentDid,
    grantId: grant.id,
    // sorted, so the order of the digests says nothing about the claims
    _sd: disclosures.map(digestOf).sort(),
    _sd_alg: "sha-256",
    ...(input.holderJwk ? { cnf: { jwk: input.holderJwk } } : {}),
    status: { status_list: { idx: input.status.index, uri: input.status.revocationUrl } }
  }
  return { claims, disclosures }
}

/** the W3C list credential's claims (signed as a vc+jwt) */
export const statusListClaims = (input: {
  readonly issuer: string
  readonly url: string
  readonly purpose: "revocation" | "suspension"
  readonly encodedList: string
  readonly updatedAt: Date
  readonly nowSeconds: number
}) => ({
  "@context": [VC_CONTEXT],
  id: input.url,
  type: ["VerifiableCredential", "BitstringStatusListCredential"],
  issuer: input.issuer,
  validFrom: new Date(Math.floor(input.updatedAt.getTime() / 1000) * 1000).toISOString(),
  credentialSubject: {
    id: `${input.url}#list`,
    type: "BitstringStatusList",
    statusPurpose: input.purpose,
    encodedList: input.encodedList,
    ttl: LIST_TTL_SECONDS * 1000
  },
  iss: input.issuer,
  iat: input.nowSeconds
})

/** the IETF token status list claims (signed as a statuslist+jwt) */
export const tokenStatusListClaims = (input: { readonly issuer: string; readonly url: string; readonly lst: string; readonly nowSeconds: number }) => ({
  iss: input.issuer,
  sub: input.url,
  iat: input.nowSeconds,
  ttl: LIST_TTL_SECONDS,
  status_list: { bits: 2, lst: input.lst }
})

const BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

const base58Decode = (text: string): Uint8Array | undefined => {
  let n = 0n
  for (const ch of text) {
    const v = BASE58.indexOf(ch)
    if (v < 0) return undefined
    n = n * 58n + BigInt(v)
  }
  const bytes: Array<number> = []
  while (n > 0n) {
    bytes.unshift(Number(n % 256n))
    n /= 256n
  }
  for (const ch of text) {
    if (ch !== "1") break
    bytes.unshift(0)
  }
  return Uint8Array.from(bytes)
}

/**
 * A holder key: a public JWK (Ed25519 or P-256; never one with private parts) or an Ed25519
 * `did:key`. Answers the public JWK to put in `cnf`, or the reason it is refused.
 */
export const holderJwkOf = (holderKey: unknown): { jwk: Record<string, string> } | { error: string } => {
  if (typeof holderKey === "string") {
    const match = /^did:key:z([1-9A-HJ-NP-Za-km-z]{40,60})$/.exec(holderKey)
    const bytes = match ? base58Decode(match[1]!) : undefined
    if (bytes === undefined || bytes.length !== 34 || bytes[0] !== 0xed || bytes[1] !== 0x01) {
      return { error: "holderKey must be a public JWK or an Ed25519 did:key" }
    }
    return { jwk: { kty: "OKP", crv: "Ed25519", x: Buffer.from(bytes.subarray(2)).toString("base64url") } }
  }
  if (typeof holderKey !== "object" || holderKey === null || Array.isArray(holderKey)) {
    return { error: "holderKey must be a public JWK or an Ed25519 did:key" }
  }
  const k = holderKey as Record<string, unknown>
  if ("d" in k || "p" in k || "k" in k) return { error: "holderKey must be a public key (it has private key material)" }
  let jwk: Record<string, string>
  if (k.kty === "OKP" && k.crv === "Ed25519" && typeof k.x === "string") jwk = { kty: "OKP", crv: "Ed25519", x: k.x }
  else if (k.kty === "EC" && k.crv === "P-256" && typeof k.x === "string" && typeof k.y === "string") {
    jwk = { kty: "EC", crv: "P-256", x: k.x, y: k.y }
  } else return { error: "holderKey must be an Ed25519 (OKP) or P-256 (EC) public JWK" }
  try {
    createPublicKey({ key: jwk, format: "jwk" })
  } catch {
    return { error: "holderKey is not a valid public key" }
  }
  if (jwk.kty === "OKP" && Buffer.from(jwk.x!, "base64url").length !== 32) return { error: "holderKey is not a valid public key" }
  return { jwk }
}
