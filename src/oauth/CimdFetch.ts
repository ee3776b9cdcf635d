/**
 * The outbound side of client ID metadata documents (decisions §22.3): one GET under section 7's
 * rules (https to a public address, the connection pinned to the checked address, a deadline, a
 * bounded answer, no redirects, `Accept: application/json`). A port, so a test can serve its
 * document over TLS on loopback with its own certificate authority; the service uses the live one.
 */
import { Context, Effect, Layer } from "effect"
import { Config } from "../Config.ts"
import { pinnedFetch } from "../platform/Outbound.ts"

/** what came back, or a transport failure (network, deadline, too large, refused address) */
export type CimdFetchResult =
  | { readonly _tag: "Answer"; readonly status: number; readonly text: string; readonly cacheControl: string | null }
  | { readonly _tag: "Failed"; readonly reason: string }

export class CimdFetch extends Context.Tag("agent-auth/OAuthCimdFetch")<CimdFetch, { readonly get: (url: string) => Effect.Effect<CimdFetchResult> }>() {}

const SAFE_REASONS = ["answer too large", "receiver not allowed or unreachable", "url must use https", "answer nested deeper", "timed out"]

/** a GET with the given `fetch` (pinned, bounded); its error messages are safe to show (never an address) */
export const cimdGetWith = (fetchFn: (input: string, init?: RequestInit) => Promise<Response>) => (url: string): Effect.Effect<CimdFetchResult> =>
  Effect.promise(async (): Promise<CimdFetchResult> => {
    try {
      const response = await fetchFn(url, { method: "GET", headers: { accept: "application/json" } })
      return { _tag: "Answer", status: response.status, text: await response.text(), cacheControl: response.headers.get("cache-control") }
    } catch (e) {
      const { name, message } = e as Error
      if (name === "TimeoutError" || name === "AbortError") return { _tag: "Failed", reason: "timed out" }
      // the outbound rules' own refusals are safe to show; a socket error may name the resolved address, so it is not
      return { _tag: "Failed", reason: SAFE_REASONS.some((r) => message?.startsWith(r)) ? message : "unreachable" }
    }
  })

export const CimdFetchLive = Layer.effect(
  CimdFetch,
  Effect.map(Config, (config) => ({
    get: cimdGetWith(pinnedFetch({
      allowPrivateHosts: config.oauth.cimd.allowPrivateHosts,
      timeoutMs: config.oauth.cimd.timeoutMs,
      maxBodyBytes: config.oauth.cimd.maxBytes
    }))
  }))
)
