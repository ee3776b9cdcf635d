/**
 * The small named checks of the OAuth server (decisions §22), each a pure function: the issuer of a
 * developer, the canonical form of a resource identifier (RFC 8707), the scope-token grammar (RFC
 * 6749), OAuth redirect URIs (RFC 8252) and how they match, PKCE values (RFC 7636).
 */
import { createHash, timingSafeEqual } from "node:crypto"

/** decisions §22.1: one issuer per developer (defined with the token format, which names it in `iss`) */
export { issuerOf } from "../platform/AccessTokens.ts"

const LOOPBACK = new Set(["127.0.0.1", "[::1]", "localhost"])
export const isLoopbackHost = (host: string) => LOOPBACK.has(host)

/** the canonical identifier (lowercase scheme and host, no default port, no trailing slash but `/`), or why not */
export const canonicalResource = (text: string, production: boolean): { readonly ok: string } | { readonly problem: string } => {
  if (text.length > 2048) return { problem: "identifier may be at most 2,048 characters" }
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return { problem: "identifier must be an absolute URI" }
  }
  if (text.includes("#")) return { problem: "identifier must not have a fragment" }
  if (text.includes("?")) return { problem: "identifier must not have a query" }
  if (url.username !== "" || url.password !== "" || /^[a-z]+:\/\/[^/]*@/i.test(text)) return { problem: "identifier must not have userinfo" }
  if (url.protocol === "http:") {
    if (!isLoopbackHost(url.hostname) || production) return { problem: "identifier must use https (http only for a loopback host, outside production)" }
  } else if (url.protocol !== "https:") return { problem: "identifier must use https" }
  const path = url.pathname === "/" ? (text.replace(/^[a-z]+:\/\/[^/]*/i, "") === "" ? "" : "/") : url.pathname.replace(/\/+$/, "")
  return { ok: `${url.protocol}//${url.host}${path}` }
}

/** RFC 6749 scope-token: %x21 / %x23-5B / %x5D-7E, 1-128 characters here */
export const isScopeToken = (s: string) => s.length >= 1 && s.length <= 128 && /^[\x21\x23-\x5b\x5d-\x7e]+$/.test(s)

const DANGEROUS_SCHEMES = new Set(["javascript:", "data:", "file:", "vbscript:"])

/** decisions §22.3: why an OAuth redirect URI is refused, or undefined */
export const oauthRedirectProblem = (uri: string, applicationType: "web" | "native"): string | undefined => {
  if (uri.length > 2048) return "redirect_uri may be at most 2,048 characters"
  if (uri.includes("#")) return "redirect_uri must not have a fragment"
  if (/[\\\s\u0000-\u001f\u007f]/.test(uri)) return "redirect_uri has forbidden characters"
  let url: URL
  try {
    url = new URL(uri)
  } catch {
    return "redirect_uri must be an absolute URI"
  }
  if (DANGEROUS_SCHEMES.has(url.protocol)) return `redirect_uri must not use ${url.protocol}`
  if (url.protocol === "https:" || url.protocol === "http:") {
    if (/^[a-z]+:\/\/[^/?#]*@/i.test(uri)) return "redirect_uri must not have userinfo"
    if (url.hostname === "") return "redirect_uri must have a host"
    if (url.protocol === "http:" && !isLoopbackHost(url.hostname)) return "redirect_uri must use https (http only for 127.0.0.1, [::1] or localhost)"
    return undefined
  }
  // RFC 8252 §7.1: private-use schemes in reverse-domain form, native apps only
  if (applicationType === "native" && /^[a-z][a-z0-9+-]*\.[a-z0-9+.-]+:$/.test(url.protocol)) return undefined
  return "redirect_uri must use https, http to a loopback host, or (native apps) a reverse-domain private-use scheme"
}

/** RFC 8252 §7.3: the port of a 127.0.0.1 or [::1] redirect is ignored; everything else is compared exactly */
export const redirectMatches = (registered: string, given: string): boolean => {
  if (registered === given) return true
  try {
    const a = new URL(registered)
    const b = new URL(given)
    if (a.protocol !== "http:" || b.protocol !== "http:") return false
    if (!(a.hostname === "127.0.0.1" || a.hostname === "[::1]") || a.hostname !== b.hostname) return false
    a.port = ""
    b.port = ""
    return a.toString() === b.toString() && registered.replace(/:\d+/, "") === given.replace(/:\d+/, "")
  } catch {
    return false
  }
}

export const isNativeRedirect = (uri: string) => {
  try {
    const url = new URL(uri)
    return url.protocol !== "https:" && (url.protocol !== "http:" || isLoopbackHost(url.hostname))
  } catch {
    return false
  }
}

export const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/
export const CHALLENGE = /^[A-Za-z0-9_-]{43}$/

export const pkceMatches = (challenge: string, verifier: string) => {
  const expected = Buffer.from(challenge)
  const given = Buffer.from(createHash("sha256").update(verifier).digest("base64url"))
  return expected.length === given.length && timingSafeEqual(expected, given)
}

/** a constant-time comparison of two hex SHA-256 strings */
export const sameHash = (a: string | null | undefined, b: string) =>
  typeof a === "string" && a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b))
