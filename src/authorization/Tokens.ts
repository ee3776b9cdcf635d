/**
 * The token endpoint's two exchanges (decisions §3): a single-use code (with its PKCE verifier) and a
 * refresh token, each for a grant token and a fresh refresh token. Presenting either a second time
 * revokes the grant. Separate from Service.ts because it is what an agent's backend does after
 * consent, with its own replay rules; the requests and their approval stay there.
 */
import type { SqlClient, Statement } from "@effect/sql"
import { Effect } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import type { AnomalyCoreService } from "../anomalies/Core.ts"
import type { CredentialsService } from "../credentials/Service.ts"
import type { GateService } from "../gate/Gate.ts"
import type { GrantRecord, GrantsService } from "../grants/Service.ts"
import { InvalidGrant } from "../platform/Errors.ts"
import { sha256Hex } from "../platform/Hash.ts"
import { newId } from "../platform/Ids.ts"
import type { MetricsService } from "../platform/Metrics.ts"
import { nowMillis } from "../platform/Time.ts"
import { secret } from "./Lookups.ts"
import type { AuthorizationService } from "./Types.ts"

/** Grant tokens from /v1/token and refresh live at most this long (never past the grant). */
export const ACCESS_TOKEN_TTL_MS = 60 * 60 * 1000

const invalidGrant = (message: string) => new InvalidGrant({ message: message })

