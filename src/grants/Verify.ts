/**
 * POST /v1/tokens/verify's work, shared by the API handler (./Http.ts) and the lean path
 * (src/system/Lean.ts): the signature and claims (Keys), the developer's own token, the online
 * status (Grants.tokenStatus), the metric, the anomaly rules' sighting of a valid token, and the answer.
 */
import { Effect, Option } from "effect"
import { optionalCore } from "../anomalies/Core.ts"
import type { Developer } from "../platform/Auth.ts"
import { Keys } from "../platform/Keys.ts"
import { Metrics } from "../platform/Metrics.ts"
import { nowMillis } from "../platform/Time.ts"
import { agentIdOf, Grants } from "./Service.ts"

export const makeVerifyToken = Effect.gen(function*() {
  const keys = yield* Keys
  const grants = yield* Grants
  const metrics = Option.getOrUndefined(yield* Effect.serviceOption(Metrics))
  const anomalies = yield* optionalCore // decisions §14: inline rules
  return (developer: Developer, token: string) =>
    Effect.gen(function*() {
      const ms = yield* nowMillis
      const claims = yield* keys.verify(token, Math.floor(ms / 1000)).pipe(Effect.option)
      const valid = claims._tag === "Some" && claims.value.dev === developer.id && (yield* grants.tokenStatus(claims.value)) === "active"
      metrics?.inc("tokens_verified_total", { result: valid ? "valid" : "invalid" })
      if (!valid || Option.isNone(claims)) return { valid: false as const }
      if (anomalies !== undefined) yield* anomalies.tokenUsed(developer.id, agentIdOf(claims.value.agt) ?? "")
      return {
        valid: true as const,
        grantId: claims.value.grnt,
        scopes: [...claims.value.scp],
        principal: claims.value.sub,
        agent: claims.value.agt,
        expiresAt: new Date(claims.value.exp * 1000).toISOString()
      }
    })
})
