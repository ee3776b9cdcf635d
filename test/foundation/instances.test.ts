/**
 * Two instances on one database: a change to a developer made through one (key rotation, plan)
 * holds on the other at once, though each caches resolved API keys for a few seconds.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { operatorCommands } from "../../src/operator.ts"
import { startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { within } from "../support/wait.ts"

let one: TestApp
let two: TestApp
beforeAll(async () => {
  if (!usingRealPostgres) return
  one = await startTestApp()
  two = await startTestApp({ databaseUrl: one.databaseUrl })
})
afterAll(async () => {
  if (!usingRealPostgres) return
  await two.server.stop()
  await one.stop()
})

test.skipIf(!usingRealPostgres)("a key rotated on one instance stops working on the other at once (not after its cache runs out)", async () => {
  const d = await one.signup()
  // the other instance has resolved (and cached) the key
  expect((await two.request("GET", "/v1/me", { apiKey: d.apiKey })).status).toBe(200)
  const rotated = await one.request("POST", "/v1/keys/rotate", { apiKey: d.apiKey })
  expect(rotated.status).toBe(200)
  // the cache would keep the old key for 5 s; the notification drops it within a moment
  const after = await within(1000, async () => (await two.request("GET", "/v1/me", { apiKey: d.apiKey })).status === 401)
  expect(after).toBeDefined()
  expect((await two.request("GET", "/v1/me", { apiKey: rotated.body.apiKey })).status).toBe(200)
})

test.skipIf(!usingRealPostgres)("a plan set by the operator command applies on running instances at once", async () => {
  const d = await one.signup()
  const limitOn = async (app: TestApp) => (await app.request("GET", "/v1/me", { apiKey: d.apiKey })).headers.get("x-ratelimit-limit")
  expect(await limitOn(one)).toBe("100")
  expect(await limitOn(two)).toBe("100")
  expect(await one.run(operatorCommands["developers set-plan"]!([d.developerId, "pro"], one.config))).toBe(
    `developer ${d.developerId} is now on the pro plan`
  )
  expect(await within(1000, async () => (await limitOn(one)) === "500" && (await limitOn(two)) === "500")).toBeDefined()
})
