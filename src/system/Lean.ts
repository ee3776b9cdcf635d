/**
 * The lean path (issue 27): a few hot routes answered straight from Bun's fetch, without
 * HttpApiBuilder's per-request pipeline (router, decode/encode, middleware chain, a copy of the
 * runtime's context per request), which cost most of a light request:
 *
 * - GET /health and GET /health/live: rate-limit exempt, no credentials; the same probes
 *   (./Probes.ts), body, status, content-type, x-request-id (reused when well-formed), nosniff,
 *   request metric and access line as the API (test/platform/lean-paths.test.ts compares them).
 * - the light API-key reads (GET /v1/me, GET /v1/consent-bundles/:id and its revocation status,
 *   POST /v1/tokens/verify) and the vault exchange (grant token), through platform/LeanRoutes.ts: the gate's own admission, the
 *   capability's own function, the API's body reader and the endpoint's payload schema
 *   (test/platform/lean-reads.test.ts compares them).
 *
 * Anything else returns undefined and goes through the API.
 */
import { Effect, Option, type Runtime } from "effect"
import pkg from "../../package.json" with { type: "json" }
import { Api } from "../Api.ts"
import { ConsentBundles } from "../consent-bundles/Service.ts"
import { developerView } from "../developers/Service.ts"
import { makeVerifyToken } from "../grants/Verify.ts"
import { Vault } from "../vault/Service.ts"
import { Config } from "../Config.ts"
import { recordRequest } from "../platform/AccessLog.ts"
import { newRequestId } from "../platform/HttpEnvelope.ts"
import { type LeanRoutesOptions, makeLeanRoutes, type PeerOf } from "../platform/LeanRoutes.ts"
import { Log } from "../platform/Log.ts"
import { Metrics } from "../platform/Metrics.ts"
import { clientAddress } from "../platform/RateLimit.ts"
import { healthAnswer, makeProbes } from "./Probes.ts"

export type LeanPath = (request: Request, peerOf: PeerOf) => Promise<Response> | undefined

const pathOf = (url: string): string => {
  const start = url.indexOf("/", url.indexOf("//") + 2)
  if (start === -1) return "/"
  const q = url.indexOf("?", start)
  return q === -1 ? url.slice(start) : url.slice(start, q)
}

const LIVE_BODY = JSON.stringify({ status: "ok", version: pkg.version })

export const makeLeanPath = (rt: Runtime.Runtime<never>, options: LeanRoutesOptions) =>
  Effect.gen(function*() {
    const probes = yield* makeProbes
    const metrics = yield* Metrics
    const trust = (yield* Config).trustProxy
    const log = Option.getOrUndefined(yield* Effect.serviceOption(Log))
    const bundles = yield* ConsentBundles
    const verifyToken = yield* makeVerifyToken
    const vault = yield* Vault
    const reads = yield* makeLeanRoutes(Api, [
      { path: "/v1/me", answer: ({ developer }) => developerView(developer!) },
      { path: "/v1/consent-bundles/:id", answerNow: ({ developer }, { id }) => bundles.getNow(developer!.id, id!), handle: ({ developer }, { id }) => bundles.get(developer!.id, id!) },
      {
        path: "/v1/consent-bundles/:id/revocation-status",
        answerNow: ({ developer }, { id }) => bundles.revocationStatusNow(developer!.id, id!),
        handle: ({ developer }, { id }) => bundles.revocationStatus(developer!.id, id!)
      },
      // (verify and the exchange: the anomaly rules and the exchange's policies read the request)
      { method: "POST", path: "/v1/tokens/verify", readsRequest: true, handle: ({ developer }, _, payload: { token: string; audience?: string }) => verifyToken(developer!, payload) },
      // authenticated by its grant token (the gate verified and counted it); the body read as the handler reads it
      { method: "POST", path: "/v1/vault/credentials/exchange", body: "text", readsRequest: true, handle: ({ grant }, _, text: string) => vault.exchange(grant, text) }
    ], rt, options)
    const answer = (request: Request, peerOf: PeerOf, route: string, requestId: string, started: number, status: number, body: string) => {
      const client = () => clientAddress(trust, peerOf(), request.headers.get("x-forwarded-for") ?? undefined)
      recordRequest(metrics, log, "GET", route, { requestId, route, client }, status, (performance.now() - started) / 1000)
      return new Response(body, {
        status,
        headers: {
          "content-type": "application/json",
          "content-length": String(Buffer.byteLength(body)),
          "x-request-id": requestId,
          "x-content-type-options": "nosniff"
        }
      })
    }
    const lean: LeanPath = (request, peerOf) => {
      const path = pathOf(request.url)
      if (request.method !== "GET" || (path !== "/health" && path !== "/health/live")) return reads(request, peerOf)
      const started = performance.now()
      const requestId = newRequestId(request.headers.get("x-request-id") ?? undefined)
      if (path === "/health/live") return Promise.resolve(answer(request, peerOf, path, requestId, started, 200, LIVE_BODY))
      // the probes are promises that never reject (a failing probe is a false in the result)
      return probes.run().then((result) => {
        const { status, body } = healthAnswer(result)
        return answer(request, peerOf, path, requestId, started, status, JSON.stringify(body))
      })
    }
    return lean
  })