/** The code and refresh exchanges of one authorization service, from its dependencies. */
export const makeTokens = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly metrics: MetricsService
  readonly anomalies: AnomalyCoreService
  readonly grants: GrantsService
  readonly credentials: CredentialsService
  readonly gate: GateService
}) => {
  const { sql, metrics, anomalies, grants, credentials, gate } = deps

  /**
   * issues a grant token (≤ 1 h, never past the grant) and a fresh refresh token; `spend` is the
   * UPDATE that uses up what was exchanged (the code, the old refresh token), sent with the new
   * refresh token's insert (one round trip fewer)
   */
  const issueTokens = (grant: GrantRecord, ms: number, spend: Statement.Fragment, bdg?: number) =>
    Effect.gen(function*() {
      const expiresAt = new Date(Math.min(grant.expiresAt.getTime(), ms + ACCESS_TOKEN_TTL_MS))
      const token = yield* grants.issueToken(grant, { expiresAt, ...(bdg !== undefined ? { bdg } : {}) })
      const refreshToken = `rt_${secret()}`
      yield* sql`WITH spent AS (${spend})
                 INSERT INTO refresh_tokens (id, token_hash, grant_id, developer_id, agent_id, created_at, expires_at)
                 VALUES (${newId("ref", ms)}, ${sha256Hex(refreshToken)}, ${grant.id}, ${grant.developerId}, ${grant.agentId},
                         ${new Date(ms)}, ${grant.expiresAt})`
      return {
        grantToken: token.grantToken,
        expiresAt: token.expiresAt.toISOString(),
        scopes: [...grant.scopes],
        refreshToken,
        grantId: grant.id
      }
    }).pipe(Effect.orDie)

  // (the table is migration 0006's: no need to ask whether it exists on every refresh)
  const remainingBudget = (grantId: string) =>
    sql<{ remainingBudget: string }>`SELECT remaining_budget FROM budget_allocations WHERE grant_id = ${grantId}`.pipe(
      Effect.map((rows) => rows[0] === undefined ? undefined : Number(rows[0].remainingBudget)),
      Effect.orDie
    )

  /** after the revoking transaction committed: a replay is what an operator must see (someone else may hold the secret) */
  const reportReplay = (developerId: string, replay: { kind: string; grantId: string; agentId: string; revoked: number }) => {
    metrics.inc("replays_total", { kind: replay.kind })
    return Effect.logWarning(replay.kind === "code" ? "authorization code replayed; grant revoked" : "refresh token replayed; grant revoked").pipe(
      Effect.annotateLogs({ developerId, agentId: replay.agentId, grantId: replay.grantId, grantsRevoked: replay.revoked })
    )
  }

  const exchangeCode: AuthorizationService["exchangeCode"] = (developer, input) =>
    Effect.gen(function*() {
      // RFC 7636: a verifier is 43-128 characters; anything else is refused before the code is looked at
      if (input.codeVerifier !== undefined && (input.codeVerifier.length < 43 || input.codeVerifier.length > 128)) {
        return yield* Effect.fail(invalidGrant("codeVerifier must be 43 to 128 characters"))
      }
      // decisions §18: the credential asked for is checked before the code is spent
      const wanted = yield* credentials.parseRequest(input)
      // A replay revokes the grant and must commit even though the request fails (an outcome, not a failure);
      // the gate's refusals fail and roll everything back, the code stays unused.
      const outcome = yield* gate.transaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        // decisions §22.5: an OAuth code is redeemed only at its issuer's token endpoint
        // the code (locked) with what its request adds to the exchange, in one read
        const rows = yield* sql<{
          authRequestId: string; grantId: string; developerId: string; agentId: string; expiresAt: Date; usedAt: Date | null
          codeChallenge: string | null; fidoVerifiedAt: Date | null
        }>`
          SELECT c.auth_request_id, c.grant_id, c.developer_id, c.agent_id, c.expires_at, c.used_at, r.code_challenge, r.fido_verified_at
          FROM auth_codes c JOIN auth_requests r ON r.id = c.auth_request_id
          WHERE c.code_hash = ${sha256Hex(input.code)} AND NOT c.oauth FOR UPDATE OF c`
        const code = rows[0]
        if (code === undefined || code.developerId !== developer.id) return { error: "Unknown authorization code" } as const
        if (code.usedAt !== null) {
          // A replayed code means someone else may hold it: the grant issued from it is revoked.
          const revoked = yield* grants.revoke(developer.id, code.grantId)
          yield* anomalies.replay(developer.id, code.agentId, code.grantId, "code", revoked?.length ?? 0)
          return { error: "Authorization code already used; the grant issued from it has been revoked", replay: { kind: "code", grantId: code.grantId, agentId: code.agentId, revoked: revoked?.length ?? 0 } } as const
        }
        if (code.expiresAt.getTime() <= ms) return { error: "Authorization code expired" } as const
        if (code.agentId !== input.agentId) return { error: "Authorization code was issued to another agent" } as const
        if (code.codeChallenge !== null) {
          if (input.codeVerifier === undefined) return { error: "codeVerifier is required" } as const
          const expected = Buffer.from(code.codeChallenge)
          const given = Buffer.from(createHash("sha256").update(input.codeVerifier).digest("base64url"))
          if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
            return { error: "codeVerifier does not match the code challenge" } as const
          }
        }
        const grant = yield* grants.find(developer.id, code.grantId)
        if (grant === undefined || grant.status !== "active" || grant.expiresAt.getTime() <= ms) {
          yield* sql`UPDATE auth_codes SET used_at = ${new Date(ms)} WHERE code_hash = ${sha256Hex(input.code)}`
          return { error: "The grant is no longer active" } as const
        }
        // decisions §20: a suspended agent gets no tokens (the code stays unused for when it is active
        // again), nor an inactive principal; policies; one unit of the monthly token-exchange quota
        yield* gate.check("code.exchange", {
          developerId: developer.id, agentId: grant.agentId, principalId: grant.principalId, scopes: grant.scopes,
          grant: { id: grant.id, delegationDepth: grant.delegationDepth, parentGrantId: grant.parentGrantId }, meter: "token_exchanges"
        })
        const tokens = yield* issueTokens(grant, ms, sql`UPDATE auth_codes SET used_at = ${new Date(ms)} WHERE code_hash = ${sha256Hex(input.code)}`)
        // decisions §18: issued in the token's transaction; a failure issues nothing
        const issued = yield* credentials.issueFor(grant, { ...wanted, fidoVerifiedAt: code.fidoVerifiedAt })
        return { tokens: { ...tokens, ...issued } } as const
      }).pipe(Effect.catchTag("SqlError", Effect.die))).pipe(
        Effect.catchTag("GrantNoLongerActive", () => Effect.succeed({ error: "The grant is no longer active" } as const))
      )
      if ("replay" in outcome && outcome.replay !== undefined) yield* reportReplay(developer.id, outcome.replay)
      if ("error" in outcome) return yield* Effect.fail(invalidGrant(outcome.error!))
      return outcome.tokens
    })

  const refresh: AuthorizationService["refresh"] = (developer, input) =>
    Effect.gen(function*() {
      // A reuse revokes the grant and must commit even though the request fails (an outcome, not a failure).
      const outcome = yield* gate.transaction(Effect.gen(function*() {
        const ms = yield* nowMillis
        const rows = yield* sql<{ id: string; grantId: string; developerId: string; agentId: string; expiresAt: Date; usedAt: Date | null }>`
          SELECT id, grant_id, developer_id, agent_id, expires_at, used_at FROM refresh_tokens
          WHERE token_hash = ${sha256Hex(input.refreshToken)} AND NOT oauth FOR UPDATE`
        const token = rows[0]
        if (token === undefined || token.developerId !== developer.id) return { error: "Unknown refresh token" } as const
        if (token.usedAt !== null) {
          const revoked = yield* grants.revoke(developer.id, token.grantId)
          yield* anomalies.replay(developer.id, token.agentId, token.grantId, "refresh_token", revoked?.length ?? 0)
          return { error: "Refresh token already used; the grant has been revoked", replay: { kind: "refresh_token", grantId: token.grantId, agentId: token.agentId, revoked: revoked?.length ?? 0 } } as const
        }
        if (token.agentId !== input.agentId) return { error: "Refresh token was issued to another agent" } as const
        if (token.expiresAt.getTime() <= ms) return { error: "Refresh token expired" } as const
        const grant = yield* grants.find(developer.id, token.grantId)
        if (grant === undefined || grant.status !== "active" || grant.expiresAt.getTime() <= ms) {
          yield* sql`UPDATE refresh_tokens SET used_at = ${new Date(ms)} WHERE id = ${token.id}`
          return { error: "The grant is no longer active" } as const
        }
        // decisions §20 (refresh is never blocked by a quota); §13: a policy deny answers INVALID_GRANT,
        // and nothing of a refusal stays: the refresh token is not used up
        yield* gate.check("token.refresh", {
          developerId: developer.id, agentId: grant.agentId, principalId: grant.principalId, scopes: grant.scopes,
          grant: { id: grant.id, delegationDepth: grant.delegationDepth, parentGrantId: grant.parentGrantId }
        }).pipe(Effect.catchTag("PolicyDenied", (denied) => Effect.fail(invalidGrant(denied.message))))
        const bdg = yield* remainingBudget(grant.id)
        return { tokens: yield* issueTokens(grant, ms, sql`UPDATE refresh_tokens SET used_at = ${new Date(ms)} WHERE id = ${token.id}`, bdg) } as const
      }).pipe(Effect.catchTag("SqlError", Effect.die)))
      if ("replay" in outcome && outcome.replay !== undefined) yield* reportReplay(developer.id, outcome.replay)
      if ("error" in outcome) return yield* Effect.fail(invalidGrant(outcome.error!))
      return outcome.tokens
    })

  return { exchangeCode, refresh }
}
