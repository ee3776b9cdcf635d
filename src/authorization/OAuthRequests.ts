/**
 * What the consent page and its answers do differently for an OAuth authorization (decisions
 * §22.5): the browser must carry the interaction cookie set by `/authorize` (its SHA-256 is stored
 * on the request), and the answer goes back to the client with `iss` beside `code` or `error`.
 * The OAuth capability (src/oauth/) sets the cookie; this file only checks it.
 */
import { sha256Hex } from "../platform/Hash.ts"
import type { ConsentView } from "./Types.ts"

/** HttpOnly, Secure, SameSite=Lax, 10 minutes; `__Host-`: no other host can set it */
export const OAUTH_INTERACTION_COOKIE = "__Host-oauth_ix"

/** the refusal of an answer from another browser */
export const ANSWER_IN_ITS_BROWSER = "This authorization can be answered only in the browser that started it"

/** whether this browser started the OAuth request (always true for a section-3 request) */
export const interactionCookieOk = (view: Pick<ConsentView, "oauth" | "interactionCookieHash">, cookies: Readonly<Record<string, string | undefined>>) => {
  if (view.oauth === null) return true
  const cookie = cookies[OAUTH_INTERACTION_COOKIE]
  return cookie !== undefined && view.interactionCookieHash !== null && sha256Hex(cookie) === view.interactionCookieHash
}

/** the parameters the redirect back to the client carries: `iss` too for an OAuth request (RFC 9207) */
export const withIssuer = (view: Pick<ConsentView, "oauth">, params: Record<string, string | null | undefined>) =>
  view.oauth === null ? params : { ...params, iss: view.oauth.issuer }
