/**
 * A server-rendered page's answer (decisions §19, §23): its own CSP, never framed, never cached,
 * no referrer; the pages of people and developers (principals, console) answer through this.
 */
import { HttpServerResponse } from "@effect/platform"

export interface HtmlPage {
  readonly html: string
  readonly csp: string
}

/** at most one cookie per answer (the platform's headers hold one value per name) */
export const htmlPage = (p: HtmlPage, status = 200, setCookie?: string) =>
  HttpServerResponse.text(p.html, {
    status,
    contentType: "text/html; charset=utf-8",
    headers: {
      "content-security-policy": p.csp,
      "x-content-type-options": "nosniff",
      "x-frame-options": "DENY",
      "referrer-policy": "no-referrer",
      "cache-control": "no-store",
      ...(setCookie === undefined ? {} : { "set-cookie": setCookie })
    }
  })
