import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { amountProblem, toUnits } from "../../src/budgets/Amount.ts"
import { crossedThresholds } from "../../src/budgets/Service.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"

let app: TestApp
let dev: { apiKey: string; developerId: string }
let other: { apiKey: string; developerId: string }
let agentId: string

beforeAll(async () => {
  app = await startTestApp()
  dev = await app.signup({ plan: "enterprise" })
  other = await app.signup({ plan: "enterprise" })
  agentId = await createAgent(app, dev.developerId)
}, 120_000)
afterAll(async () => {
  await app.stop()
}, 120_000)

const newGrant = async (developerId = dev.developerId, agent = agentId) =>
  (await issueGrant(app, { developerId, agentId: agent, scopes: ["email:read"] })).grant.id

const allocate = (body: unknown, apiKey = dev.apiKey) => app.request("POST", "/v1/budget/allocate", { apiKey, body })
const debit = (body: unknown, apiKey = dev.apiKey) => app.request("POST", "/v1/budget/debit", { apiKey, body })
const eventsOf = (developerId: string, grantId: string) =>
  app.query<{ type: string; data: any }>(
    `SELECT type, data FROM events WHERE developer_id = $1 AND type LIKE 'budget.%' AND data->>'grantId' = $2 ORDER BY created_at, id`,
    [developerId, grantId]
  )

describe("POST /v1/budget/allocate", () => {
  test("201 BudgetAllocation; remainingBudget equals initialBudget; currency defaults to USD", async () => {
    const grantId = await newGrant()
    const res = await allocate({ grantId, initialBudget: 25.5 })
    expect(res.status).toBe(201)
    expect(res.body).toEqual({
      id: expect.stringMatching(/^bdg_[0-9A-Z]{26}$/),
      grantId,
      initialBudget: 25.5,
      remainingBudget: 25.5,
      currency: "USD",
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    })
    const rows = await app.query(`SELECT initial_budget::text AS i, remaining_budget::text AS r, currency, developer_id FROM budget_allocations WHERE grant_id = $1`, [grantId])
    expect(rows).toEqual([{ i: "25.5000", r: "25.5000", currency: "USD", developerId: dev.developerId }])
  })

  test("a given currency is kept", async () => {
    const res = await allocate({ grantId: await newGrant(), initialBudget: 1000, currency: "EUR" })
    expect(res.status).toBe(201)
    expect(res.body.currency).toBe("EUR")
  })

  test("400 BAD_REQUEST: grantId missing", async () => {
    const res = await allocate({ initialBudget: 10 })
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("BAD_REQUEST")
  })

  test.each([0, -1, -0.5, "10", null, 0.00001, 1.23456, 1e12])("400 BAD_REQUEST: initialBudget %p", async (initialBudget) => {
    const grantId = await newGrant()
    const res = await allocate({ grantId, initialBudget })
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("BAD_REQUEST")
    expect(await app.query(`SELECT 1 FROM budget_allocations WHERE grant_id = $1`, [grantId])).toHaveLength(0)
  })

  test("400 BAD_REQUEST: initialBudget missing", async () => {
    const res = await allocate({ grantId: await newGrant() })
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("BAD_REQUEST")
  })

  test("401 UNAUTHORIZED without or with a bad key", async () => {
    const grantId = await newGrant()
    const none = await app.request("POST", "/v1/budget/allocate", { body: { grantId, initialBudget: 1 } })
    expect(none.status).toBe(401)
    expect(none.body.code).toBe("UNAUTHORIZED")
    const bad = await allocate({ grantId, initialBudget: 1 }, "sk_live_" + "x".repeat(43))
    expect(bad.status).toBe(401)
    expect(bad.body.code).toBe("UNAUTHORIZED")
  })

  test("404 NOT_FOUND: unknown grant, and another developer's grant", async () => {
    const unknown = await allocate({ grantId: "grnt_01ARZ3NDEKTSV4RRFFQ69G5FAV", initialBudget: 1 })
    expect(unknown.status).toBe(404)
    expect(unknown.body.code).toBe("NOT_FOUND")
    const grantId = await newGrant()
    const foreign = await allocate({ grantId, initialBudget: 1 }, other.apiKey)
    expect(foreign.status).toBe(404)
    expect(foreign.body.code).toBe("NOT_FOUND")
  })

  test("409 CONFLICT: one allocation per grant (also under concurrency)", async () => {
    const grantId = await newGrant()
    const results = await Promise.all(Array.from({ length: 5 }, () => allocate({ grantId, initialBudget: 10 })))
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409])
    expect(results.find((r) => r.status === 409)!.body.code).toBe("CONFLICT")
    const again = await allocate({ grantId, initialBudget: 99 })
    expect(again.status).toBe(409)
    expect(again.body.code).toBe("CONFLICT")
    expect(await app.query(`SELECT 1 FROM budget_allocations WHERE grant_id = $1`, [grantId])).toHaveLength(1)
  })
})

