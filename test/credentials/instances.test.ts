/**
 * Two instances on one PostgreSQL: a revocation through one shows in the other's status lists and
 * verification as soon as it commits (LISTEN on vc_status_changes), not after its cache ages out.
 * Real PostgreSQL only: the embedded database is one process.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { createDatabase, startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { payloadOf, sandbox } from "./support.ts"

let a: TestApp
let b: TestApp
let drop: () => Promise<void> = async () => {}

beforeAll(async () => {
  if (!usingRealPostgres) return
  const db = await createDatabase()
  drop = db.drop
  const env = { RATE_LIMIT_SCALE: "100" }
  a = await startTestApp({ databaseUrl: db.url, env })
  b = await startTestApp({ databaseUrl: db.url, env })
})
afterAll(async () => {
  await a?.stop()
  await b?.stop()
  await drop()
})

test.skipIf(!usingRealPostgres)("a revocation on one instance shows on the other at its commit", async () => {
  const dev = await sandbox(a)
  const res = await dev.token({ credentialFormat: "vc-jwt" })
  const vc = res.body.verifiableCredential as string
  const path = new URL(payloadOf(vc).credentialStatus[0].statusListCredential).pathname
  const verifyOnB = async () => (await b.request("POST", "/v1/credentials/verify", { body: { credential: vc } })).body
  // B has the list cached, fresh
  const before = await b.request("GET", path)
  expect((await verifyOnB()).valid).toBe(true)
  await a.request("DELETE", `/v1/grants/${res.body.grantId}`, { apiKey: dev.apiKey })
  // the cache alone would keep the old list for 2 s; the notification arrives within milliseconds
  const started = Date.now()
  let outcome = await verifyOnB()
  while (outcome.valid && Date.now() - started < 1500) {
    await Bun.sleep(20)
    outcome = await verifyOnB()
  }
  expect(outcome).toMatchObject({ valid: false, revoked: true })
  expect(Date.now() - started).toBeLessThan(1500)
  expect((await b.request("GET", path)).text).not.toBe(before.text)
})
