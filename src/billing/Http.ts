import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { Api } from "../Api.ts"
import { Config } from "../Config.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { BadRequest, NotFound, ServiceUnavailable } from "../platform/Errors.ts"
import { encodeCursor, pageParams } from "../platform/Pagination.ts"
import { nowMillis } from "../platform/Time.ts"
import { CAP_SQL, Entitlements } from "./Entitlements.ts"
import { readInvoices } from "./Invoices.ts"
import { LiveCounts } from "./LiveCounts.ts"
import { daily, measure, emptyUsage } from "./Meters.ts"
import { LIMIT_NAMES, type LimitName, type Meter, METERS, type Plan, parsePeriod, periodOf, QUOTA_OF } from "./Plans.ts"
import { Provider } from "./Provider.ts"

const notConfigured = () => new ServiceUnavailable({ message: "Billing provider not configured" })

const isHttpUrl = (raw: string) => {
  try {
    const url = new URL(raw)
    return url.protocol === "https:" || url.protocol === "http:"
  } catch {
    return false
  }
}

const planView = (p: Plan) => ({
  code: p.code,
  name: p.name,
  limits: { ...p.limits },
  monthlyFee: Number(p.monthlyFee),
  currency: p.currency,
  overage: Object.fromEntries(Object.entries(p.overage).map(([k, v]) => [k, Number(v)]))
})


const DAY_MS = 86_400_000

/** the plan limit that bounds a meter: its monthly quota, or the cap on what it counts the peak of */
const METER_LIMIT: Partial<Record<Meter, LimitName>> = { ...QUOTA_OF, active_agents: "agents", active_grants: "activeGrants" }