describe("POST /v1/budget/debit", () => {
  test("debits exactly, without float drift", async () => {
    const grantId = await newGrant()
    await allocate({ grantId, initialBudget: 1 })
    const remaining: Array<number> = []
    for (let i = 0; i < 3; i++) {
      const res = await debit({ grantId, amount: 0.1, description: `call ${i}` })
      expect(res.status).toBe(200)
      expect(res.body).toEqual({ remaining: expect.any(Number), transactionId: expect.stringMatching(/^btx_/), grantId })
      remaining.push(res.body.remaining)
    }
    expect(remaining).toEqual([0.9, 0.8, 0.7]) // 1 - 0.1 - 0.1 - 0.1 in floating point is 0.7000000000000001
    const balance = await app.request("GET", `/v1/budget/balance/${grantId}`, { apiKey: dev.apiKey })
    expect(balance.status).toBe(200)
    expect(balance.body).toMatchObject({ grantId, initialBudget: 1, remainingBudget: 0.7, spent: 0.3, currency: "USD" })
  })

  test("402 INSUFFICIENT_BUDGET when the amount exceeds what remains; nothing is debited", async () => {
    const grantId = await newGrant()
    await allocate({ grantId, initialBudget: 5 })
    expect((await debit({ grantId, amount: 4.9999 })).body.remaining).toBe(0.0001)
    const res = await debit({ grantId, amount: 0.0002 })
    expect(res.status).toBe(402)
    expect(res.body.code).toBe("INSUFFICIENT_BUDGET")
    const rows = await app.query(`SELECT remaining_budget::text AS r FROM budget_allocations WHERE grant_id = $1`, [grantId])
    expect(rows[0].r).toBe("0.0001")
    expect(await app.query(`SELECT 1 FROM budget_transactions WHERE grant_id = $1`, [grantId])).toHaveLength(1)
    expect((await debit({ grantId, amount: 0.0001 })).body.remaining).toBe(0)
    const empty = await debit({ grantId, amount: 0.0001 })
    expect(empty.status).toBe(402)
    expect(empty.body.code).toBe("INSUFFICIENT_BUDGET")
  })

  test.each([
    ["grantId missing", { amount: 1 }],
    ["amount missing", { grantId: "x" }],
    ["zero", { grantId: "x", amount: 0 }],
    ["negative", { grantId: "x", amount: -3 }],
    ["more than 4 decimals", { grantId: "x", amount: 0.00005 }],
    ["too large", { grantId: "x", amount: 1e21 }],
    ["string", { grantId: "x", amount: "1" }],
    ["description too long", { grantId: "x", amount: 1, description: "d".repeat(1001) }],
    ["metadata not an object", { grantId: "x", amount: 1, metadata: "nope" }]
  ])("400 BAD_REQUEST: %s", async (_, body) => {
    const res = await debit(body)
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("BAD_REQUEST")
  })

  test("404 NOT_FOUND: no allocation, or another developer's", async () => {
    const grantId = await newGrant()
    const none = await debit({ grantId, amount: 1 })
    expect(none.status).toBe(404)
    expect(none.body.code).toBe("NOT_FOUND")
    await allocate({ grantId, initialBudget: 10 })
    const foreign = await debit({ grantId, amount: 1 }, other.apiKey)
    expect(foreign.status).toBe(404)
    expect(foreign.body.code).toBe("NOT_FOUND")
    expect((await app.request("GET", `/v1/budget/balance/${grantId}`, { apiKey: other.apiKey })).status).toBe(404)
    expect((await app.request("GET", `/v1/budget/transactions/${grantId}`, { apiKey: other.apiKey })).status).toBe(404)
  })

  test("409 GRANT_NOT_ACTIVE once the grant is revoked", async () => {
    const grantId = await newGrant()
    await allocate({ grantId, initialBudget: 10 })
    await app.query(`UPDATE grants SET status = 'revoked', revoked_at = now() WHERE id = $1`, [grantId])
    const res = await debit({ grantId, amount: 1 })
    expect(res.status).toBe(409)
    expect(res.body.code).toBe("GRANT_NOT_ACTIVE")
    expect((await app.request("GET", `/v1/budget/balance/${grantId}`, { apiKey: dev.apiKey })).body.remainingBudget).toBe(10)
  })

  test("401 UNAUTHORIZED without a key", async () => {
    const res = await app.request("POST", "/v1/budget/debit", { body: { grantId: "x", amount: 1 } })
    expect(res.status).toBe(401)
    expect(res.body.code).toBe("UNAUTHORIZED")
  })

  test("100 concurrent debits never overdraw", async () => {
    const grantId = await newGrant()
    await allocate({ grantId, initialBudget: 50 })
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => debit({ grantId, amount: 1, metadata: { i } })))
    const ok = results.filter((r) => r.status === 200)
    const refused = results.filter((r) => r.status === 402)
    expect(ok).toHaveLength(50)
    expect(refused).toHaveLength(50)
    expect(refused.every((r) => r.body.code === "INSUFFICIENT_BUDGET")).toBe(true)
    // every successful debit saw a distinct balance: 49 … 0
    expect(ok.map((r) => r.body.remaining).sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i))
    const rows = await app.query(`SELECT remaining_budget::text AS r FROM budget_allocations WHERE grant_id = $1`, [grantId])
    expect(rows[0].r).toBe("0.0000")
    const tx = await app.query(`SELECT count(*)::int AS n, sum(amount)::text AS s FROM budget_transactions WHERE grant_id = $1`, [grantId])
    expect(tx[0]).toEqual({ n: 50, s: "50.0000" })
    const events = await eventsOf(dev.developerId, grantId)
    expect(events).toEqual([
      { type: "budget.threshold", data: { grantId, pct: 50 } },
      { type: "budget.threshold", data: { grantId, pct: 80 } },
      { type: "budget.exhausted", data: { grantId } }
    ])
  })
})

