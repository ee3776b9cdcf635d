/**
 * The detection fiber (decisions §14): every ANOMALY_INTERVAL_SECONDS on TestClock it passes over
 * each developer once; each developer's pass is claimed by its own lease (platform/Leases.ts), so two
 * instances on one database (real PostgreSQL) raise each alert once; concurrent passes on one
 * instance do too; a lease left by a crashed instance is taken over once it runs out.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { LEASE_KIND, runDuePasses } from "../../src/anomalies/Worker.ts"
import { startTestApp, type TestApp, usingRealServers } from "../support/app.ts"
import { auditRows, bundleRow, clockNow, ENV, eventsOf, grant, ruleAlerts, START, tenant } from "./support.ts"

let app: TestApp
let second: TestApp | undefined
beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: START, workers: true, env: ENV })
  // a second instance on the same database, its fiber running too (a real PostgreSQL server only)
  if (usingRealServers) second = await startTestApp({ testClock: true, startTime: START, workers: true, env: ENV, databaseUrl: app.databaseUrl })
})
afterAll(async () => {
  await second?.stop()
  await app?.stop()
})

const both = async (f: (a: TestApp) => Promise<void>) => {
  await f(app)
  if (second !== undefined) await f(second)
}

test("the fiber raises a stale bundle's alert within one interval, once, across instances", async () => {
  const t = await tenant(app)
  const g = await grant(app, t)
  await bundleRow(app, t, g.id, START - 71.5 * 3_600_000)
  await both((a) => a.adjust("5 minutes"))
  expect(await ruleAlerts(app, t, "AD-010")).toEqual([])
  await both((a) => a.adjust("1 hour"))
  // a little real time for the fibers' rounds to finish (up to 20 s: a loaded machine runs them late)
  for (let i = 0; i < 1000 && (await ruleAlerts(app, t, "AD-010")).length === 0; i++) await Bun.sleep(20)
  await Bun.sleep(100)
  expect(await ruleAlerts(app, t, "AD-010")).toMatchObject([{ occurrences: 1 }])
  await both((a) => a.adjust("10 minutes"))
  await Bun.sleep(100)
  expect(await ruleAlerts(app, t, "AD-010")).toMatchObject([{ occurrences: 1 }])
  expect((await eventsOf(app, t, "anomaly.detected")).filter((e) => e.ruleId === "AD-010")).toHaveLength(1)
  const [run] = await app.query(`SELECT last_run_at, next_run_at FROM anomaly_runs WHERE developer_id = $1`, [t.developerId])
  const [lease] = await app.query(`SELECT holder, lease_until FROM leases WHERE kind = $1 AND key = $2`, [LEASE_KIND, t.developerId])
  expect(lease).toEqual({ holder: null, leaseUntil: null })
  expect(new Date(run.nextRunAt).getTime() - new Date(run.lastRunAt).getTime()).toBe(300_000)
})

test("concurrent passes (both instances, twice each) raise one alert per fingerprint", async () => {
  const t = await tenant(app)
  await auditRows(app, t, 51, await clockNow(app))
  const instances = [app, second ?? app, app, second ?? app]
  // every developer is due now
  await app.query(`UPDATE anomaly_runs SET next_run_at = '2000-01-01'`)
  const claimed = await Promise.all(instances.map((a) => a.run(runDuePasses)))
  expect(claimed.reduce((n, c) => n + c, 0)).toBeGreaterThanOrEqual(1)
  const found = await ruleAlerts(app, t, "rate_spike")
  expect(found).toMatchObject([{ occurrences: 1 }])
  expect((await eventsOf(app, t, "anomaly.detected")).filter((e) => e.ruleId === "rate_spike")).toHaveLength(1)
})

test("a developer leased by an instance that died is passed over until the lease runs out, then taken", async () => {
  const t = await tenant(app)
  const ms = await clockNow(app)
  await auditRows(app, t, 51, ms)
  await app.query(`INSERT INTO anomaly_runs (developer_id, next_run_at) VALUES ($1, $2)
                   ON CONFLICT (developer_id) DO UPDATE SET next_run_at = $2`, [t.developerId, new Date(ms - 1000)])
  await app.query(`INSERT INTO leases (kind, key, holder, lease_until, attempts, updated_at) VALUES ($1, $2, 'a-dead-instance', $3, 1, $3)`,
    [LEASE_KIND, t.developerId, new Date(ms + 100_000)])
  await app.run(runDuePasses)
  expect(await ruleAlerts(app, t, "rate_spike")).toEqual([])
  await app.query(`UPDATE leases SET lease_until = $3 WHERE kind = $1 AND key = $2`, [LEASE_KIND, t.developerId, new Date(ms - 1)])
  await app.run(runDuePasses)
  expect(await ruleAlerts(app, t, "rate_spike")).toHaveLength(1)
})
