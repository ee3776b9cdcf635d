/**
 * The job fiber itself (decisions §15): woken at once by a job created on this instance, and
 * otherwise polling every COMPLIANCE_JOB_POLL_SECONDS on the Effect Clock (TestClock here).
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { seedAudit } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true, workers: true, env: { COMPLIANCE_JOB_POLL_SECONDS: "5" } })
})
afterAll(() => app.stop())

/** waits (for work, not for time: the clock does not move) until the job leaves pending/running */
const settled = async (apiKey: string, id: string, tries = 1000) => {
  for (let i = 0; i < tries; i++) {
    const s = (await app.request("GET", `/v1/compliance/exports/${id}`, { apiKey })).body.status
    if (s !== "pending" && s !== "running") return s
    await Bun.sleep(10)
  }
  return "pending"
}

test("a job created through the API runs at once: the fiber is woken, no clock needed", async () => {
  const d = await app.signup()
  await seedAudit(app, d.developerId, 50)
  const { id } = (await app.request("POST", "/v1/compliance/exports", { apiKey: d.apiKey, body: { kind: "audit" } })).body
  expect(await settled(d.apiKey, id)).toBe("complete")
})

test("a job the fiber was not told about (another instance's) runs at the next poll, not before", async () => {
  const d = await app.signup()
  // let the fiber finish the extra round it runs after a busy one and go to sleep (real time: no clock moves)
  await Bun.sleep(300)
  await app.query(
    `INSERT INTO compliance_exports (id, developer_id, kind, format, params, status, created_at, updated_at)
     VALUES ('cexp_FROMANOTHERINSTANCE00000', $1, 'grants', 'ndjson', '{"since":null,"until":null,"filters":{}}', 'pending', now(), now())`,
    [d.developerId])
  expect(await settled(d.apiKey, "cexp_FROMANOTHERINSTANCE00000", 30)).toBe("pending")
  await app.adjust("5 seconds")
  expect(await settled(d.apiKey, "cexp_FROMANOTHERINSTANCE00000")).toBe("complete")
})