describe("budget events", () => {
  test("budget.threshold once per crossing of 50% and 80%, then budget.exhausted", async () => {
    const grantId = await newGrant()
    await allocate({ grantId, initialBudget: 100 })
    await debit({ grantId, amount: 30 }) // 30%
    expect(await eventsOf(dev.developerId, grantId)).toEqual([])
    await debit({ grantId, amount: 19.9999 }) // 49.9999%
    expect(await eventsOf(dev.developerId, grantId)).toEqual([])
    await debit({ grantId, amount: 0.0001 }) // exactly 50%
    expect(await eventsOf(dev.developerId, grantId)).toEqual([{ type: "budget.threshold", data: { grantId, pct: 50 } }])
    await debit({ grantId, amount: 10 }) // 60%: no new crossing
    await debit({ grantId, amount: 25 }) // 85%
    await debit({ grantId, amount: 5 }) // 90%
    expect(await eventsOf(dev.developerId, grantId)).toEqual([
      { type: "budget.threshold", data: { grantId, pct: 50 } },
      { type: "budget.threshold", data: { grantId, pct: 80 } }
    ])
    expect((await debit({ grantId, amount: 11 })).status).toBe(402) // refused: no event
    await debit({ grantId, amount: 10 }) // 100%
    expect((await eventsOf(dev.developerId, grantId)).map((e) => e.type)).toEqual([
      "budget.threshold", "budget.threshold", "budget.exhausted"
    ])
  })

  test("one debit crossing both lines emits both, in order", async () => {
    const grantId = await newGrant()
    await allocate({ grantId, initialBudget: 10 })
    await debit({ grantId, amount: 9 })
    expect(await eventsOf(dev.developerId, grantId)).toEqual([
      { type: "budget.threshold", data: { grantId, pct: 50 } },
      { type: "budget.threshold", data: { grantId, pct: 80 } }
    ])
  })

  test("events reach subscribed webhook endpoints through the outbox, in the debit's transaction", async () => {
    await app.query(
      `INSERT INTO webhook_endpoints (id, developer_id, url, events, secret_ciphertext, created_at)
       VALUES ('wh_BUDGETTEST', $1, 'http://127.0.0.1:9/hook', ARRAY['budget.exhausted'], 'x', now())`,
      [other.developerId]
    )
    const agent = await createAgent(app, other.developerId)
    const grantId = await newGrant(other.developerId, agent)
    await allocate({ grantId, initialBudget: 2 }, other.apiKey)
    await debit({ grantId, amount: 2 }, other.apiKey)
    const rows = await app.query(
      `SELECT e.type, d.status FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
       WHERE d.endpoint_id = 'wh_BUDGETTEST' AND e.data->>'grantId' = $1`,
      [grantId]
    )
    expect(rows).toEqual([{ type: "budget.exhausted", status: "pending" }])
  })
})

