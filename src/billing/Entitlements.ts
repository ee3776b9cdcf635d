/**
 * Entitlements (decisions §16): what a developer's plan allows, in one service.
 * - The plan is read from the cached developer (platform/Auth.ts) and the plans in memory: no query.
 * - Resource caps count the developer's rows under a per-developer advisory lock, in the caller's
 *   transaction, so concurrent creations cannot pass the cap together → 402 PLAN_LIMIT_EXCEEDED.
 * - Monthly quotas: a live counter per developer, meter and month in the counter store, checked and
 *   incremented in one call; far from the ceiling an instance takes small blocks ahead (see `take`),
 *   so most requests make no round trip for it. It is seeded from the durable rows when missing and expires after
 *   QUOTA_RESYNC_MS, so it is rebuilt from the database at least that often (catching tokens issued by
 *   refresh, delegation or bundles, and anything an outage hid). A quota with no overage price is a
 *   hard stop (the free plan) → 402 QUOTA_EXCEEDED; a priced one is billed, never blocked.
 * - Counter store down: the durable count decides (exact but for concurrent requests at the edge).
 * - `billing.quota.threshold` at 80 % and 100 %, once per period: the threshold row's insert decides.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Config } from "../Config.ts"
import type { Developer } from "../platform/Auth.ts"
import { Counters } from "../platform/Counters.ts"
import { PlanLimitExceeded, QuotaExceeded } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { nowMillis } from "../platform/Time.ts"
import { syncPlans } from "./Invoices.ts"
import { LiveCountsLive } from "./LiveCounts.ts"
import { countOne } from "./Meters.ts"
import { type LimitName, type Plan, planOf, periodOf, QUOTA_OF } from "./Plans.ts"
import { NoProviderLive } from "./Provider.ts"

export type QuotaMeter = "authorizations" | "token_exchanges"
export type CapName = "agents" | "webhooks" | "activeGrants" | "policies" | "ssoConnections" | "resourceServers" | "oauthClients"

export const QUOTA_RESYNC_MS = 60_000
/** how long an instance trusts its count of a developer's active grants, below 90 % of the cap */
const ESTIMATE_MS = 5_000
const ESTIMATE_MARGIN = 0.9
const ESTIMATES_MAX = 10_000
/** the most units one instance takes ahead, and how long it may hand them out */
const LEASE_MAX = 32
const LEASE_MS = 2_000

/** rows that count against each cap; `$1` is the developer, `$2` now (typed where unused, so every query takes both) */
export const CAP_SQL: Record<CapName, string> = {
  // clients that registered themselves (OAuth DCR or CIMD, decisions §22.3) are not the developer's agents: anyone
  // may register one, so counting them would let strangers fill the developer's cap
  agents: `SELECT count(*)::int AS n FROM agents a WHERE a.developer_id = $1 AND a.deleted_at IS NULL AND $2::timestamptz IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM oauth_clients c WHERE c.agent_id = a.id AND c.origin <> 'api')`,
  webhooks: "SELECT count(*)::int AS n FROM webhook_endpoints WHERE developer_id = $1 AND kind = 'endpoint' AND deleted_at IS NULL AND $2::timestamptz IS NOT NULL",
  activeGrants: "SELECT count(*)::int AS n FROM grants WHERE developer_id = $1 AND status = 'active' AND expires_at > $2",
  policies: "SELECT count(*)::int AS n FROM policies WHERE developer_id = $1 AND $2::timestamptz IS NOT NULL",
  // checked by the SSO connections service itself, under the developer's row lock it already takes
  ssoConnections: "SELECT count(*)::int AS n FROM sso_connections WHERE developer_id = $1 AND deleted_at IS NULL AND $2::timestamptz IS NOT NULL",
  resourceServers: "SELECT count(*)::int AS n FROM resource_servers WHERE developer_id = $1 AND $2::timestamptz IS NOT NULL",
  // decisions §22.3: the clients that registered themselves, which `agents` leaves out
  oauthClients: `SELECT count(*)::int AS n FROM oauth_clients c JOIN agents a ON a.id = c.agent_id
                   WHERE c.developer_id = $1 AND c.origin <> 'api' AND a.deleted_at IS NULL AND $2::timestamptz IS NOT NULL`
}

const CAP_WORDS: Record<CapName, string> = {
  agents: "agents", webhooks: "webhook endpoints", activeGrants: "active grants", policies: "policies", ssoConnections: "SSO connections",
  resourceServers: "resource servers", oauthClients: "self-registered OAuth clients"
}

