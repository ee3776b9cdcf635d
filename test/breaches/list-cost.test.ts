/**
 * Issue 16 item 1 (decisions §19): the breach list reads stored counts, so its cost does not grow
 * with the principal ids of the breaches it returns, and the counts stay right through intimations.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { readFileSync } from "node:fs"
import { startTestApp, type TestApp } from "../support/app.ts"

const T0 = Date.parse("2026-11-22T10:00:00.000Z")
let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: T0 })
})
afterAll(() => app.stop())

const base = { description: "Laptop stolen", nature: "Loss of device", extent: "Customer records" }
const post = (apiKey: string, path: string, body: unknown) => app.request("POST", path, { apiKey, body })
const listed = async (apiKey: string) => {
  const res = await app.request("GET", "/v1/dpdp/breaches?limit=100", { apiKey })
  expect(res.status).toBe(200)
  return new Map<string, any>(res.body.breaches.map((b: any) => [b.breachId, b.principalIntimation]))
}

describe("breach list: stored counts", () => {
  test("intimatedCount, pendingCount and lastIntimatedAt follow every intimation, in the list and the breach", async () => {
    const dev = await app.signup({ plan: "enterprise" })
    const withIds = (await post(dev.apiKey, "/v1/dpdp/breaches", { ...base, affectedDataPrincipalIds: ["a", "b", "c", "d", "a"] })).body.breachId
    const countOnly = (await post(dev.apiKey, "/v1/dpdp/breaches", { ...base, affectedCount: 40 })).body.breachId
    let list = await listed(dev.apiKey)
    expect(list.get(withIds)).toEqual({ due: "without_delay", intimatedCount: 0, pendingCount: 4, lastIntimatedAt: null })
    expect(list.get(countOnly)).toEqual({ due: "without_delay", intimatedCount: 0, pendingCount: null, lastIntimatedAt: null })

    const tell = (id: string, ids: Array<string>, intimatedAt: string) =>
      post(dev.apiKey, `/v1/dpdp/breaches/${id}/principal-intimations`, { dataPrincipalIds: ids, channel: "email", contentIncluded: [], intimatedAt })
    expect((await tell(withIds, ["a", "b"], "2026-11-22T10:00:00.000Z")).status).toBe(201)
    // an earlier intimation recorded later does not move lastIntimatedAt back; repeated ids count once
    await app.adjust("1 minute")
    expect((await tell(withIds, ["b", "c", "c"], "2026-11-22T10:00:30.000Z")).status).toBe(201)
    expect((await tell(withIds, ["a"], "2026-11-22T10:00:10.000Z")).status).toBe(201)
    // a rejected intimation (a stranger id) changes nothing
    expect((await tell(withIds, ["d", "zzz"], "2026-11-22T10:00:40.000Z")).status).toBe(400)
    expect((await tell(countOnly, ["p1", "p2"], "2026-11-22T10:00:20.000Z")).status).toBe(201)
    expect((await tell(countOnly, ["p2", "p3"], "2026-11-22T10:00:25.000Z")).status).toBe(201)

    list = await listed(dev.apiKey)
    expect(list.get(withIds)).toEqual({ due: "without_delay", intimatedCount: 3, pendingCount: 1, lastIntimatedAt: "2026-11-22T10:00:30.000Z" })
    expect(list.get(countOnly)).toEqual({ due: "without_delay", intimatedCount: 3, pendingCount: null, lastIntimatedAt: "2026-11-22T10:00:25.000Z" })
    const one = await app.request("GET", `/v1/dpdp/breaches/${withIds}`, { apiKey: dev.apiKey })
    expect(one.body.principalIntimation).toEqual(list.get(withIds))
    expect((await tell(withIds, ["d"], "2026-11-22T10:00:50.000Z")).body.principalIntimation).toEqual({
      due: "without_delay", intimatedCount: 4, pendingCount: 0, lastIntimatedAt: "2026-11-22T10:00:50.000Z"
    })

    // migration 0014's backfill computes the same figures from the stored principals
    const backfill = readFileSync(new URL("../../sql/0014_hardening_data.sql", import.meta.url), "utf8")
    await app.query("UPDATE breaches SET intimated_count = 0, pending_count = 0, last_intimated_at = NULL")
    const update = backfill.slice(backfill.indexOf("UPDATE breaches"))
    await app.query(update.slice(0, update.indexOf(";") + 1))
    list = await listed(dev.apiKey)
    expect(list.get(withIds)).toEqual({ due: "without_delay", intimatedCount: 4, pendingCount: 0, lastIntimatedAt: "2026-11-22T10:00:50.000Z" })
    expect(list.get(countOnly)).toEqual({ due: "without_delay", intimatedCount: 3, pendingCount: null, lastIntimatedAt: "2026-11-22T10:00:25.000Z" })
  })

  test("a list of breaches with 10,000 ids each costs about what a list of breaches with one id does", async () => {
    const BREACHES = 12
    const big = await app.signup({ plan: "enterprise" })
    const small = await app.signup({ plan: "enterprise" })
    const ids = Array.from({ length: 10_000 }, (_, i) => `principal-${i}`)
    for (let n = 0; n < BREACHES; n++) {
      const id = (await post(big.apiKey, "/v1/dpdp/breaches", { ...base, affectedDataPrincipalIds: ids })).body.breachId
      const told = await post(big.apiKey, `/v1/dpdp/breaches/${id}/principal-intimations`, {
        dataPrincipalIds: ids.slice(0, 5_000), channel: "email", contentIncluded: []
      })
      expect(told.body.principalIntimation.pendingCount).toBe(5_000)
      await post(small.apiKey, "/v1/dpdp/breaches", { ...base, affectedDataPrincipalIds: ["only"] })
    }
    const median = async (apiKey: string) => {
      const times: Array<number> = []
      for (let i = 0; i < 7; i++) {
        const t = performance.now()
        const res = await app.request("GET", `/v1/dpdp/breaches?limit=${BREACHES}`, { apiKey })
        times.push(performance.now() - t)
        expect(res.body.breaches).toHaveLength(BREACHES)
      }
      return times.sort((a, b) => a - b)[3]!
    }
    await median(small.apiKey) // warm-up
    const baseline = await median(small.apiKey)
    const heavy = await median(big.apiKey)
    // before the fix the heavy list recounted 120,000 ids against the intimated principals
    expect(heavy).toBeLessThan(baseline * 3 + 30)
  }, 120_000)
})