describe("GET /v1/budget/balance and /transactions", () => {
  test("balance 404 NOT_FOUND without allocation; 401 without key", async () => {
    const grantId = await newGrant()
    const res = await app.request("GET", `/v1/budget/balance/${grantId}`, { apiKey: dev.apiKey })
    expect(res.status).toBe(404)
    expect(res.body.code).toBe("NOT_FOUND")
    expect((await app.request("GET", `/v1/budget/balance/${grantId}`)).status).toBe(401)
  })

  test("transactions newest first with a cursor; no row skipped or repeated", async () => {
    const grantId = await newGrant()
    await allocate({ grantId, initialBudget: 100 })
    const ids: Array<string> = []
    for (let i = 1; i <= 7; i++) {
      ids.push((await debit({ grantId, amount: i, description: `d${i}`, metadata: { n: i } })).body.transactionId)
    }
    const seen: Array<any> = []
    let cursor: string | null = null
    do {
      const res: any = await app.request("GET", `/v1/budget/transactions/${grantId}?limit=3${cursor ? `&cursor=${cursor}` : ""}`, { apiKey: dev.apiKey })
      expect(res.status).toBe(200)
      seen.push(...res.body.transactions)
      cursor = res.body.nextCursor
    } while (cursor !== null)
    expect(seen.map((t) => t.id)).toEqual([...ids].reverse())
    expect(seen[0]).toEqual({
      id: ids[6], grantId, amount: 7, remaining: 72, description: "d7", metadata: { n: 7 },
      createdAt: expect.stringMatching(/Z$/)
    })
    expect(seen[6].remaining).toBe(99)
  })

  test("transactions: 400 BAD_REQUEST for a malformed cursor or limit; 404 without allocation", async () => {
    const grantId = await newGrant()
    await allocate({ grantId, initialBudget: 1 })
    const badCursor = await app.request("GET", `/v1/budget/transactions/${grantId}?cursor=%%%`, { apiKey: dev.apiKey })
    expect(badCursor.status).toBe(400)
    expect(badCursor.body.code).toBe("BAD_REQUEST")
    const badLimit = await app.request("GET", `/v1/budget/transactions/${grantId}?limit=101`, { apiKey: dev.apiKey })
    expect(badLimit.status).toBe(400)
    expect(badLimit.body.code).toBe("BAD_REQUEST")
    const none = await app.request("GET", `/v1/budget/transactions/${await newGrant()}`, { apiKey: dev.apiKey })
    expect(none.status).toBe(404)
  })
})

describe("GET /v1/budget/allocations", () => {
  test("every allocation of the developer, newest first, a page at a time; none of another developer's", async () => {
    const dev2 = await app.signup({ plan: "enterprise" })
    const agent2 = await createAgent(app, dev2.developerId)
    const made: Array<any> = []
    for (let i = 1; i <= 5; i++) made.push((await allocate({ grantId: await newGrant(dev2.developerId, agent2), initialBudget: i }, dev2.apiKey)).body)
    await allocate({ grantId: await newGrant(), initialBudget: 9 }) // dev's, not dev2's
    const seen: Array<any> = []
    let cursor: string | null = null
    do {
      const res: any = await app.request("GET", `/v1/budget/allocations?limit=2${cursor ? `&cursor=${cursor}` : ""}`, { apiKey: dev2.apiKey })
      expect(res.status).toBe(200)
      seen.push(...res.body.allocations)
      cursor = res.body.nextCursor
    } while (cursor !== null)
    expect(seen).toEqual([...made].reverse())
    expect(seen[0]).toEqual({ id: made[4].id, grantId: made[4].grantId, initialBudget: 5, remainingBudget: 5, currency: "USD", createdAt: expect.stringMatching(/Z$/) })
  })

  test("an empty list; 400 BAD_REQUEST for a malformed cursor or limit; 401 without a key", async () => {
    const fresh = await app.signup()
    expect((await app.request("GET", "/v1/budget/allocations", { apiKey: fresh.apiKey })).body).toEqual({ allocations: [], nextCursor: null })
    for (const q of ["cursor=%%%", "limit=0", "limit=101"]) {
      const res = await app.request("GET", `/v1/budget/allocations?${q}`, { apiKey: fresh.apiKey })
      expect([q, res.status, res.body.code]).toEqual([q, 400, "BAD_REQUEST"])
    }
    expect((await app.request("GET", "/v1/budget/allocations")).status).toBe(401)
  })
})

describe("amount arithmetic", () => {
  test("amountProblem accepts at most 4 decimals and 15 significant digits", () => {
    expect(amountProblem(0.0001)).toBeUndefined()
    expect(amountProblem(99999999999.9999)).toBeUndefined()
    expect(amountProblem(0.00001)).toBeDefined()
    expect(amountProblem(Number.NaN)).toBeDefined()
    expect(amountProblem(Number.POSITIVE_INFINITY)).toBeDefined()
    expect(amountProblem(0.1 + 0.2)).toBeDefined()
  })

  test("thresholds are exact at the line", () => {
    const u = (n: number) => toUnits(n)
    expect(crossedThresholds(u(3), u(1.5001), u(1.5))).toEqual([50])
    expect(crossedThresholds(u(3), u(1.5), u(1.4))).toEqual([])
    expect(crossedThresholds(u(3), u(3), u(0))).toEqual([50, 80])
    expect(crossedThresholds(u(0.0003), u(0.0002), u(0.0001))).toEqual([50])
  })
})
