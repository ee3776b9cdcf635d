/**
 * The part of anomaly detection other capabilities call (decisions §14): `raise` (open an alert or
 * count one more occurrence, emit `anomaly.detected`, respond in enforce mode) and the inline rules,
 * which run in the transaction that sees the event: scope probing (AD-002), mass revocation (AD-006),
 * suspended-agent use (AD-008), replay (AD-009), registration flood (AD-012, decisions §22.9), and
 * the network sightings AD-003 reads later.
 *
 * It sits below grants and agents (grants calls it when it revokes) and above the agent suspension
 * and the one revocation path, through which its enforce-mode responses act (Responses.ts). A
 * signal never fails its caller: it runs in a savepoint, and an error is logged and rolled back
 * alone. Each developer's settings and rules are cached for CACHE_MS (a change on this instance
 * drops the entry at once).
 */
import { HttpServerRequest } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import { AgentSuspension } from "../agents/Suspension.ts"
import { Config } from "../Config.ts"
import { RevocationPath } from "../grants/Revocation.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { clientAddress, PeerAddress } from "../platform/RateLimit.ts"
import { nowMillis } from "../platform/Time.ts"
import { allowMatcher, networkOf } from "./Network.ts"
import { type AlertRow, makeRepo, type RaiseInput, type Settings } from "./Repo.ts"
import { makeResponder } from "./Responses.ts"
import { type EffectiveRule, effectiveRules } from "./Rules.ts"

const CACHE_MS = 30_000
/** a (developer, agent, network) sighting is written at most once an hour per instance */
const SIGHTING_REFRESH_MS = 3_600_000
const SIGHTINGS_MAX = 100_000

export interface DeveloperView {
  readonly settings: Settings
  readonly rules: ReadonlyArray<EffectiveRule>
  readonly rule: (ruleId: string) => EffectiveRule | undefined
  readonly allowed: (address: string | undefined) => boolean
}

/** what a rule saw: the alert's input without what the rule itself and the moment supply */
export interface Detection extends Omit<RaiseInput, "id" | "ruleId" | "ruleName" | "severity" | "now"> {
  readonly rule: EffectiveRule
}

export interface AnomalyCoreService {
  readonly view: (developerId: string) => Effect.Effect<DeveloperView>
  readonly changed: (developerId: string) => void
  /** opens or counts the alert (undefined when nothing new was seen), in the caller's transaction */
  readonly raise: (d: Detection) => Effect.Effect<(AlertRow & { readonly revokedNow?: ReadonlyArray<string> }) | undefined>
  /** the address of the request being served, if any */
  readonly requestAddress: Effect.Effect<string | undefined>
  readonly scopeRefused: (developerId: string, agentId: string, code: "INVALID_SCOPES" | "SCOPE_ESCALATION") => Effect.Effect<void>
  readonly grantsRevoked: (developerId: string, grantIds: ReadonlyArray<string>) => Effect.Effect<void>
  readonly suspendedAgentUse: (developerId: string, agentId: string, grantId: string, where: string) => Effect.Effect<void>
  readonly replay: (developerId: string, agentId: string, grantId: string, kind: "code" | "refresh_token", revokedGrants: number) => Effect.Effect<void>
  readonly tokenUsed: (developerId: string, agentId: string) => Effect.Effect<void>
  /** a client registered itself at the developer's OAuth issuer (DCR), from the request's address */
  readonly clientRegistered: (developerId: string, agentId: string) => Effect.Effect<void>
}

export class AnomalyCore extends Context.Tag("agent-auth/AnomalyCore")<AnomalyCore, AnomalyCoreService>() {}

