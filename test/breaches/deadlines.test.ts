/** The Board-deadline fiber on TestClock across 72 hours, and on two instances. */
import { expect, test } from "bun:test"
import { alertDeadlines } from "../../src/breaches/Worker.ts"
import { startTestApp, usingRealPostgres, type TestApp } from "../support/app.ts"

const T0 = Date.parse("2026-11-22T10:00:00.000Z")
const env = { DPDP_BREACH_DEADLINE_ALERTS_ENABLED: "true", DPDP_BREACH_ALERT_INTERVAL_SECONDS: "300" }

const alerts = (app: TestApp, breachId: string) =>
  app.query<{ data: any }>(
    "SELECT data FROM events WHERE type = 'dpdp.breach.board_report_due' AND data->>'breachId' = $1 ORDER BY created_at, id",
    [breachId]
  ).then((rows) => rows.map((r) => `${r.data.stage}@${r.data.boardDetailedReportDueAt}`))

/**
 * The alerts once the fiber has caught up: its pass after a clock step runs on its own, and on a
 * loaded machine it can still be running when the step returns (seen in CI). Waits until the alerts
 * are `expected` (up to 20 s of real time), then asserts them.
 */
const expectAlerts = async (app: TestApp, breachId: string, expected: ReadonlyArray<string>) => {
  const until = performance.now() + 20_000
  let seen = await alerts(app, breachId)
  while (JSON.stringify(seen) !== JSON.stringify(expected) && performance.now() < until) {
    await Bun.sleep(20)
    seen = await alerts(app, breachId)
  }
  expect(seen).toEqual([...expected])
}

/** moves the clock in steps so the fiber's 5-minute polls run along the way */
const advance = async (app: TestApp, hours: number) => {
  for (let h = 0; h < hours; h++) {
    await app.adjust("1 hour")
    await Bun.sleep(5)
  }
  await Bun.sleep(50)
}

test("approaching once, overdue once, silence after the report, re-alerted after an extension", async () => {
  // the fiber polls hourly here, so 100+ hours of TestClock take a second; the other workers' polls
  // are put past the test's span (each hour step ran all of them: 87 s under CI's load)
  const app = await startTestApp({ testClock: true, startTime: T0, workers: true, env: { ...env, DPDP_BREACH_ALERT_INTERVAL_SECONDS: "3600", WEBHOOK_POLL_INTERVAL_SECONDS: "3600000", COMPLIANCE_JOB_POLL_SECONDS: "3600000", ANOMALY_INTERVAL_SECONDS: "3600000", DPDP_FIBER_INTERVAL_SECONDS: "3600000" } })
  try {
    const { apiKey } = await app.signup({ plan: "enterprise" })
    const body = { description: "d", nature: "n", extent: "e", affectedDataPrincipalIds: ["p-secret"] }
    const a = (await app.request("POST", "/v1/dpdp/breaches", { apiKey, body })).body.breachId
    const b = (await app.request("POST", "/v1/dpdp/breaches", { apiKey, body })).body.breachId
    const due = "2026-11-25T10:00:00.000Z"
    await advance(app, 47)
    expect(await alerts(app, a)).toEqual([]) // 25 h before the due time: not yet
    await advance(app, 2)
    await expectAlerts(app, a, [`approaching@${due}`])
    await advance(app, 10)
    await expectAlerts(app, a, [`approaching@${due}`])
    // b's detailed report goes out: nothing more for it
    await app.request("PATCH", `/v1/dpdp/breaches/${b}`, { apiKey, body: { status: "initial_intimated" } })
    await app.request("PATCH", `/v1/dpdp/breaches/${b}`, {
      apiKey,
      body: { status: "reported", detailedReport: { updatedDetails: "u", factsCircumstancesReasons: "f", mitigation: "m", causeFindings: "c", remedialMeasures: "r" } }
    })
    await advance(app, 14)
    await expectAlerts(app, a, [`approaching@${due}`, `overdue@${due}`])
    await expectAlerts(app, b, [`approaching@${due}`])
    await advance(app, 24)
    await expectAlerts(app, a, [`approaching@${due}`, `overdue@${due}`])
    // an extension moves the deadline: both stages are alerted afresh for the new due time
    const newDue = new Date(T0 + (97 + 30) * 3600_000).toISOString()
    await app.request("PATCH", `/v1/dpdp/breaches/${a}`, { apiKey, body: { extension: { granted: true, newDueAt: newDue } } })
    await advance(app, 7)
    await expectAlerts(app, a, [`approaching@${due}`, `overdue@${due}`, `approaching@${newDue}`])
    await advance(app, 24)
    await expectAlerts(app, a, [`approaching@${due}`, `overdue@${due}`, `approaching@${newDue}`, `overdue@${newDue}`])
    const payloads = await app.query<{ data: any }>("SELECT data FROM events WHERE type = 'dpdp.breach.board_report_due'")
    expect(payloads[0]!.data).toEqual({ breachId: a, stage: "approaching", overdue: false, boardDetailedReportDueAt: due })
    expect(JSON.stringify(payloads)).not.toContain("p-secret")
    const audited = await app.query("SELECT id FROM audit_log WHERE action = 'service.dpdp.breach_deadline_alerted'")
    expect(audited).toHaveLength(5)
  } finally {
    await app.stop()
  }
}, 120_000)

test("a breach first seen past its due time gets only the overdue alert", async () => {
  const app = await startTestApp({ testClock: true, startTime: T0, env })
  try {
    const { apiKey } = await app.signup()
    const awareAt = new Date(T0 - 100 * 3600_000).toISOString()
    const id = (await app.request("POST", "/v1/dpdp/breaches", { apiKey, body: { description: "d", nature: "n", extent: "e", affectedCount: 1, awareAt } })).body.breachId
    await app.run(alertDeadlines)
    await app.run(alertDeadlines)
    expect((await alerts(app, id)).map((s) => s.split("@")[0])).toEqual(["overdue"])
  } finally {
    await app.stop()
  }
})

test.skipIf(!usingRealPostgres)("two fibers on one database alert once", async () => {
  const one = await startTestApp({ testClock: true, startTime: T0, env })
  const two = await startTestApp({ testClock: true, startTime: T0, env, databaseUrl: one.databaseUrl })
  try {
    const { apiKey } = await one.signup()
    const awareAt = new Date(T0 - 71 * 3600_000).toISOString()
    const ids = []
    for (let i = 0; i < 20; i++) {
      ids.push((await one.request("POST", "/v1/dpdp/breaches", { apiKey, body: { description: "d", nature: "n", extent: "e", affectedCount: 1, awareAt } })).body.breachId)
    }
    await Promise.all([one.run(alertDeadlines), two.run(alertDeadlines), one.run(alertDeadlines), two.run(alertDeadlines)])
    const rows = await one.query<{ n: number }>("SELECT count(*)::int AS n FROM events WHERE type = 'dpdp.breach.board_report_due'")
    expect(rows[0]!.n).toBe(20)
  } finally {
    await two.stop()
    await one.stop()
  }
})