export interface EntitlementsService {
  readonly plan: (developer: Pick<Developer, "plan">) => Plan
  /**
   * One unit of the monthly quota (authorize and code exchange; never refresh), taken inside the
   * point's transaction (decisions §20): `giveBack` returns it when that transaction fails, and
   * `notify` records a threshold crossed, once the transaction ended (a rolled-back one cannot lose
   * it); `refusal` when the quota is used up.
   */
  readonly admit: (developer: Pick<Developer, "id" | "plan">, meter: QuotaMeter) => Effect.Effect<QuotaUnit>
  /**
   * For a cap on things made later from a request (active grants: a consent request or delegation
   * asks for one now, the grant is made at approval): refuses when the developer is at the cap.
   * Counted exactly near the cap; far from it an instance's recent count (a few seconds old) decides,
   * so a busy developer's requests do not each count its grants.
   */
  readonly belowCap: (developer: Pick<Developer, "id" | "plan">, cap: "activeGrants") => Effect.Effect<void, PlanLimitExceeded>
  /** runs `create` in a transaction only if the developer is below the plan's cap */
  readonly withinCap: <A, E, R>(
    developer: Pick<Developer, "id" | "plan">,
    cap: CapName,
    create: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | PlanLimitExceeded, R>
}

export interface QuotaUnit {
  readonly giveBack: Effect.Effect<void>
  readonly notify: Effect.Effect<void>
  /** the quota is used up (a plan that stops at 100 %): nothing was taken */
  readonly refusal?: QuotaExceeded
}

const NOTHING: QuotaUnit = { giveBack: Effect.void, notify: Effect.void }

export class Entitlements extends Context.Tag("agent-auth/Entitlements")<Entitlements, EntitlementsService>() {}

export const EntitlementsLive = Layer.effect(
  Entitlements,
  Effect.gen(function*() {
    const config = yield* Config
    const counters = yield* Counters
    const sql = yield* SqlClient.SqlClient
    const events = yield* Events
    /** thresholds this process knows are recorded (the table decides across instances) */
    const noted = new Set<string>()
    /** counters that missed admissions while the store was away: raised from the database on return */
    const stale = new Set<string>()

    const plan = (developer: Pick<Developer, "plan">) => planOf(config.plans, developer.plan)

    const threshold = (developerId: string, meter: QuotaMeter, start: Date, label: string, pct: 80 | 100) =>
      Effect.gen(function*() {
        const memo = `${developerId}:${meter}:${label}:${pct}`
        if (noted.has(memo)) return
        const at = new Date(yield* nowMillis)
        yield* sql.withTransaction(Effect.gen(function*() {
          const rows = yield* sql`INSERT INTO billing_thresholds (developer_id, meter, period_start, pct, created_at)
            VALUES (${developerId}, ${meter}, ${start}, ${pct}, ${at}) ON CONFLICT DO NOTHING RETURNING pct`
          if (rows.length > 0) yield* events.emit(developerId, "billing.quota.threshold", { meter, pct, period: label })
        }))
        noted.add(memo)
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("quota threshold not recorded", cause)))

    /** units this instance took from the store ahead and hands out without a round trip */
    const leases = new Map<string, { units: number; top: number; until: number; keyExpiresAt: number }>()
    /** the store's count at this instance's last call, per counter (sizes the next block) */
    const lastCount = new Map<string, number>()
    const refund = (key: string, units: number) =>
      Effect.runFork(counters.quotaSeed(key, units, 0, "refund").pipe(Effect.ignore))

    /**
     * One unit of quota: from this instance's lease if it holds one, else from the store, taking a
     * block of up to LEASE_MAX units while far from the ceiling (1/64 of what is left, so near it
     * every request asks the store and the ceiling is exact). A lease lives LEASE_MS and never past
     * the counter (so a re-seeded counter cannot miss units still leased); unused units go back.
     */
    const take = (key: string, ceiling: number, durable: Effect.Effect<number>) =>
      Effect.gen(function*() {
        const lease = leases.get(key)
        const realNow = Date.now()
        if (lease !== undefined) {
          if (lease.units > 0 && lease.until > realNow) {
            lease.units--
            return { count: lease.top - lease.units, added: true, stored: true }
          }
          leases.delete(key)
          if (lease.units > 0 && realNow < lease.keyExpiresAt - 500) refund(key, lease.units)
        }
        const known = lastCount.get(key)
        const want = known === undefined ? 1 : Math.max(1, Math.min(LEASE_MAX, Math.floor((ceiling - known) / 64)))
        const live = Effect.gen(function*() {
          if (stale.has(key)) {
            yield* counters.quotaSeed(key, yield* durable, QUOTA_RESYNC_MS, "max")
            stale.delete(key)
          }
          let hit = yield* counters.quotaHit(key, ceiling, want)
          if (hit.missing) {
            yield* counters.quotaSeed(key, yield* durable, QUOTA_RESYNC_MS, "nx")
            hit = yield* counters.quotaHit(key, ceiling, want)
          }
          if (hit.missing) return { count: yield* durable, added: true, stored: false }
          if (lastCount.size > 100_000) lastCount.clear()
          lastCount.set(key, hit.count)
          if (hit.granted === 0) return { count: hit.count, added: false, stored: false }
          const spare = hit.granted - 1
          if (spare > 0) {
            const until = Math.min(realNow + LEASE_MS, realNow + hit.ttlMs - 1_000)
            const held = leases.get(key)
            // concurrent requests of this instance may each have taken a block: keep every unit
            if (held !== undefined && held.until > Date.now()) {
              held.units += spare
              held.top = Math.max(held.top, hit.count)
            } else if (until > realNow) {
              if (held !== undefined && held.units > 0 && Date.now() < held.keyExpiresAt - 500) refund(key, held.units)
              leases.set(key, { units: spare, top: hit.count, until, keyExpiresAt: realNow + hit.ttlMs })
            } else refund(key, spare)
          }
          return { count: hit.count - spare, added: true, stored: true }
        })
        return yield* live.pipe(
          Effect.catchTag("CounterStoreUnavailable", () =>
            Effect.map(durable, (n) => {
              stale.add(key)
              return n >= ceiling ? { count: n, added: false, stored: false } : { count: n + 1, added: true, stored: false }
            }))
        )
      })

    const admit: EntitlementsService["admit"] = (developer, meter) =>
      Effect.gen(function*() {
        const p = plan(developer)
        const limit = p.limits[QUOTA_OF[meter]!]
        if (limit === null) return NOTHING
        const blocks = p.overage[meter] === undefined
        const ms = yield* nowMillis
        const period = periodOf(ms)
        const key = `${counters.prefix}quota:${developer.id}:${meter}:${period.label}`
        const durable = countOne(meter, developer.id, period.start, period.end).pipe(
          Effect.provideService(SqlClient.SqlClient, sql),
          Effect.orDie
        )
        // a paid plan is never blocked: its counter only has to notice the thresholds
        const ceiling = blocks ? limit : Number.MAX_SAFE_INTEGER
        const result = yield* take(key, ceiling, durable)
        const notify = Effect.all([
          result.count >= Math.ceil(limit * 0.8) ? threshold(developer.id, meter, period.start, period.label, 80) : Effect.void,
          result.count >= limit ? threshold(developer.id, meter, period.start, period.label, 100) : Effect.void
        ], { discard: true })
        if (!result.added) {
          const what = meter === "authorizations" ? "authorizations" : "token exchanges"
          return {
            giveBack: Effect.void,
            notify,
            refusal: new QuotaExceeded({ message: `The ${p.name} plan includes ${limit} ${what} a month; the quota for ${period.label} is used up` })
          }
        }
        // a unit counted by the store goes back to it; one the database counted (store down) is the rolled-back row itself
        const giveBack = result.stored ? counters.quotaSeed(key, 1, 0, "refund").pipe(Effect.ignore) : Effect.void
        return { giveBack, notify }
      })

    const withinCap: EntitlementsService["withinCap"] = (developer, cap, create) => {
      const limit = plan(developer).limits[cap as LimitName]
      if (limit === null) return create
      return sql.withTransaction(Effect.gen(function*() {
        // one creator at a time per developer and cap, on every instance, until this commits
        yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`cap:${cap}:${developer.id}`}))`.pipe(Effect.orDie)
        const at = new Date(yield* nowMillis)
        const [row] = yield* sql.unsafe<{ n: number }>(CAP_SQL[cap], [developer.id, at] as any).pipe(Effect.orDie)
        if ((row?.n ?? 0) >= limit) {
          return yield* Effect.fail(new PlanLimitExceeded({ message: `The ${plan(developer).name} plan allows ${limit} ${CAP_WORDS[cap]}` }))
        }
        return yield* create
      })).pipe(Effect.catchTag("SqlError" as any, Effect.die)) as any
    }

    // developer id → its active grants as last counted here, plus the requests admitted since
    const estimates = new Map<string, { n: number; until: number }>()
    const belowCap: EntitlementsService["belowCap"] = (developer, cap) =>
      Effect.gen(function*() {
        const p = plan(developer)
        const limit = p.limits[cap]
        if (limit === null) return
        const hit = estimates.get(developer.id)
        // each admitted request counts as a grant until the next count, so the estimate only errs upwards
        if (hit !== undefined && hit.until > Date.now() && hit.n < limit * ESTIMATE_MARGIN) {
          hit.n++
          return
        }
        const [row] = yield* sql.unsafe<{ n: number }>(CAP_SQL[cap], [developer.id, new Date(yield* nowMillis)] as any).pipe(Effect.orDie)
        const n = Number(row?.n ?? 0)
        if (estimates.size >= ESTIMATES_MAX) estimates.clear()
        estimates.set(developer.id, { n: n + 1, until: Date.now() + ESTIMATE_MS })
        if (n >= limit) {
          return yield* Effect.fail(new PlanLimitExceeded({
            message: `The ${p.name} plan allows ${limit} ${CAP_WORDS[cap]}; revoke some or let them expire`
          }))
        }
      })

    return { plan, admit, withinCap, belowCap }
  })
)

/** Billing's services: entitlements, the (empty) provider port, and the configured plans written to `plans`. */
export const BillingLive = Layer.mergeAll(
  EntitlementsLive,
  LiveCountsLive,
  NoProviderLive,
  Layer.effectDiscard(Effect.flatMap(Config, (config) => syncPlans(config.plans)).pipe(Effect.orDie))
)
