/**
 * Request bodies, read once before the request enters the runtime (decisions §19):
 * - the size limit (1 MiB, 8 MiB for offline sync) holds however the body is framed: a declared
 *   length over it is refused unread, a chunked body is counted while it streams in;
 * - a body endpoint takes JSON only (the consent page's form routes also take a urlencoded form);
 *   anything else is 415 before the platform tries to decode it (multipart used to end in a 500);
 * - JSON nesting deeper than 64 levels is 400 before anything parses it, found by one linear scan.
 * The verdict is handed to the envelope, which answers a refusal in the one error shape.
 */
import { HttpApi, HttpApiSchema } from "@effect/platform"
import { Context } from "effect"
import * as FindMyWay from "find-my-way-ts"

export const MAX_BODY_BYTES = 1024 * 1024
export const MAX_SYNC_BODY_BYTES = 8 * 1024 * 1024
export const MAX_JSON_DEPTH = 64

/** decisions §22.4: the OAuth endpoints take at most 64 KiB */
export const MAX_OAUTH_BODY_BYTES = 64 * 1024

export const maxBodyBytes = (path: string) =>
  path === "/v1/audit/offline-sync" ? MAX_SYNC_BODY_BYTES : path.startsWith("/oauth/") ? MAX_OAUTH_BODY_BYTES : MAX_BODY_BYTES

export type BodyVerdict =
  | { readonly _tag: "Text"; readonly text: string }
  | {
    readonly _tag: "Refused"
    readonly status: 400 | 413 | 415
    readonly message: string
    /** whether a route serves the path (metrics label the rest `unmatched`) */
    readonly routed: boolean
  }

/**
 * The verdict on this request's body, when it has one (see `makeBodyReader`). A body read here is
 * handed to the platform as a value: its own reading builds a cached effect per request with
 * `Effect.runSync`, which under load cost about as much as the rest of a small request.
 */
export class PreReadBody extends Context.Tag("agent-auth/PreReadBody")<PreReadBody, BodyVerdict>() {}

/**
 * Whether JSON text nests deeper than `max` arrays/objects (the root is level 1). One pass, no
 * recursion, brackets inside strings (escaped quotes included) ignored; malformed text is left to
 * the parser, which refuses it anyway.
 */
export const jsonNestsDeeperThan = (text: string, max: number = MAX_JSON_DEPTH): boolean => {
  let depth = 0
  // the next backslash past i (-1: none left): a string with none before its closing quote is
  // skipped with indexOf rather than char by char (a SAML Response posted as JSON is one 1 MiB string)
  let backslash = text.indexOf("\\")
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      const quote = text.indexOf('"', i + 1)
      if (quote === -1) return false // unterminated: the parser refuses it
      if (backslash !== -1 && backslash <= i) backslash = text.indexOf("\\", i + 1)
      if (backslash === -1 || backslash > quote) {
        i = quote
        continue
      }
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i)
        if (s === 0x5c) i++ // backslash: the next character is escaped
        else if (s === 0x22) break
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return false
}

const pathOf = (url: string): string => {
  const start = url.indexOf("/", url.indexOf("//") + 2)
  if (start === -1) return "/"
  const q = url.indexOf("?", start)
  return url.slice(start, q === -1 ? undefined : q)
}

/**
 * Reads a stream up to `limit` bytes; undefined once over it. Past the limit nothing is kept: up to
 * another `limit` bytes are read and dropped, so a client that overshoots a little gets its 413
 * instead of a connection reset (closing on unread bytes resets it); beyond that the read stops.
 * (Not for offline sync: Bun itself ends a chunked body at 4 MiB, so its 8 MiB are never drained.)
 */
