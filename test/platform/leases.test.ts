/**
 * The lease mechanism every scheduled job shares (platform/Leases.ts; decisions §14, §15, §16), on
 * TestClock: one holder at a time across instances (real PostgreSQL: a second app on the same
 * database; embedded: one app), a lease renewed while its work runs, an expired lease re-claimed
 * (the old holder can neither renew nor commit), a lost lease interrupting its work, and the
 * attempts cap after which the work is given up with its error.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Deferred, Effect, Exit } from "effect"
import { claimLease, guardLease, renewLease, withLease } from "../../src/platform/Leases.ts"
import { startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { waitFor } from "../support/wait.ts"

const START = Date.parse("2026-11-22T10:00:00.000Z")
const LEASE = { leaseMs: 60_000 }
let app: TestApp
let second: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: START })
  second = usingRealPostgres ? await startTestApp({ testClock: true, startTime: START, databaseUrl: app.databaseUrl }) : app
})
afterAll(async () => {
  if (second !== app) await second?.server.stop()
  await app?.stop()
})

let n = 0
const key = () => `key-${++n}`
const row = async (k: string) => (await app.query<any>(`SELECT holder, lease_until, attempts, state, last_error FROM leases WHERE kind = 'test' AND key = $1`, [k]))[0]

test("one holder at a time across instances; a lease that ran out is re-claimed, and its old holder can neither renew nor commit", async () => {
  const k = key()
  const claims = await Promise.all([app, second, app, second].map((a) => a.run(claimLease("test", k, LEASE))))
  expect(claims.filter((c) => c._tag === "Claimed")).toHaveLength(1)
  expect(claims.filter((c) => c._tag === "Busy")).toHaveLength(3)
  const first = claims.find((c) => c._tag === "Claimed")!
  if (first._tag !== "Claimed") throw new Error("unreachable")
  await app.adjust("60 seconds")
  await second.setTime(await app.now())
  expect((await second.run(claimLease("test", k, LEASE)))._tag).toBe("Busy")
  await app.adjust("1 millis")
  await second.setTime(await app.now())
  const next = await second.run(claimLease("test", k, LEASE))
  expect(next).toMatchObject({ _tag: "Claimed", claim: { attempts: 2 } })
  expect(await row(k)).toMatchObject({ attempts: 2, state: "open", lastError: "the attempt did not finish before its lease ran out" })
  expect(await app.run(renewLease(first.claim, LEASE.leaseMs))).toBe(false)
  const commit = await app.run(Effect.exit(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(guardLease(first.claim)))))
  expect(Exit.isFailure(commit) && JSON.stringify(commit.cause)).toContain("LeaseLost")
})

test("a lease is renewed while its work runs, however long; released (attempts reset for recurring work) when it ends", async () => {
  const k = key()
  const gate = await app.run(Deferred.make<void>())
  const running = app.run(withLease("test", k, { ...LEASE, recurring: true }, () =>
    Effect.zipRight(Deferred.await(gate), Effect.succeed("done"))))
  expect(await waitFor(async () => (await row(k))?.holder != null)).toBe(true)
  for (let s = 0; s < 300; s += 10) {
    await app.adjust("10 seconds")
    const now = await app.now()
    await waitFor(async () => new Date((await row(k)).leaseUntil).getTime() - now > 40_000 - 1, 100)
    await second.setTime(now)
    expect((await second.run(claimLease("test", k, LEASE)))._tag).toBe("Busy")
  }
  await app.run(Deferred.succeed(gate, undefined))
  expect(await running).toEqual({ _tag: "Done", value: "done", attempts: 1 })
  expect(await row(k)).toMatchObject({ holder: null, leaseUntil: null, attempts: 0, state: "open", lastError: null })
})

test("a lease taken by another holder interrupts its work, which commits nothing more", async () => {
  const k = key()
  let after = false
  const running = app.run(withLease("test", k, LEASE, () =>
    Effect.sleep("10 minutes").pipe(Effect.zipRight(Effect.sync(() => { after = true })))))
  expect(await waitFor(async () => (await row(k))?.holder != null)).toBe(true)
  await app.query(`UPDATE leases SET holder = 'another-instance' WHERE kind = 'test' AND key = $1`, [k])
  await app.adjust("20 seconds")
  expect(await running).toEqual({ _tag: "Lost" })
  expect(after).toBe(false)
  expect(await row(k)).toMatchObject({ holder: "another-instance" })
})

test("the attempts cap: failures are retried until the cap, then the work is given up with its error, for good", async () => {
  const k = key()
  const options = { ...LEASE, maxAttempts: 3 }
  const failing = withLease("test", k, options, () => Effect.fail(new Error("the source is unreadable")))
  expect(await app.run(failing)).toMatchObject({ _tag: "Failed", attempts: 1, error: expect.stringContaining("the source is unreadable") })
  expect(await app.run(failing)).toMatchObject({ _tag: "Failed", attempts: 2 })
  expect(await app.run(failing)).toMatchObject({ _tag: "Exhausted", attempts: 3, ran: true, error: expect.stringContaining("the source is unreadable") })
  expect(await row(k)).toMatchObject({ state: "failed", holder: null, attempts: 3 })
  let ran = false
  expect(await app.run(withLease("test", k, options, () => Effect.sync(() => { ran = true }))))
    .toMatchObject({ _tag: "Exhausted", attempts: 3, ran: false, error: expect.stringContaining("the source is unreadable") })
  expect(ran).toBe(false)
})
