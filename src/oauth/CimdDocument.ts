/**
 * Client ID metadata documents (decisions §22.3), the pure part: which client_id is a document URL,
 * what a fetched document must hold, and how long a copy stays fresh. The document speaks for a
 * public client only: it cannot hold a secret, so `token_endpoint_auth_method` is `none`.
 */
import { isNativeRedirect, oauthRedirectProblem } from "./Rules.ts"

/** what the service keeps of a valid document (the rest is ignored and never stored) */
export interface CimdDocument {
  readonly clientName: string
  readonly redirectUris: ReadonlyArray<string>
  readonly grantTypes: ReadonlyArray<string>
  readonly applicationType: "web" | "native"
  readonly clientUri: string | null
  readonly scope: string | null
}

/** a client_id that names a document: `https` with a non-root path (`http` too when private hosts are allowed, for tests) */
export const isCimdClientId = (clientId: string, allowPrivateHosts: boolean) =>
  clientId.startsWith("https://") || (allowPrivateHosts && clientId.startsWith("http://"))

/** why a client_id URL cannot name a document, or undefined */
export const cimdUrlProblem = (clientId: string, allowPrivateHosts: boolean): string | undefined => {
  if (clientId.length > 2048) return "the client_id URL is longer than 2,048 characters"
  let url: URL
  try {
    url = new URL(clientId)
  } catch {
    return "the client_id is not a valid URL"
  }
  if (url.protocol !== "https:" && !(allowPrivateHosts && url.protocol === "http:")) return "the client_id URL must use https"
  if (url.pathname === "/" || url.pathname === "") return "the client_id URL must have a path"
  if (clientId.includes("#")) return "the client_id URL must not have a fragment"
  if (url.username !== "" || url.password !== "" || /^[a-z]+:\/\/[^/]*@/i.test(clientId)) return "the client_id URL must not have userinfo"
  // the URL must be written as fetched: a dot segment or another spelling would let two ids name one document
  if (url.href !== clientId) return "the client_id URL must be in normal form (no dot segments, lowercase scheme and host, no default port)"
  return undefined
}

/** the host part checked against `cimdAllowedHosts` (lowercase, without the port) */
export const cimdHost = (clientId: string) => new URL(clientId).hostname.toLowerCase()

const GRANT_TYPES = ["authorization_code", "refresh_token"]

/** the document's fields as decisions §22.3 requires them, or why it is refused (never echoing the document) */
export const readCimdDocument = (text: string, clientId: string): { readonly ok: CimdDocument } | { readonly problem: string } => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return { problem: "the client metadata document is not JSON" }
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return { problem: "the client metadata document is not a JSON object" }
  const m = parsed as Record<string, unknown>
  if (m.client_id !== clientId) return { problem: "the client metadata document's client_id is not its URL" }
  if (typeof m.client_name !== "string" || m.client_name.trim() === "" || m.client_name.length > 100) {
    return { problem: "the client metadata document needs a client_name of 1 to 100 characters" }
  }
  const method = m.token_endpoint_auth_method
  if (method !== undefined && method !== "none") return { problem: "a client metadata document may only use token_endpoint_auth_method none" }
  if (m.client_secret !== undefined || m.jwks !== undefined || m.jwks_uri !== undefined) {
    return { problem: "a client metadata document may not carry a secret or keys" }
  }
  const redirects = m.redirect_uris
  if (!Array.isArray(redirects) || redirects.length < 1 || redirects.length > 20 || redirects.some((r) => typeof r !== "string")) {
    return { problem: "the client metadata document must list 1 to 20 redirect_uris" }
  }
  const uris = redirects as Array<string>
  const declared = m.application_type
  if (declared !== undefined && declared !== "web" && declared !== "native") return { problem: "application_type must be web or native" }
  const applicationType: "web" | "native" = (declared as "web" | "native" | undefined) ?? (uris.every(isNativeRedirect) ? "native" : "web")
  for (const uri of uris) {
    const problem = oauthRedirectProblem(uri, applicationType)
    if (problem !== undefined) return { problem: `the client metadata document's ${problem}` }
  }
  const grantTypes = m.grant_types === undefined ? ["authorization_code"] : m.grant_types
  if (!Array.isArray(grantTypes) || grantTypes.length === 0 || grantTypes.some((g) => typeof g !== "string" || !GRANT_TYPES.includes(g))) {
    return { problem: "grant_types may hold only authorization_code and refresh_token" }
  }
  const responseTypes = m.response_types
  if (responseTypes !== undefined && (!Array.isArray(responseTypes) || responseTypes.length !== 1 || responseTypes[0] !== "code")) {
    return { problem: "response_types must be [\"code\"]" }
  }
  const clientUri = typeof m.client_uri === "string" && /^https?:\/\//.test(m.client_uri) && m.client_uri.length <= 2048 ? m.client_uri : null
  const scope = typeof m.scope === "string" && m.scope.length <= 2048 ? m.scope : null
  return { ok: { clientName: m.client_name, redirectUris: uris, grantTypes: [...new Set(grantTypes as Array<string>)], applicationType, clientUri, scope } }
}

export const CIMD_MIN_FRESH_MS = 5 * 60 * 1000
export const CIMD_MAX_FRESH_MS = 24 * 3600 * 1000
/** a copy whose refetch fails may still be used this long past its freshness (decisions §22.3) */
export const CIMD_STALE_GRACE_MS = 24 * 3600 * 1000

/** how long a fetched copy is fresh: `Cache-Control` max-age within [5 min, 24 h]; no-store or none: 5 min */
export const cimdFreshnessMs = (cacheControl: string | null): number => {
  const directives = (cacheControl ?? "").toLowerCase()
  if (/(^|[\s,])(no-store|no-cache)([\s,=]|$)/.test(directives)) return CIMD_MIN_FRESH_MS
  const maxAge = /(?:^|[\s,])max-age\s*=\s*"?(\d+)"?/.exec(directives)
  const ms = maxAge === null ? CIMD_MIN_FRESH_MS : Number(maxAge[1]) * 1000
  return Math.min(CIMD_MAX_FRESH_MS, Math.max(CIMD_MIN_FRESH_MS, ms))
}