export const BillingHttp = HttpApiBuilder.group(Api, "billing", (handlers) =>
  Effect.gen(function*() {
    const config = yield* Config
    const sql = yield* SqlClient.SqlClient
    const entitlements = yield* Entitlements
    const provider = yield* Provider
    const liveCounts = yield* LiveCounts
    const run = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
      effect.pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.catchTag("SqlError" as any, Effect.die)) as Effect.Effect<A, Exclude<E, { _tag: "SqlError" }>>
    return handlers
      .handle("plans", () => Effect.succeed({ plans: Object.values(config.plans).map(planView) }))
      .handle("entitlements", () =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const plan = entitlements.plan(developer)
          const ms = yield* nowMillis
          const period = periodOf(ms)
          const metered = (yield* run(measure(period.start, period.end, developer.id))).get(developer.id) ?? emptyUsage()
          const used: Record<string, number> = {
            authorizationsPerMonth: metered.authorizations,
            tokenExchangesPerMonth: metered.token_exchanges
          }
          for (const [name, text] of Object.entries(CAP_SQL)) {
            const [row] = yield* run(sql.unsafe<{ n: number }>(text, [developer.id, new Date(ms)] as any))
            used[name] = row?.n ?? 0
          }
          const usage: Record<string, { used: number; limit: number | null; pct: number | null; estimated?: boolean }> = {}
          const entry = (n: number, limit: number | null) =>
            ({ used: n, limit, pct: limit === null ? null : limit === 0 ? 100 : Math.round((n / limit) * 10000) / 100 })
          for (const name of LIMIT_NAMES) {
            if (used[name] !== undefined) usage[name] = entry(used[name]!, plan.limits[name])
          }
          // every meter of the period by its own name (decisions §16), with the limit that bounds it if any
          for (const meter of METERS) {
            const limit = METER_LIMIT[meter]
            usage[meter] = entry(metered[meter], limit === undefined ? null : plan.limits[limit])
          }
          const verified = yield* liveCounts.daily(developer.id, "verifications", period.start, period.end)
          usage.verifications = { ...entry([...verified.values()].reduce((a, b) => a + b, 0), null), estimated: true }
          return { plan: plan.code, limits: { ...plan.limits }, usage, periodStart: period.start.toISOString(), periodEnd: period.end.toISOString() }
        }))
      .handle("subscription", () =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const period = periodOf(yield* nowMillis)
          // without a provider every developer's plan is active until an operator changes it
          return {
            plan: entitlements.plan(developer).code,
            status: "active" as const,
            currentPeriodStart: period.start.toISOString(),
            currentPeriodEnd: period.end.toISOString(),
            cancelAtPeriodEnd: false
          }
        }))
      .handle("checkout", ({ payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          if (config.plans[payload.plan] === undefined || payload.plan === "free") {
            return yield* Effect.fail(new BadRequest({ message: `plan must be one of ${Object.keys(config.plans).filter((c) => c !== "free").join(", ")}` }))
          }
          if (!isHttpUrl(payload.successUrl)) return yield* Effect.fail(new BadRequest({ message: "successUrl must be an absolute http(s) URL" }))
          if (!isHttpUrl(payload.cancelUrl)) return yield* Effect.fail(new BadRequest({ message: "cancelUrl must be an absolute http(s) URL" }))
          if (Option.isNone(provider)) return yield* Effect.fail(notConfigured())
          return yield* provider.value.checkout(developer.id, payload).pipe(Effect.mapError(() => notConfigured()))
        }))
      .handle("portal", ({ payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          if (!isHttpUrl(payload.returnUrl)) return yield* Effect.fail(new BadRequest({ message: "returnUrl must be an absolute http(s) URL" }))
          if (Option.isNone(provider)) return yield* Effect.fail(notConfigured())
          return yield* provider.value.portal(developer.id, payload).pipe(Effect.mapError(() => notConfigured()))
        }))
      .handle("invoices", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const { limit, cursor } = yield* pageParams(urlParams)
          const rows = yield* run(readInvoices(developer.id, { limit: limit + 1, ...(cursor ? { after: cursor } : {}) }))
          const page = rows.slice(0, limit)
          const last = page[page.length - 1]
          return {
            invoices: page.map(({ createdAt: _, ...view }) => view),
            nextCursor: rows.length > limit && last ? encodeCursor({ createdAt: last.createdAt, id: last.id }) : null
          }
        }))
      .handle("invoice", ({ path }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const [row] = yield* run(readInvoices(developer.id, { id: path.id }))
          if (row === undefined) return yield* Effect.fail(new NotFound({ message: "Invoice not found" }))
          const { createdAt: _, ...view } = row
          return view
        }))
      .handle("usage", () =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const ms = yield* nowMillis
          const start = new Date(Math.floor(ms / DAY_MS) * DAY_MS)
          const day = start.toISOString().slice(0, 10)
          const end = new Date(start.getTime() + DAY_MS)
          const counts = (yield* run(daily(developer.id, start, end))).get(day)
          const verifications = (yield* liveCounts.daily(developer.id, "verifications", start, end)).get(day) ?? 0
          return {
            developerId: developer.id,
            period: day,
            tokenExchanges: counts?.tokenExchanges ?? 0,
            authorizations: counts?.authorizations ?? 0,
            verifications,
            vaultExchanges: counts?.vaultExchanges ?? 0,
            offlineEntries: counts?.offlineEntries ?? 0,
            totalRequests: (counts?.totalRequests ?? 0) + verifications
          }
        }))
      .handle("usageHistory", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const raw = urlParams.days ?? "30"
          if (!/^\d{1,3}$/.test(raw) || Number(raw) < 1 || Number(raw) > 90) {
            return yield* Effect.fail(new BadRequest({ message: "days must be an integer from 1 to 90" }))
          }
          const days = Number(raw)
          const ms = yield* nowMillis
          const end = new Date(Math.floor(ms / DAY_MS) * DAY_MS + DAY_MS)
          const start = new Date(end.getTime() - days * DAY_MS)
          const counts = yield* run(daily(developer.id, start, end))
          const verified = yield* liveCounts.daily(developer.id, "verifications", start, end)
          const entries = []
          for (let t = end.getTime() - DAY_MS; t >= start.getTime(); t -= DAY_MS) {
            const date = new Date(t).toISOString().slice(0, 10)
            const c = counts.get(date)
            const verifications = verified.get(date) ?? 0
            entries.push({
              date,
              tokenExchanges: c?.tokenExchanges ?? 0,
              authorizations: c?.authorizations ?? 0,
              verifications,
              vaultExchanges: c?.vaultExchanges ?? 0,
              offlineEntries: c?.offlineEntries ?? 0,
              totalRequests: (c?.totalRequests ?? 0) + verifications
            })
          }
          return { developerId: developer.id, days, entries }
        }))
      .handle("usageSummary", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const period = urlParams.period === undefined ? periodOf(yield* nowMillis) : parsePeriod(urlParams.period)
          if (period === undefined) return yield* Effect.fail(new BadRequest({ message: "period must look like YYYY-MM" }))
          const usage = (yield* run(measure(period.start, period.end, developer.id))).get(developer.id) ?? emptyUsage()
          const verified = yield* liveCounts.daily(developer.id, "verifications", period.start, period.end)
          return {
            developerId: developer.id,
            period: period.label,
            periodStart: period.start.toISOString(),
            periodEnd: period.end.toISOString(),
            meters: { ...usage, verifications: [...verified.values()].reduce((a, b) => a + b, 0) }
          }
        }))
  }))

export const BillingProviderHttp = HttpApiBuilder.group(Api, "billingProvider", (handlers) =>
  Effect.gen(function*() {
    const provider = yield* Provider
    return handlers.handle("webhook", () =>
      // the adapter will verify the signature over the raw body and deduplicate by event id
      Option.isNone(provider) ? Effect.fail(notConfigured()) : Effect.fail(notConfigured()))
  }))
