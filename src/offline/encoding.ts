/** Base64url and the two Ed25519 key forms a consent bundle carries (PKCS#8, SPKI), without platform APIs. */

export const b64urlToBytes = (s: string): Uint8Array<ArrayBuffer> => {
  const base64 = s.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(s.length / 4) * 4, "=")
  const binary = atob(base64)
  const out = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i)
  return out
}

const pemBody = (pem: string): Uint8Array =>
  b64urlToBytes(pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "").replace(/\+/g, "-").replace(/\//g, "_"))

/** The 32-byte Ed25519 seed at the end of a PKCS#8 PEM (RFC 8410). */
export const ed25519SeedFromPkcs8 = (pem: string): Uint8Array => {
  const der = pemBody(pem)
  if (der.length !== 48) throw new Error("not an Ed25519 PKCS#8 private key")
  return der.slice(16)
}

/** The raw 32-byte Ed25519 public key at the end of an SPKI PEM. */
export const ed25519PublicFromSpki = (pem: string): Uint8Array => {
  const der = pemBody(pem)
  if (der.length !== 44) throw new Error("not an Ed25519 SPKI public key")
  return der.slice(12)
}
