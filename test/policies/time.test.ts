/**
 * decisions §13: time windows and weekdays in the rule's own time zone, on TestClock (the service's
 * clock, not the machine's). Authorize auto-approves inside the window and leaves the request to the
 * person outside it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { authorize, createRule } from "./support.ts"

let app: TestApp
let apiKey: string
let agentId: string
beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "1000" }, testClock: true })
  const dev = await app.signup()
  apiKey = dev.apiKey
  agentId = await createAgent(app, dev.developerId, ["email:read", "email:send", "calendar:read"])
  // working hours in Paris, Monday to Friday
  await createRule(app, apiKey, {
    name: "office hours", effect: "allow", scopes: ["email:read"], timeOfDayStart: "09:00", timeOfDayEnd: "17:00",
    daysOfWeek: [1, 2, 3, 4, 5], timeZone: "Europe/Paris"
  })
  // a night freeze across midnight in New York
  await createRule(app, apiKey, {
    name: "night freeze", effect: "deny", scopes: ["email:send"], timeOfDayStart: "22:00", timeOfDayEnd: "06:00", timeZone: "America/New_York"
  })
  // Mondays in Kolkata (UTC+05:30)
  await createRule(app, apiKey, { name: "Kolkata Mondays", effect: "allow", scopes: ["calendar:read"], daysOfWeek: [1], timeZone: "Asia/Kolkata" })
})
afterAll(async () => {
  await app?.stop()
})

const at = async (iso: string, scopes: ReadonlyArray<string>) => {
  await app.setTime(Date.parse(iso))
  const res = await authorize(app, apiKey, agentId, "user_1", scopes)
  return res.status === 403 ? res.body.code : res.body.code !== undefined ? "approved" : "pending"
}

describe("time windows and weekdays", () => {
  test.each([
    // 2026-11-23 is a Monday. Paris is UTC+1 in November.
    ["2026-11-23T07:59:00.000Z", "pending"], // 08:59 in Paris
    ["2026-11-23T08:00:00.000Z", "approved"], // 09:00, the window starts
    ["2026-11-23T15:59:00.000Z", "approved"], // 16:59
    ["2026-11-23T16:00:00.000Z", "pending"], // 17:00, the window has ended
    ["2026-11-22T10:00:00.000Z", "pending"], // Sunday 11:00
    ["2026-11-27T23:30:00.000Z", "pending"], // Friday 23:30 UTC is Saturday 00:30 in Paris
    ["2026-11-28T08:30:00.000Z", "pending"], // Saturday
    ["2026-07-06T07:30:00.000Z", "approved"] // a Monday in summer: Paris is UTC+2, 09:30
  ])("email:read at %s is %s (Paris office hours)", async (iso, expected) => {
    expect(await at(iso, ["email:read"])).toBe(expected)
  })

  test.each([
    ["2026-11-24T02:59:00.000Z", "pending"], // 21:59 in New York (UTC-5): not yet
    ["2026-11-24T03:00:00.000Z", "POLICY_DENIED"], // 22:00
    ["2026-11-24T10:59:00.000Z", "POLICY_DENIED"], // 05:59
    ["2026-11-24T11:00:00.000Z", "pending"], // 06:00, the freeze is over
    ["2026-07-07T02:30:00.000Z", "POLICY_DENIED"], // summer: UTC-4, 22:30
    ["2026-07-07T10:30:00.000Z", "pending"] // summer: 06:30
  ])("email:send at %s is %s (New York night freeze)", async (iso, expected) => {
    expect(await at(iso, ["email:send"])).toBe(expected)
  })

  test.each([
    ["2026-11-22T18:29:00.000Z", "pending"], // Sunday 23:59 in Kolkata
    ["2026-11-22T18:30:00.000Z", "approved"], // Monday 00:00 in Kolkata, still Sunday in UTC
    ["2026-11-23T18:29:00.000Z", "approved"], // Monday 23:59 in Kolkata
    ["2026-11-23T18:30:00.000Z", "pending"] // Tuesday in Kolkata, still Monday in UTC
  ])("calendar:read at %s is %s (Mondays in Kolkata)", async (iso, expected) => {
    expect(await at(iso, ["calendar:read"])).toBe(expected)
  })

  test("evaluate reports the time it decided at", async () => {
    await app.setTime(Date.parse("2026-11-23T08:00:00.000Z"))
    const res = await app.request("POST", "/v1/policies/evaluate", { apiKey, body: { agentId, principalId: "u", scopes: ["email:read"] } })
    expect(res.body.evaluatedAt).toBe("2026-11-23T08:00:00.000Z")
    expect(res.body.effect).toBe("allow")
  })
})
