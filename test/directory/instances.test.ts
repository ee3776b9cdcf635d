/**
 * Two instances on one database provisioning the same userName at the same moment (what an IdP
 * retrying against a load balancer does): one user, one 201 and one 409 uniqueness, never a 500.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { newUser, type ScimClient, scimClient } from "./support.ts"

let one: TestApp
let two: TestApp
let c: ScimClient
beforeAll(async () => {
  if (!usingRealPostgres) return
  one = await startTestApp()
  two = await startTestApp({ databaseUrl: one.databaseUrl })
  c = await scimClient(one)
})
afterAll(async () => {
  if (!usingRealPostgres) return
  await two.server.stop()
  await one.stop()
})

const sendTo = (app: TestApp, body: unknown) =>
  app.request("POST", "/scim/v2/Users", { bearer: c.token, rawBody: JSON.stringify(body), headers: { "content-type": "application/scim+json" } })

test.skipIf(!usingRealPostgres)("the same userName provisioned on two instances at once gives one user, one 201 and one 409", async () => {
  for (let i = 0; i < 10; i++) {
    // the second spelled in another case: userName is unique case-insensitively
    const [a, b] = await Promise.all([sendTo(one, newUser(`race${i}@example.com`)), sendTo(two, newUser(`RACE${i}@example.com`))])
    expect([a.status, b.status].sort()).toEqual([201, 409])
    const refused = a.status === 409 ? a : b
    expect(refused.body).toMatchObject({ status: "409", scimType: "uniqueness" })
    const rows = await one.query("SELECT count(*)::int AS n FROM scim_users WHERE developer_id = $1 AND lower(user_name) = $2", [c.developerId, `race${i}@example.com`])
    expect(rows[0].n).toBe(1)
  }
  const provisioned = await one.query("SELECT count(*)::int AS n FROM events WHERE developer_id = $1 AND type = 'scim.user.provisioned'", [c.developerId])
  expect(provisioned[0].n).toBe(10)
})
