/**
 * Which channels an alert goes to (decisions §14), decided in the outbox insert by the SQL function
 * anomaly_alert_channels: every live channel taking the alert's severity, or, when the alert's
 * custom rule names `alertChannels`, only those. The custom rules table belongs to the anomalies
 * capability; until it exists every channel receives every alert. Here a stand-in of that table's
 * shape (developer_id, rule_id, alert_channels) is created when it is missing, so the filter is
 * exercised. Once the real table is merged the stand-in is skipped and the rows go into the real
 * table (if its columns differ, the INSERTs here and the function in sql/0027 change together).
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { deliverDue } from "../../src/webhooks/Worker.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { startReceiver } from "../webhooks/support.ts"
import { addChannel, alertData, emitAlert } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
})
afterAll(() => app.stop())

const receivedBy = async (channelIds: ReadonlyArray<string>) => {
  await app.run(deliverDue)
  const rows = await app.query<{ endpointId: string }>(
    "SELECT endpoint_id FROM webhook_deliveries WHERE endpoint_id = ANY($1) AND status = 'delivered' ORDER BY endpoint_id",
    [channelIds]
  )
  return rows.map((r) => r.endpointId)
}

test("without a rules table every channel receives every alert; a custom rule naming channels sends its alerts to those only", async () => {
  const d = await app.signup()
  const receiver = startReceiver()
  try {
    const a = (await addChannel(app, d.apiKey, { type: "webhook", url: receiver.url })).body.id
    const b = (await addChannel(app, d.apiKey, { type: "slack", url: receiver.url })).body.id
    const both = [a, b].sort()
    const [row] = await app.query<{ exists: boolean }>("SELECT to_regclass('anomaly_rules') IS NOT NULL AS exists")
    const exists = row?.exists === true
    if (!exists) {
      await emitAlert(app, d.developerId, alertData({ ruleId: "CR-named" }))
      expect(await receivedBy([a, b])).toEqual(both)
      await app.query("CREATE TABLE anomaly_rules (developer_id text NOT NULL, rule_id text NOT NULL, alert_channels text[] NOT NULL DEFAULT '{}')")
    }
    await app.query("DELETE FROM webhook_deliveries WHERE endpoint_id = ANY($1)", [[a, b]])
    await app.query("INSERT INTO anomaly_rules (developer_id, rule_id, alert_channels) VALUES ($1, 'CR-named', $2), ($1, 'CR-all', '{}')", [d.developerId, [b]])
    await emitAlert(app, d.developerId, alertData({ ruleId: "CR-named" }))
    expect(await receivedBy([a, b])).toEqual([b])
    // a rule that names none, and a built-in rule, reach every channel
    for (const ruleId of ["CR-all", "AD-002"]) {
      await app.query("DELETE FROM webhook_deliveries WHERE endpoint_id = ANY($1)", [[a, b]])
      await emitAlert(app, d.developerId, alertData({ ruleId }))
      expect(await receivedBy([a, b])).toEqual(both)
    }
    // another developer's rule of the same id does not narrow this developer's alerts
    const other = await app.signup()
    await app.query("INSERT INTO anomaly_rules (developer_id, rule_id, alert_channels) VALUES ($1, 'CR-all', $2)", [other.developerId, [a]])
    await app.query("DELETE FROM webhook_deliveries WHERE endpoint_id = ANY($1)", [[a, b]])
    await emitAlert(app, d.developerId, alertData({ ruleId: "CR-all" }))
    expect(await receivedBy([a, b])).toEqual(both)
  } finally {
    receiver.stop()
  }
})