export const AnomalyCoreLive = Layer.effect(
  AnomalyCore,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const events = yield* Events
    const config = yield* Config
    const repo = makeRepo(sql)
    const respond = makeResponder({ repo, events, revocation: yield* RevocationPath, suspension: yield* AgentSuspension })
    const cache = new Map<string, { view: DeveloperView; until: number }>()
    const sightings = new Map<string, number>()

    const view = (developerId: string) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const hit = cache.get(developerId)
        if (hit !== undefined && hit.until > ms) return hit.view
        const settings = yield* repo.settings(developerId)
        const rules = effectiveRules(yield* repo.ruleRows(developerId))
        const byId = new Map(rules.map((r) => [r.ruleId, r]))
        const v: DeveloperView = { settings, rules, rule: (id) => byId.get(id), allowed: allowMatcher(settings.allowList) }
        if (cache.size > 10_000) cache.clear()
        cache.set(developerId, { view: v, until: ms + CACHE_MS })
        return v
      }).pipe(Effect.orDie)

    const raise = (d: Detection) =>
      Effect.gen(function*() {
        const at = new Date(yield* nowMillis)
        const alert = yield* repo.upsertAlert({
          id: newId("anm", at.getTime()), developerId: d.developerId, ruleId: d.rule.ruleId, ruleName: d.rule.name,
          severity: d.rule.severity, subject: d.subject, agentId: d.agentId, principalId: d.principalId,
          description: d.description, context: d.context, evidenceAt: d.inline ? at : d.evidenceAt, inline: d.inline, now: at
        })
        if (alert === undefined) return undefined
        yield* events.emit(d.developerId, "anomaly.detected", {
          alertId: alert.id, ruleId: alert.ruleId, severity: alert.severity, agentId: alert.agentId, occurrences: alert.occurrences
        })
        const { settings } = yield* view(d.developerId)
        // an alert responds once, when it opens: a further occurrence counts, it does not suspend or revoke again
        if (!alert.inserted) return alert
        if (settings.mode !== "enforce" || d.rule.response === "alert") return alert
        const outcome = yield* respond(alert, d.rule)
        if (outcome.response === "none") return alert
        yield* repo.setResponse(alert.id, outcome.response, outcome.refs)
        return {
          ...alert,
          response: outcome.response,
          responseRefs: [...new Set([...alert.responseRefs, ...outcome.refs])],
          revokedNow: outcome.response === "revoked_grants" ? outcome.refs : []
        }
      }).pipe(Effect.orDie)

    const requestAddress = Effect.zipWith(
      Effect.serviceOption(HttpServerRequest.HttpServerRequest),
      Effect.serviceOption(PeerAddress),
      (request, peerAddress) => {
        const peer = Option.getOrUndefined(peerAddress) ??
          (Option.isSome(request) ? Option.getOrUndefined(request.value.remoteAddress) : undefined)
        if (peer === undefined && Option.isNone(request)) return undefined
        const forwarded = Option.isSome(request) ? request.value.headers["x-forwarded-for"] : undefined
        return clientAddress(config.trustProxy, peer, forwarded)
      }
    )

    /**
     * Runs an inline rule for an active developer whose request is not allow-listed, in a savepoint
     * of the caller's transaction (or a transaction of its own); failures are logged, never raised.
     */
    const inline = (developerId: string, ruleId: string, body: (rule: EffectiveRule, ms: number) => Effect.Effect<unknown, unknown>) =>
      Effect.gen(function*() {
        const v = yield* view(developerId)
        const rule = v.rule(ruleId)
        if (v.settings.mode === "off" || rule === undefined || !rule.enabled) return
        if (v.allowed(yield* requestAddress)) return
        yield* sql.withTransaction(Effect.flatMap(nowMillis, (ms) => body(rule, ms)))
      }).pipe(
        Effect.catchAllCause((cause) =>
          Effect.logWarning("anomaly rule failed").pipe(Effect.annotateLogs({ ruleId, cause: String(cause).slice(0, 300) })))
      )

    const detection = (developerId: string, rule: EffectiveRule, agentId: string | null, subject: string, description: string, context: Record<string, unknown>): Detection => ({
      developerId, rule, subject, agentId, principalId: null, description, context, evidenceAt: new Date(0), inline: true
    })

    const scopeRefused: AnomalyCoreService["scopeRefused"] = (developerId, agentId, code) =>
      inline(developerId, "AD-002", (rule, ms) =>
        Effect.gen(function*() {
          const windowMs = (rule.threshold.windowMinutes ?? 10) * 60_000
          yield* repo.q(`INSERT INTO anomaly_signals (developer_id, agent_id, kind, created_at) VALUES ($1, $2, 'scope_refused', $3)`,
            [developerId, agentId, new Date(ms)])
          const [row] = yield* repo.q<{ n: number }>(
            `SELECT count(*)::int AS n FROM anomaly_signals
             WHERE developer_id = $1 AND kind = 'scope_refused' AND agent_id = $2 AND created_at > $3`,
            [developerId, agentId, new Date(ms - windowMs)]
          )
          if (row!.n < (rule.threshold.count ?? 3)) return
          yield* raise(detection(developerId, rule, agentId, agentId,
            `${row!.n} scope refusals (${code}) for agent ${agentId} within ${windowMs / 60_000} minutes`,
            { refusals: row!.n, lastCode: code, windowMinutes: windowMs / 60_000 }))
        }))

    const grantsRevoked: AnomalyCoreService["grantsRevoked"] = (developerId, grantIds) =>
      inline(developerId, "AD-006", (rule, ms) =>
        Effect.gen(function*() {
          const windowSeconds = rule.threshold.windowSeconds ?? 60
          const [row] = yield* repo.q<{ n: number }>(
            `SELECT count(*)::int AS n FROM grants WHERE developer_id = $1 AND revoked_at > $2 AND revoked_at IS NOT NULL`,
            [developerId, new Date(ms - windowSeconds * 1000)]
          )
          if (row!.n <= (rule.threshold.count ?? 5)) return
          yield* raise(detection(developerId, rule, null, "developer",
            `${row!.n} grants revoked within ${windowSeconds} seconds`,
            { revokedInWindow: row!.n, windowSeconds, grantIds: grantIds.slice(0, 20) }))
        }))

    const suspendedAgentUse: AnomalyCoreService["suspendedAgentUse"] = (developerId, agentId, grantId, where) =>
      inline(developerId, "AD-008", (rule) =>
        raise(detection(developerId, rule, agentId, agentId,
          `A token of suspended or deleted agent ${agentId} was presented (${where})`, { grantId, where })))

    const replay: AnomalyCoreService["replay"] = (developerId, agentId, grantId, kind, revokedGrants) =>
      inline(developerId, "AD-009", (rule) =>
        raise(detection(developerId, rule, agentId, agentId,
          kind === "code" ? `Authorization code replayed for agent ${agentId}; its grant was revoked` : `Refresh token reused for agent ${agentId}; its grant was revoked`,
          { kind, grantId, revokedGrants })))

    // the token paths' one check: a Map lookup once this instance wrote the (agent, network) this hour
    const tokenUsed: AnomalyCoreService["tokenUsed"] = (developerId, agentId) =>
      Effect.flatMap(requestAddress, (address) => {
        const network = address === undefined ? undefined : networkOf(address)
        if (network === undefined) return Effect.void
        const key = `${developerId}|${agentId}|${network}`
        return Effect.flatMap(nowMillis, (ms) => {
          const last = sightings.get(key)
          if (last !== undefined && ms - last < SIGHTING_REFRESH_MS && ms >= last) return Effect.void
          return recordSighting(developerId, agentId, network, key, ms)
        })
      })

    const recordSighting = (developerId: string, agentId: string, network: string, key: string, ms: number) =>
      Effect.gen(function*() {
        yield* inline(developerId, "AD-003", (rule) =>
          repo.q(
            `INSERT INTO anomaly_networks (developer_id, agent_id, network, first_seen_at, last_seen_at) VALUES ($1, $2, $3, $4, $4)
             ON CONFLICT (developer_id, agent_id, network) DO UPDATE SET
               first_seen_at = CASE WHEN anomaly_networks.last_seen_at < $5 THEN EXCLUDED.first_seen_at ELSE anomaly_networks.first_seen_at END,
               last_seen_at = greatest(anomaly_networks.last_seen_at, EXCLUDED.last_seen_at)`,
            [developerId, agentId, network, new Date(ms), new Date(ms - (rule.threshold.days ?? 30) * 86_400_000)]
          ))
        if (sightings.size >= SIGHTINGS_MAX) sightings.clear()
        sightings.set(key, ms)
      })

    // AD-012: the registration and its network counted, in the registration's transaction; the
    // developer-wide count and the network's each raise their own alert
    const clientRegistered: AnomalyCoreService["clientRegistered"] = (developerId, agentId) =>
      Effect.flatMap(requestAddress, (address) => {
        const network = address === undefined ? null : networkOf(address) ?? null
        return inline(developerId, "AD-012", (rule, ms) =>
          Effect.gen(function*() {
            const windowMinutes = rule.threshold.windowMinutes ?? 10
            const since = new Date(ms - windowMinutes * 60_000)
            yield* repo.q(`INSERT INTO anomaly_signals (developer_id, agent_id, kind, network, created_at) VALUES ($1, $2, 'client_registered', $3, $4)`,
              [developerId, agentId, network, new Date(ms)])
            const [row] = yield* repo.q<{ total: number; fromNetwork: number }>(
              `SELECT count(*)::int AS total, (count(*) FILTER (WHERE network = $3))::int AS from_network FROM anomaly_signals
               WHERE developer_id = $1 AND kind = 'client_registered' AND created_at > $2`,
              [developerId, since, network]
            )
            const context = { registrations: row!.total, fromNetwork: row!.fromNetwork, network, windowMinutes, lastClientId: agentId }
            if (row!.total > (rule.threshold.developerCount ?? 50)) {
              yield* raise(detection(developerId, rule, null, "registrations",
                `${row!.total} dynamic client registrations within ${windowMinutes} minutes`, context))
            }
            if (network !== null && row!.fromNetwork > (rule.threshold.networkCount ?? 10)) {
              yield* raise(detection(developerId, rule, null, network,
                `${row!.fromNetwork} dynamic client registrations from ${network} within ${windowMinutes} minutes`, context))
            }
          }))
      })

    return {
      view,
      changed: (developerId) => void cache.delete(developerId),
      raise,
      requestAddress,
      scopeRefused,
      grantsRevoked,
      suspendedAgentUse,
      replay,
      tokenUsed,
      clientRegistered
    }
  })
)

/** Benchmarks only: the same service with every inline rule a no-op (and no alert ever raised). */
export const AnomalyCoreDisabled = Layer.succeed(AnomalyCore, {
  view: () => Effect.succeed({ settings: { mode: "off", allowList: [], offHours: null, updatedAt: null }, rules: [], rule: () => undefined, allowed: () => false }),
  changed: () => {},
  raise: () => Effect.succeed(undefined),
  requestAddress: Effect.succeed(undefined),
  scopeRefused: () => Effect.void,
  grantsRevoked: () => Effect.void,
  suspendedAgentUse: () => Effect.void,
  replay: () => Effect.void,
  tokenUsed: () => Effect.void,
  clientRegistered: () => Effect.void
})
