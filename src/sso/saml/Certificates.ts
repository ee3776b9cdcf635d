/**
 * IdP signing certificates (decisions §12): a connection holds one or more (rollover), each must be
 * a parseable X.509 certificate with an RSA or EC key, and one outside its validity period is
 * refused: at import (create, patch, test) and again when a Response is checked, since a
 * certificate valid at import expires later.
 */
import { X509Certificate } from "node:crypto"

export const MAX_CERTIFICATES = 10
export const MAX_CERTIFICATE_CHARS = 16 * 1024

export interface CertificateInfo {
  readonly pem: string
  readonly subject: string
  readonly notBefore: Date
  readonly notAfter: Date
  readonly fingerprintSha256: string
}

/** PEM or the bare base64 of metadata's `<X509Certificate>` → one normalized PEM block. */
export const toPem = (text: string): string => {
  const body = text
    .replace(/-----BEGIN CERTIFICATE-----/, "")
    .replace(/-----END CERTIFICATE-----/, "")
    .replace(/\s+/g, "")
  const lines = body.match(/.{1,64}/g) ?? []
  return `-----BEGIN CERTIFICATE-----\n${lines.join("\n")}\n-----END CERTIFICATE-----\n`
}

/** The certificate's facts, or why it is not one. */
export const inspectCertificate = (text: string): { readonly ok: true; readonly info: CertificateInfo } | { readonly ok: false; readonly reason: string } => {
  if (typeof text !== "string" || text.trim() === "") return { ok: false, reason: "is empty" }
  // before any regex or decoder runs: a real one is 1-3 KiB; 900 KiB of junk took ~100 ms to refuse
  if (text.length > MAX_CERTIFICATE_CHARS) return { ok: false, reason: `is longer than ${MAX_CERTIFICATE_CHARS} characters (not a certificate)` }
  if ((text.match(/-----BEGIN /g) ?? []).length > 1) return { ok: false, reason: "holds more than one PEM block (give each certificate separately)" }
  if (/-----BEGIN (?!CERTIFICATE-----)/.test(text)) return { ok: false, reason: "is not a certificate (a PEM CERTIFICATE block is expected)" }
  const pem = toPem(text)
  let cert: X509Certificate
  try {
    cert = new X509Certificate(pem)
  } catch {
    return { ok: false, reason: "is not a valid X.509 certificate" }
  }
  const type = cert.publicKey.asymmetricKeyType
  if (type !== "rsa" && type !== "ec") return { ok: false, reason: `has a ${type} key (RSA or EC expected)` }
  return {
    ok: true,
    info: {
      pem,
      subject: cert.subject.replace(/\n/g, ", "),
      notBefore: new Date(cert.validFrom),
      notAfter: new Date(cert.validTo),
      fingerprintSha256: cert.fingerprint256
    }
  }
}

/** Why a certificate cannot be used at `nowMs`, if it cannot. */
export const validityProblem = (info: CertificateInfo, nowMs: number): string | undefined => {
  if (nowMs >= info.notAfter.getTime()) return `expired on ${info.notAfter.toISOString()}`
  if (nowMs < info.notBefore.getTime()) return `is not valid before ${info.notBefore.toISOString()}`
  return undefined
}

export type CertificatesCheck =
  | { readonly ok: true; readonly certificates: ReadonlyArray<CertificateInfo> }
  | { readonly ok: false; readonly problems: ReadonlyArray<{ readonly path: string; readonly message: string }> }

/**
 * The certificates of a connection being configured: at least one, at most ten, each parseable and
 * valid now, no duplicates. `path` names the field in the refusal's details.
 */
export const checkCertificates = (texts: ReadonlyArray<string>, nowMs: number, path = "idpCertificates"): CertificatesCheck => {
  if (texts.length === 0) return { ok: false, problems: [{ path, message: "At least one IdP signing certificate is required" }] }
  if (texts.length > MAX_CERTIFICATES) {
    return { ok: false, problems: [{ path, message: `At most ${MAX_CERTIFICATES} IdP signing certificates are allowed` }] }
  }
  const problems: Array<{ path: string; message: string }> = []
  const certificates: Array<CertificateInfo> = []
  const seen = new Set<string>()
  texts.forEach((text, i) => {
    const result = inspectCertificate(text)
    if (!result.ok) return void problems.push({ path: `${path}[${i}]`, message: `The certificate ${result.reason}` })
    const problem = validityProblem(result.info, nowMs)
    if (problem !== undefined) return void problems.push({ path: `${path}[${i}]`, message: `The certificate ${problem} (${result.info.subject})` })
    if (seen.has(result.info.fingerprintSha256)) return
    seen.add(result.info.fingerprintSha256)
    certificates.push(result.info)
  })
  return problems.length > 0 ? { ok: false, problems } : { ok: true, certificates }
}

/** The stored certificates that may verify a signature at `nowMs` (an expired one never does). */
export const usableCertificates = (pems: ReadonlyArray<string>, nowMs: number): ReadonlyArray<string> =>
  pems.flatMap((pem) => {
    const result = inspectCertificate(pem)
    return result.ok && validityProblem(result.info, nowMs) === undefined ? [result.info.pem] : []
  })
