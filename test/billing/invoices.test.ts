/**
 * Period close (decisions §16): only an ended month closes; closing is idempotent and happens once
 * across instances (one invoice per developer); quantities are the durable counts; money is
 * numeric(20,4) computed by SQL; the fiber closes the month after it ends on the Effect Clock; the
 * developer reads invoices over the API; an operator marks one paid.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { billingCommands } from "../../src/billing/Commands.ts"
import { Effect, Layer } from "effect"
import { closePeriod } from "../../src/billing/Invoices.ts"
import { WorkerLive } from "../../src/billing/Worker.ts"
import { startTestApp, type TestApp, usingRealServers } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { authorize, count, exchange, plansFile } from "./support.ts"

let app: TestApp
let second: TestApp | undefined
const START = Date.parse("2026-11-20T10:00:00.000Z")
const NOVEMBER = new Date(Date.UTC(2026, 10, 1))

const env = {
  PLANS_FILE: plansFile({
    free: { name: "Free", limits: { authorizationsPerMonth: 100 }, monthlyFee: 0 },
    pro: {
      name: "Pro",
      limits: { authorizationsPerMonth: 2, tokenExchangesPerMonth: null },
      monthlyFee: 49.99,
      currency: "EUR",
      overage: { authorizations: 1.2345, token_exchanges: 0.5 }
    }
  }),
  RATE_LIMIT_SCALE: "1000",
  RATE_LIMIT_AUTHORIZE_PER_DEVELOPER: "100000"
}

beforeAll(async () => {
  // only the billing fiber is started (in the fiber test): the other fibers replay every interval a jump skips
  app = await startTestApp({ testClock: true, startTime: START, env })
  // a second instance on the same database (a real PostgreSQL server only)
  if (usingRealServers) second = await startTestApp({ testClock: true, startTime: START, databaseUrl: app.databaseUrl, env })
})
afterAll(async () => {
  await second?.stop()
  await app?.stop()
})

test("a month closes once across instances, with SQL-priced lines, read back over the API", async () => {
  const pro = await app.signup({ mode: "sandbox", plan: "pro" })
  const free = await app.signup({ mode: "sandbox" })
  const proAgent = await createAgent(app, pro.developerId)
  const freeAgent = await createAgent(app, free.developerId)
  const codes: Array<string> = []
  for (let i = 0; i < 5; i++) codes.push((await authorize(app, pro.apiKey, proAgent)).body.code)
  for (const code of codes.slice(0, 3)) expect((await exchange(app, pro.apiKey, proAgent, code)).status).toBe(201)
  for (let i = 0; i < 2; i++) expect((await authorize(app, free.apiKey, freeAgent)).status).toBe(201)

  // November has not ended
  expect((await app.run(closePeriod(NOVEMBER))).status).toBe("not-ended")
  await expect(app.run(billingCommands["billing close-period"]!(["--period", "2026-11"], app.config))).rejects.toThrow("has not ended")

  await app.setTime(Date.parse("2026-12-01T00:00:05.000Z"))
  await second?.setTime(Date.parse("2026-12-01T00:00:05.000Z"))
  const closers = [app, second ?? app, app, second ?? app]
  const outcomes = await Promise.all(closers.map((a) => a.run(closePeriod(NOVEMBER))))
  expect(outcomes.filter((o) => o.status === "closed")).toHaveLength(1)
  expect(outcomes.filter((o) => o.status === "closed")[0]).toMatchObject({ invoices: 2 })
  for (const o of outcomes) expect(["closed", "busy", "already-closed"]).toContain(o.status)
  expect(await count(app, "SELECT count(*) AS n FROM invoices WHERE period_start = $1", [NOVEMBER])).toBe(2)
  // closing again changes nothing
  expect(await app.run(closePeriod(NOVEMBER))).toEqual({ status: "already-closed", period: "2026-11", invoices: 2 })

  const list = await app.request("GET", "/v1/billing/invoices", { apiKey: pro.apiKey })
  expect(list.status).toBe(200)
  expect(list.body.invoices).toHaveLength(1)
  const invoice = list.body.invoices[0]
  // one plan all month: each line prices the whole period at it
  const wholeMonth = { plan: "pro", periodStart: "2026-11-01T00:00:00.000Z", periodEnd: "2026-12-01T00:00:00.000Z" }
  expect(invoice).toEqual({
    id: expect.stringMatching(/^inv_/),
    plan: "pro",
    periodStart: "2026-11-01T00:00:00.000Z",
    periodEnd: "2026-12-01T00:00:00.000Z",
    status: "open",
    currency: "EUR",
    lines: [
      { kind: "fee", meter: null, quantity: 1, unitPrice: 49.99, amount: 49.99, ...wholeMonth },
      // 5 authorizations, 2 included: 3 × 1.2345 / 1000 = 0.0037035 → 0.0037
      { kind: "overage", meter: "authorizations", quantity: 3, unitPrice: 1.2345, amount: 0.0037, ...wholeMonth },
      // no included exchanges (null): all 3 at 0.5 / 1000 = 0.0015
      { kind: "overage", meter: "token_exchanges", quantity: 3, unitPrice: 0.5, amount: 0.0015, ...wholeMonth }
    ],
    total: 49.9952,
    usage: { authorizations: 5, token_exchanges: 3, vault_exchanges: 0, offline_entries: 0, active_agents: 1, active_grants: 5 },
    issuedAt: "2026-12-01T00:00:05.000Z",
    paidAt: null
  })
  // exact decimal in the database, not a float
  expect((await app.query<{ total: string }>("SELECT total::text AS total FROM invoices WHERE id = $1", [invoice.id]))[0]!.total).toBe("49.9952")
  expect((await app.request("GET", `/v1/billing/invoices/${invoice.id}`, { apiKey: pro.apiKey })).body).toEqual(invoice)
  // another developer's invoice is not found
  expect((await app.request("GET", `/v1/billing/invoices/${invoice.id}`, { apiKey: free.apiKey })).status).toBe(404)
  const freeInvoice = (await app.request("GET", "/v1/billing/invoices", { apiKey: free.apiKey })).body.invoices[0]
  expect([freeInvoice.total, freeInvoice.lines, freeInvoice.usage.authorizations]).toEqual([
    0, [{ kind: "fee", meter: null, quantity: 1, unitPrice: 0, amount: 0, ...wholeMonth, plan: "free" }], 2
  ])
  // one billing.invoice.created per invoice
  expect(await count(app, "SELECT count(*) AS n FROM events WHERE type = 'billing.invoice.created'", [])).toBe(2)

  expect(await app.run(billingCommands["billing mark-paid"]!([invoice.id], app.config))).toBe(`invoice ${invoice.id} is paid`)
  const paid = (await app.request("GET", `/v1/billing/invoices/${invoice.id}`, { apiKey: pro.apiKey })).body
  expect([paid.status, paid.paidAt]).toEqual(["paid", "2026-12-01T00:00:05.000Z"])
})

test("the fiber closes a month after it ends, on the Effect Clock", async () => {
  await app.run(Effect.forkDaemon(Layer.launch(WorkerLive)))
  const dev = await app.signup({ mode: "sandbox" })
  const agentId = await createAgent(app, dev.developerId)
  expect((await authorize(app, dev.apiKey, agentId)).status).toBe(201)
  expect(await count(app, "SELECT count(*) AS n FROM invoices WHERE developer_id = $1", [dev.developerId])).toBe(0)
  await app.setTime(Date.parse("2027-01-01T00:00:00.000Z"))
  let invoices = 0
  for (let i = 0; i < 200 && invoices === 0; i++) {
    // each step passes one interval of the fiber, whenever it scheduled its sleep
    if (i % 10 === 0) await app.adjust("11 minutes")
    invoices = await count(app, "SELECT count(*) AS n FROM invoices WHERE developer_id = $1 AND period_start = $2", [dev.developerId, new Date(Date.UTC(2026, 11, 1))])
    if (invoices === 0) await Bun.sleep(50)
  }
  if (invoices !== 1) console.log(await app.query("SELECT * FROM billing_periods"), await app.query("SELECT id, created_at FROM developers"))
  expect(invoices).toBe(1)
  const summary = await app.request("GET", "/v1/usage/summary?period=2026-12", { apiKey: dev.apiKey })
  expect(summary.body.meters.authorizations).toBe(1)
  expect((await app.request("GET", "/v1/usage/summary?period=2026-13", { apiKey: dev.apiKey })).status).toBe(400)
})
