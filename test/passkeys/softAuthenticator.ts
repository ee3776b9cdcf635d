/**
 * A software WebAuthn authenticator for tests: an ES256 (P-256) key from node:crypto, attestation
 * "none", authenticator data and client data built byte by byte, with a minimal CBOR encoder.
 */
import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from "node:crypto"

// --- minimal CBOR (RFC 8949): unsigned/negative integers, byte and text strings, arrays, maps ---
type Cbor = number | string | Uint8Array | Array<Cbor> | Map<Cbor, Cbor> | { [key: string]: Cbor }

const head = (major: number, n: number): Buffer => {
  if (n < 24) return Buffer.from([(major << 5) | n])
  if (n < 0x100) return Buffer.from([(major << 5) | 24, n])
  if (n < 0x10000) {
    const b = Buffer.alloc(3)
    b[0] = (major << 5) | 25
    b.writeUInt16BE(n, 1)
    return b
  }
  const b = Buffer.alloc(5)
  b[0] = (major << 5) | 26
  b.writeUInt32BE(n, 1)
  return b
}

export const cbor = (value: Cbor): Buffer => {
  if (typeof value === "number") return value >= 0 ? head(0, value) : head(1, -1 - value)
  if (typeof value === "string") {
    const bytes = Buffer.from(value, "utf8")
    return Buffer.concat([head(3, bytes.length), bytes])
  }
  if (value instanceof Uint8Array) return Buffer.concat([head(2, value.length), value])
  if (Array.isArray(value)) return Buffer.concat([head(4, value.length), ...value.map(cbor)])
  const entries = value instanceof Map ? [...value.entries()] : Object.entries(value)
  return Buffer.concat([head(5, entries.length), ...entries.flatMap(([k, v]) => [cbor(k), cbor(v)])])
}

const b64u = (bytes: Uint8Array | string) => Buffer.from(bytes).toString("base64url")
const sha256 = (data: Uint8Array | string) => createHash("sha256").update(data).digest()

export interface SoftAuthenticatorOptions {
  readonly rpId?: string
  readonly origin: string
}

export interface CeremonyOverrides {
  /** user verified flag (default true) */
  readonly uv?: boolean
  readonly origin?: string
  readonly rpId?: string
  readonly type?: string
  /** signature counter to report (default: previous + 1) */
  readonly counter?: number
  /** sign with another key (a forged assertion) */
  readonly signWith?: KeyObject
  /** backup eligible (BE) and backed up (BS) flags (default false) */
  readonly be?: boolean
  readonly bs?: boolean
  /** registration: "packed" self attestation, or full attestation with a certificate chain */
  readonly attestation?: "self" | { readonly x5c: ReadonlyArray<Uint8Array>; readonly key: KeyObject }
}

export class SoftAuthenticator {
  readonly credentialId = randomBytes(16)
  aaguid = Buffer.alloc(16) // zero AAGUID: "none" attestation
  readonly keys = generateKeyPairSync("ec", { namedCurve: "P-256" })
  counter = 0
  readonly rpId: string
  readonly origin: string

  constructor(options: SoftAuthenticatorOptions) {
    this.rpId = options.rpId ?? "localhost"
    this.origin = options.origin
  }

  get id() {
    return b64u(this.credentialId)
  }

  /** COSE_Key of the public key: EC2, ES256, P-256 */
  coseKey(): Buffer {
    const jwk = this.keys.publicKey.export({ format: "jwk" })
    return cbor(new Map<Cbor, Cbor>([
      [1, 2],
      [3, -7],
      [-1, 1],
      [-2, Buffer.from(jwk.x!, "base64url")],
      [-3, Buffer.from(jwk.y!, "base64url")]
    ]))
  }

  private authData(flags: number, counter: number, attested?: Buffer): Buffer {
    const c = Buffer.alloc(4)
    c.writeUInt32BE(counter, 0)
    return Buffer.concat([sha256(this.rpId), Buffer.from([flags]), c, ...(attested ? [attested] : [])])
  }

  private clientData(type: string, challenge: string, origin: string) {
    return Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }))
  }

  /** navigator.credentials.create(), as RegistrationResponseJSON */
  register(publicKey: { challenge: string; rp?: { id?: string } }, o: CeremonyOverrides = {}) {
    const flags = 0x01 | (o.uv === false ? 0 : 0x04) | 0x40 | (o.be ? 0x08 : 0) | (o.bs ? 0x10 : 0) // UP, UV, AT, BE, BS
    const idLen = Buffer.alloc(2)
    idLen.writeUInt16BE(this.credentialId.length, 0)
    const attested = Buffer.concat([this.aaguid, idLen, this.credentialId, this.coseKey()])
    const rpId = o.rpId ?? this.rpId
    const authData = Buffer.concat([sha256(rpId), this.authData(flags, o.counter ?? 0, attested).subarray(32)])
    const clientDataJSON = this.clientData(o.type ?? "webauthn.create", publicKey.challenge, o.origin ?? this.origin)
    const signed = Buffer.concat([authData, sha256(clientDataJSON)])
    const attestationObject = o.attestation === undefined
      ? cbor({ fmt: "none", attStmt: {}, authData })
      : o.attestation === "self"
      ? cbor({ fmt: "packed", attStmt: { alg: -7, sig: sign("sha256", signed, this.keys.privateKey) }, authData })
      : cbor({ fmt: "packed", attStmt: { alg: -7, sig: sign("sha256", signed, o.attestation.key), x5c: [...o.attestation.x5c] }, authData })
    return {
      id: this.id,
      rawId: this.id,
      type: "public-key",
      response: { clientDataJSON: b64u(clientDataJSON), attestationObject: b64u(attestationObject), transports: ["internal"] },
      authenticatorAttachment: "platform",
      clientExtensionResults: {}
    }
  }

  /** navigator.credentials.get(), as AuthenticationResponseJSON */
  assert(publicKey: { challenge: string }, o: CeremonyOverrides = {}) {
    const counter = o.counter ?? this.counter + 1
    this.counter = Math.max(this.counter, counter)
    const flags = 0x01 | (o.uv === false ? 0 : 0x04) | (o.be ? 0x08 : 0) | (o.bs ? 0x10 : 0)
    const rpId = o.rpId ?? this.rpId
    const authenticatorData = Buffer.concat([sha256(rpId), this.authData(flags, counter).subarray(32)])
    const clientDataJSON = this.clientData(o.type ?? "webauthn.get", publicKey.challenge, o.origin ?? this.origin)
    const signature = sign("sha256", Buffer.concat([authenticatorData, sha256(clientDataJSON)]), o.signWith ?? this.keys.privateKey)
    return {
      id: this.id,
      rawId: this.id,
      type: "public-key",
      response: {
        clientDataJSON: b64u(clientDataJSON),
        authenticatorData: b64u(authenticatorData),
        signature: b64u(signature)
      },
      authenticatorAttachment: "platform",
      clientExtensionResults: {}
    }
  }
}
