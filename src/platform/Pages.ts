/**
 * The pages people open in a browser (consent, permissions, the SSO returns): every endpoint whose
 * success is `text/html`, read from the API's declarations, so a new page is known here without a
 * list to keep. When PostgreSQL or Redis is away such a route answers an HTML page with 503 and
 * `Retry-After` (decisions §10, revised), never the API's JSON error; the envelope applies it to
 * whatever the page's handler, the gate or the database middleware answered, so no page renders
 * its own outage.
 */
import { HttpApi, HttpApiSchema, HttpServerResponse } from "@effect/platform"
import { SchemaAST } from "effect"
import * as FindMyWay from "find-my-way-ts"

export type IsPage = (method: string, path: string) => boolean

export const pageRoutes = (api: HttpApi.HttpApi.Any): IsPage => {
  const router = FindMyWay.make<true>()
  HttpApi.reflect(api as any, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const ast = endpoint.successSchema.ast
      const successes = SchemaAST.isUnion(ast) ? ast.types : [ast]
      if (successes.some((s) => HttpApiSchema.getEncoding(s).contentType.startsWith("text/html"))) {
        router.on(endpoint.method as any, endpoint.path as any, true)
      }
    }
  })
  return (method, path) => router.find((method === "HEAD" ? "GET" : method) as any, path) !== undefined
}

/** seconds a person (or the browser) should wait before trying again, when the answer names none */
export const PAGE_RETRY_AFTER_SECONDS = 5

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/** The outage page: self-contained (no script, no style sheet to fetch), the request id to quote. */
export const unavailablePage = (requestId: string, retryAfter: string) =>
  HttpServerResponse.text(
    `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Temporarily unavailable</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 32rem; margin: 4rem auto; padding: 0 1rem; line-height: 1.5">
<h1>Temporarily unavailable</h1>
<p>This page cannot be shown right now: a service it depends on is not answering.</p>
<p>Please try again in a few seconds.</p>
<p style="color: #666; font-size: 0.85rem">Reference: ${escape(requestId)}</p>
</body>
</html>
`,
    {
      status: 503,
      contentType: "text/html; charset=utf-8",
      headers: { "retry-after": retryAfter, "cache-control": "no-store" }
    }
  )
