/**
 * Period close (decisions §16, revised) on TestClock: each part of a month is priced at the plan in
 * force then (plan changes are kept with their time); a developer on a plan the plans table lacks
 * makes the close fail loudly (the others invoiced, the month left open with the reason, the
 * command exits with it) and a later close completes once the plan is back; the scheduled close
 * waits an hour after the month ends.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { billingCommands } from "../../src/billing/Commands.ts"
import { closePeriod } from "../../src/billing/Invoices.ts"
import { closeDue } from "../../src/billing/Worker.ts"
import { operatorCommands } from "../../src/operator.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { authorize, count, plansFile } from "./support.ts"

let app: TestApp
const START = Date.parse("2026-11-01T08:00:00.000Z")
const NOVEMBER = new Date(Date.UTC(2026, 10, 1))
const DECEMBER = new Date(Date.UTC(2026, 11, 1))

const env = {
  PLANS_FILE: plansFile({
    free: { name: "Free", limits: { authorizationsPerMonth: 100 }, monthlyFee: 0, currency: "EUR" },
    pro: { name: "Pro", limits: { authorizationsPerMonth: 2 }, monthlyFee: 49.99, currency: "EUR", overage: { authorizations: 1.2345 } },
    team: { name: "Team", limits: { authorizationsPerMonth: 100 }, monthlyFee: 10, currency: "EUR", overage: { authorizations: 0.5 } }
  }),
  RATE_LIMIT_SCALE: "1000",
  RATE_LIMIT_AUTHORIZE_PER_DEVELOPER: "100000"
}

beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: START, env })
})
afterAll(async () => {
  await app?.stop()
})

const setPlan = (developerId: string, plan: string) => app.run(operatorCommands["developers set-plan"]!([developerId, plan], app.config))
const invoicesOf = async (apiKey: string) => (await app.request("GET", "/v1/billing/invoices", { apiKey })).body.invoices

test("a plan change mid-month: each half is priced at its own plan (fee prorated, overage above that part's quota)", async () => {
  const dev = await app.signup({ mode: "sandbox", plan: "pro" })
  const agentId = await createAgent(app, dev.developerId)
  for (let i = 0; i < 5; i++) expect((await authorize(app, dev.apiKey, agentId)).status).toBe(201)
  await app.setTime(Date.parse("2026-11-16T00:00:00.000Z"))
  expect(await setPlan(dev.developerId, "team")).toBe(`developer ${dev.developerId} is now on the team plan`)
  for (let i = 0; i < 3; i++) expect((await authorize(app, dev.apiKey, agentId)).status).toBe(201)
  await app.setTime(Date.parse("2026-12-01T00:00:05.000Z"))
  expect(await app.run(closePeriod(NOVEMBER))).toEqual({ status: "closed", period: "2026-11", invoices: 1 })
  const [invoice] = await invoicesOf(dev.apiKey)
  const firstHalf = { plan: "pro", periodStart: "2026-11-01T00:00:00.000Z", periodEnd: "2026-11-16T00:00:00.000Z" }
  const secondHalf = { plan: "team", periodStart: "2026-11-16T00:00:00.000Z", periodEnd: "2026-12-01T00:00:00.000Z" }
  expect(invoice).toMatchObject({
    plan: "team",
    currency: "EUR",
    lines: [
      // 15 of 30 days: 49.99 / 2 = 24.995
      { kind: "fee", meter: null, quantity: 1, unitPrice: 49.99, amount: 24.995, ...firstHalf },
      // 5 authorizations while on pro, half of its 2 included: 4 × 1.2345 / 1000 = 0.004938 → 0.0049
      { kind: "overage", meter: "authorizations", quantity: 4, unitPrice: 1.2345, amount: 0.0049, ...firstHalf },
      // team: half its fee; 3 authorizations within half of its 100 included
      { kind: "fee", meter: null, quantity: 1, unitPrice: 10, amount: 5, ...secondHalf }
    ],
    total: 29.9999,
    usage: { authorizations: 8 }
  })
  expect(invoice.lines).toHaveLength(3)
  expect((await app.query<{ total: string }>("SELECT total::text AS total FROM invoices WHERE id = $1", [invoice.id]))[0]!.total).toBe("29.9999")
})

test("a developer on a plan the plans table lacks: the close fails loudly, the others are invoiced, a later close completes", async () => {
  const steady = await app.signup({ mode: "sandbox", plan: "pro" })
  const moved = await app.signup({ mode: "sandbox" })
  await app.query(`INSERT INTO plans (code, name, limits, monthly_fee, currency) VALUES ('legacy', 'Legacy', '{}', 31, 'EUR')`)
  await app.query(`UPDATE developers SET plan = 'legacy' WHERE id = $1`, [moved.developerId])
  await app.setTime(Date.parse("2026-12-11T00:00:00.000Z"))
  await setPlan(moved.developerId, "pro")
  // the operator retires the plan nobody is on any more
  await app.query(`DELETE FROM plans WHERE code = 'legacy'`)
  await app.setTime(Date.parse("2027-01-01T00:00:05.000Z"))
  const failed = await app.run(closePeriod(DECEMBER))
  expect(failed).toMatchObject({ status: "failed", period: "2026-12", errors: [`developer ${moved.developerId}: plan "legacy" is not in the plans table`] })
  // not silence: nothing for that developer, the month open with the reason; the others have their invoices
  expect(await invoicesOf(moved.apiKey)).toEqual([])
  expect((await invoicesOf(steady.apiKey)).map((i: any) => i.periodStart)).toContain("2026-12-01T00:00:00.000Z")
  const [period] = await app.query<any>(`SELECT closed_at, last_error, failed_closes FROM billing_periods WHERE period_start = $1`, [DECEMBER])
  expect(period).toEqual({ closedAt: null, lastError: `developer ${moved.developerId}: plan "legacy" is not in the plans table`, failedCloses: 1 })
  await expect(app.run(billingCommands["billing close-period"]!(["--period", "2026-12"], app.config))).rejects.toThrow(
    `2026-12 could not be closed`)
  // the plan is back: the next close invoices the developer, once, and closes the month
  await app.query(`INSERT INTO plans (code, name, limits, monthly_fee, currency) VALUES ('legacy', 'Legacy', '{}', 31, 'EUR')`)
  expect(await app.run(closePeriod(DECEMBER))).toEqual({ status: "closed", period: "2026-12", invoices: 1 })
  const [invoice] = await invoicesOf(moved.apiKey)
  // 10 of 31 days on legacy (31 × 10/31 = 10), 21 on pro (49.99 × 21/31 = 33.8642)
  expect(invoice.lines).toEqual([
    { kind: "fee", meter: null, quantity: 1, unitPrice: 31, amount: 10, plan: "legacy", periodStart: "2026-12-01T00:00:00.000Z", periodEnd: "2026-12-11T00:00:00.000Z" },
    { kind: "fee", meter: null, quantity: 1, unitPrice: 49.99, amount: 33.8642, plan: "pro", periodStart: "2026-12-11T00:00:00.000Z", periodEnd: "2027-01-01T00:00:00.000Z" }
  ])
  expect(await count(app, "SELECT count(*) AS n FROM invoices WHERE period_start = $1", [DECEMBER])).toBe(
    await count(app, "SELECT count(*) AS n FROM developers WHERE created_at < $1", [new Date(Date.UTC(2027, 0, 1))]))
  expect(await app.run(closePeriod(DECEMBER))).toMatchObject({ status: "already-closed" })
})

test("the scheduled close waits an hour after the month ends", async () => {
  const dev = await app.signup({ mode: "sandbox" })
  const january = new Date(Date.UTC(2027, 0, 1))
  await app.setTime(Date.parse("2027-02-01T00:00:05.000Z"))
  expect(await app.run(closeDue)).toEqual({ status: "not-due", period: "2027-01" })
  await app.setTime(Date.parse("2027-02-01T00:59:59.999Z"))
  expect(await app.run(closeDue)).toEqual({ status: "not-due", period: "2027-01" })
  expect(await count(app, "SELECT count(*) AS n FROM invoices WHERE period_start = $1", [january])).toBe(0)
  await app.setTime(Date.parse("2027-02-01T01:00:00.000Z"))
  expect(await app.run(closeDue)).toMatchObject({ status: "closed", period: "2027-01" })
  expect(await count(app, "SELECT count(*) AS n FROM invoices WHERE developer_id = $1 AND period_start = $2", [dev.developerId, january])).toBe(1)
})
