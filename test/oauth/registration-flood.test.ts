/**
 * AD-012 registration flood (decisions §22.9), on TestClock: more than 10 dynamic client
 * registrations from one IPv4 /24 within 10 minutes raise one alert on that network (further ones
 * count occurrences, never a suspension); registrations spread over more than the window raise
 * nothing; more than `developerCount` at the issuer from many networks raise the developer-wide alert; an
 * allow-listed address is not counted.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { ENV, eventsOf, ruleAlerts, settings, START } from "../anomalies/support.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { registerServer } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: START, env: ENV })
}, 120_000)
afterAll(() => app?.stop())

const developer = async () => {
  const dev = await app.signup({ plan: "enterprise" })
  // identifiers are unique across the service
  await registerServer(app, dev.apiKey, { identifier: `https://${dev.developerId.toLowerCase().replace(/_/g, "-")}.example/mcp` })
  return { ...dev, agentId: "" }
}
const register = async (developerId: string, from: string) => {
  const res = await app.request("POST", `/oauth/${developerId}/register`, {
    headers: { "x-forwarded-for": from },
    body: { redirect_uris: ["http://127.0.0.1:7777/callback"], token_endpoint_auth_method: "none", client_name: "Flood" }
  })
  expect(res.status).toBe(201)
  return res.body.client_id as string
}

test("the 11th registration from one /24 in 10 minutes raises one alert on the network; the 12th counts an occurrence", async () => {
  const t = await developer()
  for (let i = 0; i < 10; i++) await register(t.developerId, `203.0.113.${i + 1}`)
  expect(await ruleAlerts(app, t, "AD-012")).toEqual([])
  const eleventh = await register(t.developerId, "203.0.113.200")
  const [alert] = await ruleAlerts(app, t, "AD-012")
  expect(alert).toMatchObject({
    ruleId: "AD-012", ruleName: "Registration flood", severity: "medium", status: "open", agentId: null, occurrences: 1, response: "none",
    context: { registrations: 11, fromNetwork: 11, network: "203.0.113.0/24", windowMinutes: 10, lastClientId: eleventh }
  })
  await register(t.developerId, "203.0.113.201")
  expect(await ruleAlerts(app, t, "AD-012")).toMatchObject([{ alertId: alert.alertId, occurrences: 2 }])
  expect((await eventsOf(app, t, "anomaly.detected")).map((e) => e.ruleId)).toEqual(["AD-012", "AD-012"])
  // every client is still registered and active: an alert, not a response
  const [row] = await app.query<{ n: number }>(`SELECT count(*)::int AS n FROM agents WHERE developer_id = $1 AND status = 'active'`, [t.developerId])
  expect(row!.n).toBe(12)
})

test("near miss: registrations from one network spread over more than the window raise nothing", async () => {
  const t = await developer()
  for (let i = 0; i < 12; i++) {
    await register(t.developerId, `198.51.100.${i + 1}`)
    await app.adjust("1 minute")
  }
  expect(await ruleAlerts(app, t, "AD-012")).toEqual([])
})

test("more than developerCount at the issuer from as many networks raise the developer-wide alert once", async () => {
  const t = await developer()
  // the developer-wide figure (50 by default) lowered, so the test sends 6 registrations, not 51
  const patched = await app.request("PATCH", "/v1/anomaly/rules/AD-012", { apiKey: t.apiKey, body: { threshold: { developerCount: 5 } } })
  expect(patched.body.threshold).toEqual({ developerCount: 5, networkCount: 10, windowMinutes: 10 })
  for (let i = 0; i < 6; i++) await register(t.developerId, `10.${i}.0.1`)
  expect(await ruleAlerts(app, t, "AD-012")).toMatchObject([{ occurrences: 1, context: { registrations: 6, fromNetwork: 1, network: "10.5.0.0/24" } }])
})

test("an allow-listed network is not counted", async () => {
  const t = await developer()
  await settings(app, t, { allowList: ["192.0.2.0/24"] })
  for (let i = 0; i < 12; i++) await register(t.developerId, `192.0.2.${i + 1}`)
  expect(await ruleAlerts(app, t, "AD-012")).toEqual([])
})
