/**
 * Headers every response carries (decisions §19): `X-Content-Type-Options: nosniff`, and on the
 * API reference page (/docs) a Content-Security-Policy that lets it run only its own scripts. Every
 * HTML page refuses to be framed (§19, revised: `X-Frame-Options: DENY` and `frame-ancestors
 * 'none'`), whichever route made it: the pages that set their own policy keep it.
 *
 * The page (the platform's Scalar layer) is one HTML document with its scripts inline (Scalar's
 * bundle included, no CDN), so the policy names those scripts by their SHA-256; the hashes are
 * taken once from the first page served (its text never changes while the process runs).
 */
import { createHash } from "node:crypto"

export const DOCS_PATH = "/docs"

const pathOf = (url: string): string => {
  const start = url.indexOf("/", url.indexOf("//") + 2)
  if (start === -1) return "/"
  const q = url.indexOf("?", start)
  return url.slice(start, q === -1 ? undefined : q)
}

/** The policy for a page whose only scripts are the given inline ones. */
export const docsPolicy = (html: string): string => {
  const hashes: Array<string> = []
  // executable inline scripts: `<script>` without attributes (the JSON data block is not run)
  const re = /<script>([\s\S]*?)<\/script>/g
  for (let m = re.exec(html); m !== null; m = re.exec(html)) {
    hashes.push(`'sha256-${createHash("sha256").update(m[1]!).digest("base64")}'`)
  }
  return [
    "default-src 'none'",
    // WebAssembly compilation only (Scalar compiles a module), never eval of script text
    `script-src 'wasm-unsafe-eval' ${hashes.join(" ")}`,
    // Scalar writes its styles into the page at run time
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'"
  ].join("; ")
}

let docsCsp: Promise<string> | undefined

export const withCommonHeaders = async (request: Request, response: Response): Promise<Response> => {
  let out = response
  if (request.method === "GET" && response.status === 200 && pathOf(request.url) === DOCS_PATH) {
    docsCsp ??= response.clone().text().then(docsPolicy)
    const csp = await docsCsp
    // the page's response was built once by the platform and is shared: answer with a copy
    out = new Response(response.body, { status: response.status, headers: response.headers })
    out.headers.set("content-security-policy", csp)
  }
  const html = (out.headers.get("content-type") ?? "").startsWith("text/html")
  const set = (headers: Headers) => {
    headers.set("x-content-type-options", "nosniff")
    if (html) {
      headers.set("x-frame-options", "DENY")
      if (!headers.has("content-security-policy")) headers.set("content-security-policy", "frame-ancestors 'none'")
    }
  }
  try {
    set(out.headers)
  } catch {
    // a response with immutable headers: the same answer, copied
    out = new Response(out.body, { status: out.status, statusText: out.statusText, headers: out.headers })
    set(out.headers)
  }
  return out
}
