/**
 * POST /v1/tokens/verify's work, shared by the API handler (./Http.ts) and the lean path
 * (src/system/Lean.ts): the signature and claims (Keys for grant tokens, AccessTokens for an OAuth
 * `at+jwt` of the same developer's issuer, decisions §22.7), the developer's own token, `audience`
 * when asked (the token's `aud` must contain it), the online status (Grants.tokenStatus: the grant,
 * the token, its agents), then the gate's use check (decisions §20: the principal active, policies,
 * the anomaly rules' sighting), the metric, the `verifications` meter (decisions §16, counted live),
 * the answer.
 */
import { Effect } from "effect"
import { LiveCounts } from "../billing/LiveCounts.ts"
import { Config } from "../Config.ts"
import { Gate } from "../gate/Gate.ts"
import { AccessTokens, headerTyp, issuerOf } from "../platform/AccessTokens.ts"
import type { Developer } from "../platform/Auth.ts"
import { type GrantTokenClaims, Keys } from "../platform/Keys.ts"
import { Metrics } from "../platform/Metrics.ts"
import { nowMillis } from "../platform/Time.ts"
import { agentIdOf, Grants } from "./Service.ts"

export interface VerifyInput {
  readonly token: string
  /** decisions §22.7: the token's `aud` must contain it */
  readonly audience?: string | undefined
}

/** the claims both kinds of token share, and what an OAuth access token adds to the answer */
interface Checked {
  readonly claims: GrantTokenClaims
  readonly oauth?: { readonly audience: string; readonly clientId: string }
}

const audiences = (aud: GrantTokenClaims["aud"]): ReadonlyArray<string> =>
  aud === undefined ? [] : typeof aud === "string" ? [aud] : aud

export const makeVerifyToken = Effect.gen(function*() {
  const keys = yield* Keys
  const accessTokens = yield* AccessTokens
  const grants = yield* Grants
  const metrics = yield* Metrics
  const gate = yield* Gate
  const liveCounts = yield* LiveCounts
  const issuerBase = (yield* Config).oauth.issuerBase

  /** a grant token of ours, or an at+jwt of this developer's issuer; undefined when neither */
  const check = (developer: Developer, token: string, nowSeconds: number): Effect.Effect<Checked | undefined> =>
    headerTyp(token) === "at+jwt"
      ? Effect.map(accessTokens.verify(token, nowSeconds), (claims): Checked | undefined =>
        claims === undefined || claims.dev !== developer.id || claims.iss !== issuerOf(issuerBase, developer.id)
          ? undefined
          : { claims: claims as unknown as GrantTokenClaims, oauth: { audience: claims.aud, clientId: claims.client_id } })
      : keys.verify(token, nowSeconds).pipe(
        Effect.map((claims): Checked | undefined => claims.dev === developer.id ? { claims } : undefined),
        Effect.orElseSucceed(() => undefined)
      )

  return (developer: Developer, input: VerifyInput) =>
    Effect.gen(function*() {
      const ms = yield* nowMillis
      const checked = yield* check(developer, input.token, Math.floor(ms / 1000))
      const claims = checked?.claims
      const wanted = input.audience === undefined || (claims !== undefined && audiences(claims.aud).includes(input.audience))
      const online = claims !== undefined && wanted && (yield* grants.tokenStatus(claims)) === "active"
      const valid = online && (yield* gate.checkUse("token.verify", {
        developerId: developer.id,
        agentId: agentIdOf(claims.agt) ?? "",
        principalId: claims.sub,
        scopes: claims.scp,
        grant: { id: claims.grnt, delegationDepth: claims.delegationDepth ?? 0, parentGrantId: claims.parentGrnt ?? null }
      }).pipe(Effect.as(true), Effect.catchAll(() => Effect.succeed(false))))
      metrics.inc("tokens_verified_total", { result: valid ? "valid" : "invalid" })
      liveCounts.add(developer.id, "verifications")
      if (!valid || claims === undefined) return { valid: false as const }
      return {
        valid: true as const,
        grantId: claims.grnt,
        scopes: [...claims.scp],
        principal: claims.sub,
        agent: claims.agt,
        expiresAt: new Date(claims.exp * 1000).toISOString(),
        ...(checked?.oauth ?? {})
      }
    })
})
