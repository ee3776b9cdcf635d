/**
 * Redirect URI rules (decisions §19, RFC 8252 for loopback): https, or http to a loopback host only;
 * no userinfo, no fragment, at most 2,048 characters. Checked on the raw text as well as the parsed
 * URL, because the parser drops an empty fragment (`#`) and an empty userinfo (`@`).
 */
export const MAX_REDIRECT_URI_LENGTH = 2048
export const MAX_REDIRECT_URIS = 20

const LOOPBACK = new Set(["127.0.0.1", "[::1]", "localhost"])

/** why the URI is refused, or undefined when it is acceptable */
export const redirectUriProblem = (uri: string): string | undefined => {
  if (uri.length > MAX_REDIRECT_URI_LENGTH) return "redirectUri may be at most 2,048 characters"
  // the authority as written: a backslash, whitespace or control character could make a browser read it differently
  const raw = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]*)/i.exec(uri)
  if (raw === null || /[\\\s\u0000-\u001f\u007f]/.test(uri)) return "redirectUri must be an absolute http(s) URL"
  if (raw[2]!.includes("@")) return "redirectUri must not contain userinfo"
  if (uri.includes("#")) return "redirectUri must not contain a fragment"
  let url: URL
  try {
    url = new URL(uri)
  } catch {
    return "redirectUri must be an absolute http(s) URL"
  }
  if (url.protocol === "https:" && url.hostname !== "") return undefined
  if (url.protocol === "http:" && LOOPBACK.has(url.hostname)) return undefined
  return "redirectUri must use https (http only for 127.0.0.1, [::1] or localhost)"
}