const readCounted = async (stream: ReadableStream<Uint8Array>, limit: number): Promise<Uint8Array | undefined> => {
  const reader = stream.getReader()
  const chunks: Array<Uint8Array> = []
  let total = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    total += value.byteLength
    if (total > limit) {
      const drainTo = limit <= MAX_BODY_BYTES ? 2 * limit : limit
      while (total <= drainTo) {
        const next = await reader.read().catch(() => ({ done: true as const, value: undefined }))
        if (next.done) return undefined
        total += next.value.byteLength
      }
      await reader.cancel().catch(() => {})
      return undefined
    }
    chunks.push(value)
  }
  if (chunks.length === 1) return chunks[0]!
  const all = new Uint8Array(total)
  let at = 0
  for (const chunk of chunks) {
    all.set(chunk, at)
    at += chunk.byteLength
  }
  return all
}

/** The API's routes, each marked whether its payload is a urlencoded form (the consent page's buttons). */
const routesOf = (api: HttpApi.HttpApi.Any) => {
  const router = FindMyWay.make<{ form: boolean }>()
  HttpApi.reflect(api as any, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const payloads = [...(endpoint.payloadSchema._tag === "Some" ? [endpoint.payloadSchema.value] : [])]
      const form = payloads.some((schema: any) => HttpApiSchema.getEncoding(schema.ast).kind === "UrlParams")
      router.on(endpoint.method as any, endpoint.path as any, { form })
    }
  })
  return (method: string, url: string) => router.find(method as any, url)?.handler
}

/**
 * Builds the reader run on every request before the handler. Undefined: nothing to read (a
 * method without a body, or no body sent), the platform goes on as before.
 */
/** application/json, or a structured JSON type such as application/scim+json */
const JSON_TYPE = /^\s*application\/([a-z0-9.-]+\+)?json\s*(;|$)/

export const makeBodyReader = (api: HttpApi.HttpApi.Any) => {
  const routeOf = routesOf(api)
  return async (request: Request): Promise<BodyVerdict | undefined> => {
    if (request.method === "GET" || request.method === "HEAD" || request.method === "OPTIONS") return undefined
    const declared = request.headers.get("content-length")
    const chunked = request.headers.get("transfer-encoding") !== null
    if (!chunked && (declared === null || declared === "0")) return undefined
    const path = pathOf(request.url)
    // the route is looked up only when a refusal or a form needs it (not on the common path)
    const route = () => routeOf(request.method, path)
    const refuse = (status: 400 | 413 | 415, message: string): BodyVerdict => ({ _tag: "Refused", status, message, routed: route() !== undefined })
    const limit = maxBodyBytes(path)
    const tooLarge = () => refuse(413, `Request body exceeds ${limit} bytes`)
    if (declared !== null && !(Number(declared) <= limit)) return tooLarge()
    // every body is JSON (decisions §19), so one sent as anything else, or with no type at all (a
    // browser's fetch sends text/plain, curl's -d a form), is told which header to send instead of
    // being read as a form whose fields are all "missing"; the consent page's form routes take forms
    const header = request.headers.get("content-type")
    const type = (header ?? "").toLowerCase()
    const json = JSON_TYPE.test(type)
    if (!json && !(type.includes("application/x-www-form-urlencoded") && route()?.form === true)) {
      const sent = header === null ? "no Content-Type" : `Content-Type ${JSON.stringify(header.replace(/[^\x20-\x7e]/g, "").slice(0, 100))}`
      return refuse(415, `The request body must be JSON sent with the header Content-Type: application/json (this request has ${sent})`)
    }
    let text: string
    try {
      // a declared length is what the server reads (the fast path); otherwise count as it streams
      if (declared !== null && !chunked) text = await request.text()
      else {
        if (request.body === null) return undefined
        const bytes = await readCounted(request.body, limit)
        if (bytes === undefined) return tooLarge()
        text = new TextDecoder().decode(bytes)
      }
    } catch {
      // the client went away mid-body: refused like any unreadable body
      return refuse(400, "Malformed request body")
    }
    if (json && jsonNestsDeeperThan(text)) {
      return refuse(400, `JSON nested deeper than ${MAX_JSON_DEPTH} levels`)
    }
    return { _tag: "Text", text }
  }
}
