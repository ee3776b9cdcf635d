/**
 * Detection passes under the shared lease (decisions §14, revised; platform/Leases.ts): each
 * developer is claimed by its own lease just before its pass, renewed while the pass runs, so a pass
 * slower than the lease is never run a second time by another instance (TestClock; the pass is made
 * slow by an Anomalies service whose detect waits on the clock). Real PostgreSQL: a second app on the
 * same database; embedded: a second round in the same app.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { Effect } from "effect"
import { Anomalies } from "../../src/anomalies/Service.ts"
import { LEASE_KIND, LEASE_MS, runDuePasses } from "../../src/anomalies/Worker.ts"
import { startTestApp, type TestApp, usingRealServers } from "../support/app.ts"
import { clockNow, ENV, START, tenant } from "./support.ts"
import { waitFor } from "../support/wait.ts"

let app: TestApp
let second: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: START, env: ENV })
  second = usingRealServers ? await startTestApp({ testClock: true, startTime: START, env: ENV, databaseUrl: app.databaseUrl }) : app
})
afterAll(async () => {
  if (second !== app) await second?.stop()
  await app?.stop()
})

/** a round whose passes each take `ms` on the Effect Clock, recording which developers they ran for */
const recordingRound = (ran: Array<string>, ms: number) =>
  runDuePasses.pipe(Effect.provideServiceEffect(Anomalies, Effect.map(Anomalies, (real) => ({
    ...real,
    detect: (developerId: string) =>
      Effect.sync(() => ran.push(developerId)).pipe(
        Effect.zipRight(Effect.sleep(`${ms} millis`)),
        Effect.as({ detectedAt: new Date(0), alerts: [], autoRevokedGrants: 0 })
      )
  }))))

test("a pass slower than its lease keeps it: another instance never runs that developer's pass at once", async () => {
  const t = await tenant(app)
  // every other developer has just been passed over; this one is due
  await app.run(runDuePasses)
  const now = await clockNow(app)
  await app.query(`UPDATE anomaly_runs SET next_run_at = $2 WHERE developer_id = $1`, [t.developerId, new Date(now - 1)])
  const first: Array<string> = []
  const slow = app.run(recordingRound(first, 3 * LEASE_MS))
  expect(await waitFor(async () => first.includes(t.developerId))).toBe(true)
  const leaseUntil = async () =>
    new Date((await app.query<any>(`SELECT lease_until FROM leases WHERE kind = $1 AND key = $2`, [LEASE_KIND, t.developerId]))[0]?.leaseUntil ?? 0).getTime()
  const others: Array<string> = []
  for (let passed = 0; passed < 2.5 * LEASE_MS; passed += LEASE_MS / 6) {
    await app.adjust(`${LEASE_MS / 6} millis`)
    const at = await clockNow(app)
    // the renewal due at this moment (every third of the lease) is written before the other instance looks
    await waitFor(async () => (await leaseUntil()) - at > (2 * LEASE_MS) / 3 - 1, 100)
    await second.setTime(at)
    await second.run(recordingRound(others, 0))
  }
  expect(others).not.toContain(t.developerId)
  await app.adjust(`${LEASE_MS} millis`)
  expect(await slow).toBeGreaterThanOrEqual(1)
  expect(first.filter((d) => d === t.developerId)).toHaveLength(1)
  // released, and the next pass is an interval after this one ended
  const [lease] = await app.query(`SELECT holder, lease_until, attempts FROM leases WHERE kind = $1 AND key = $2`, [LEASE_KIND, t.developerId])
  expect(lease).toEqual({ holder: null, leaseUntil: null, attempts: 0 })
})

test("a pass that fails is logged, its lease released with the error, and the developer waits for the next interval", async () => {
  const t = await tenant(app)
  await app.run(runDuePasses)
  const now = await clockNow(app)
  await app.query(`UPDATE anomaly_runs SET next_run_at = $2 WHERE developer_id = $1`, [t.developerId, new Date(now - 1)])
  const failing = runDuePasses.pipe(Effect.provideServiceEffect(Anomalies, Effect.map(Anomalies, (real) => ({
    ...real,
    detect: (developerId: string) => developerId === t.developerId ? Effect.die(new Error("the pass broke")) : real.detect(developerId)
  }))))
  await app.run(failing)
  const [lease] = await app.query(`SELECT holder, attempts, last_error FROM leases WHERE kind = $1 AND key = $2`, [LEASE_KIND, t.developerId])
  expect(lease).toMatchObject({ holder: null, attempts: 1, lastError: expect.stringContaining("the pass broke") })
  const [run] = await app.query(`SELECT next_run_at FROM anomaly_runs WHERE developer_id = $1`, [t.developerId])
  expect(new Date(run.nextRunAt).getTime()).toBe(now + 300_000)
})
