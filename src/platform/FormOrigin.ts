/**
 * Form posts of the service's own pages (consent, permissions) come from those pages: a post that
 * another site made the browser send is refused (decisions §19, revised), so holding a consent link
 * or a permissions session is not enough to answer for the person from elsewhere.
 *
 * Sec-Fetch-Site is the browser's own statement: only `same-origin` (or `none`, typed by the user)
 * passes. Otherwise Origin decides: it must be the service's public origin. `Origin: null` is what
 * Chromium sends for our own pages' posts under `Referrer-Policy: no-referrer`, so it passes only
 * beside a Sec-Fetch-Site that says same-origin; a request with neither header (not a browser form)
 * passes, as it carries no ambient authority a browser would add.
 */
import type { HttpServerRequest } from "@effect/platform"

export const fromAnotherSite = (request: HttpServerRequest.HttpServerRequest, publicBaseUrl: string): boolean => {
  const site = request.headers["sec-fetch-site"]
  if (site !== undefined) return site !== "same-origin" && site !== "none"
  const origin = request.headers["origin"]
  if (origin === undefined) return false
  let own: string
  try {
    own = new URL(publicBaseUrl).origin
  } catch {
    return true
  }
  return origin !== own
}
