/**
 * The console is a client of the public API (decisions §23): every read and action it takes is a
 * request to the service's own HTTP handler, with the signed-in API key as the bearer, through the
 * same gate (authentication, read-key scope, rate limits, idempotency) as any caller. This port is
 * that handler; src/Server.ts binds it once the handler exists.
 */
import { Context, Effect, Layer } from "effect"

export interface SelfApiService {
  /** `peer`: the browser's address, so per-address limits count the person, not the console */
  readonly fetch: (request: Request, peer?: string) => Promise<Response>
}

export class SelfApi extends Context.Tag("agent-auth/ConsoleSelfApi")<SelfApi, SelfApiService>() {}

/** the layer, and `bind` to give it the service's handler once it is built */
export const makeSelfApi = () => {
  let target: ((request: Request, peer?: string) => Promise<Response>) | undefined
  const layer = Layer.succeed(SelfApi, {
    fetch: (request, peer) => target === undefined ? Promise.reject(new Error("the console's API handler is not bound yet")) : target(request, peer)
  })
  return { layer, bind: (handler: (request: Request, peer?: string) => Promise<Response>) => void (target = handler) }
}

export interface ApiAnswer {
  readonly status: number
  readonly body: any
}

/** Where the browser's request came from: passed on, so the gate sees the person's address. */
export interface Origin {
  readonly peer?: string | undefined
  readonly forwardedFor?: string | undefined
}

/** One API call as the signed-in key: JSON in, JSON (or text) out. */
export const callApi = (baseUrl: string, apiKey: string, method: string, path: string, body?: unknown, from: Origin = {}) =>
  Effect.flatMap(SelfApi, (self) =>
    Effect.promise(async (): Promise<ApiAnswer> => {
      const headers: Record<string, string> = { authorization: `Bearer ${apiKey}`, accept: "application/json" }
      if (body !== undefined) headers["content-type"] = "application/json"
      if (from.forwardedFor !== undefined) headers["x-forwarded-for"] = from.forwardedFor
      const response = await self.fetch(new Request(new URL(path, baseUrl), {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body)
      }), from.peer)
      const text = await response.text()
      let parsed: unknown = text
      try {
        parsed = text.length > 0 ? JSON.parse(text) : undefined
      } catch {
        // not JSON: kept as text
      }
      return { status: response.status, body: parsed }
    }))
