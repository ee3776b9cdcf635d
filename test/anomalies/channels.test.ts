/**
 * Anomaly alert channels (decisions §14): webhook and Slack channels receive `anomaly.detected`
 * through the webhook machinery (signatures, retries with backoff on TestClock, delivery records),
 * secrets are masked, tenants are isolated, and bad input answers the right code.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { Webhook } from "standardwebhooks"
import { AnomalyChannels } from "../../src/anomalies/Channels.ts"
import { AuditedEvents } from "../../src/platform/AuditedEvents.ts"
import { Events } from "../../src/platform/Events.ts"
import { formatKey, openSync, parseKeyring, VaultKeys } from "../../src/vault/Crypto.ts"
import { rekey } from "../../src/vault/Rekey.ts"
import { secretContext } from "../../src/webhooks/Service.ts"
import { verifyWebhook } from "../../src/webhooks/verify.ts"
import { deliverDue } from "../../src/webhooks/Worker.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { type Received, startReceiver } from "../webhooks/support.ts"
import { addChannel, alertData, emitAlert } from "./support.ts"

const T0 = Date.parse("2026-11-22T10:00:00.000Z")
let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true, startTime: T0 })
})
afterAll(() => app.stop())

const round = () => app.run(deliverDue)
const headersOf = (r: Received) => Object.fromEntries(r.headers.entries())
const deliveriesOf = async (apiKey: string, id: string, query = "") =>
  (await app.request("GET", `/v1/anomaly/channels/${id}/deliveries${query}`, { apiKey })).body

/** the standardwebhooks package checks the timestamp against Date.now(); hold it at the signing time */
const atSigningTime = <A>(r: Received, f: () => A): A => {
  const real = Date.now
  Date.now = () => Number(r.headers.get("webhook-timestamp")) * 1000
  try {
    return f()
  } finally {
    Date.now = real
  }
}

describe("delivery", () => {
  test("a webhook channel receives each alert signed: the kit's verifyWebhook and the standardwebhooks package both verify it", async () => {
    const d = await app.signup()
    const receiver = startReceiver()
    try {
      const created = await addChannel(app, d.apiKey, { type: "webhook", name: "on-call", url: receiver.url })
      expect(created.status).toBe(201)
      expect(created.body).toEqual({
        id: expect.stringMatching(/^achan_[0-9A-Z]{26}$/), type: "webhook", name: "on-call", url: receiver.url,
        severities: ["low", "medium", "high", "critical"], secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/), createdAt: new Date(T0).toISOString()
      })
      const { id, secret } = created.body
      const data = alertData({ severity: "critical", occurrences: 1 })
      const event = await emitAlert(app, d.developerId, data)
      // another event type never reaches a channel
      await app.run(Effect.flatMap(Events, (e) => e.emit(d.developerId, "grant.created", { grantId: "grnt_1" })))
      expect(await round()).toEqual({ claimed: 1, delivered: 1, failedAttempts: 0 })
      expect(receiver.received).toHaveLength(1)
      const got = receiver.received[0]!
      expect(JSON.parse(got.body)).toEqual({ id: event.id, type: "anomaly.detected", createdAt: event.createdAt, data })
      expect(got.headers.get("webhook-id")).toBe(event.id)
      expect(got.headers.get("user-agent")).toBe("Service-Webhooks/0.1")
      expect(await verifyWebhook(got.raw, got.headers, secret, { nowSeconds: Number(got.headers.get("webhook-timestamp")) })).toBe(true)
      expect(atSigningTime(got, () => new Webhook(secret).verify(got.body, headersOf(got)))).toEqual(JSON.parse(got.body))
      // a different secret does not verify (the check can fail)
      const other = `whsec_${Buffer.alloc(32, 7).toString("base64")}`
      expect(await verifyWebhook(got.raw, got.headers, other, { nowSeconds: Number(got.headers.get("webhook-timestamp")) })).toBe(false)
      expect(() => atSigningTime(got, () => new Webhook(other).verify(got.body, headersOf(got)))).toThrow()
      const history = await deliveriesOf(d.apiKey, id)
      expect(history).toEqual({
        deliveries: [{
          id: expect.stringMatching(/^whd_/), eventId: event.id, eventType: "anomaly.detected", status: "delivered", attempts: 1, maxAttempts: 5,
          lastError: null, lastResponseStatus: 200, nextAttemptAt: null, createdAt: event.createdAt, deliveredAt: new Date(T0).toISOString()
        }],
        nextCursor: null
      })
    } finally {
      receiver.stop()
    }
  })

  test("a Slack channel receives Slack's incoming-webhook body: rule, severity, agent, occurrences and a link to the alert", async () => {
    const d = await app.signup()
    const receiver = startReceiver()
    try {
      const created = await addChannel(app, d.apiKey, { type: "slack", url: `${receiver.url}/T000/B000/XXXXSECRET` })
      expect(created.status).toBe(201)
      const data = alertData({ ruleId: "AD-008", severity: "medium", agentId: "ag_<script>&", occurrences: 12 })
      await emitAlert(app, d.developerId, data)
      expect((await round()).delivered).toBe(1)
      const got = receiver.received[0]!
      const link = `${app.config.publicBaseUrl}/v1/anomaly/alerts/${data.alertId}`
      expect(got.headers.get("content-type")).toBe("application/json")
      expect(JSON.parse(got.body)).toEqual({
        text: `Anomaly alert ${data.alertId}: rule AD-008, severity medium, agent ag_&lt;script&gt;&amp;, 12 occurrence(s). <${link}|View the alert>`,
        blocks: [
          { type: "header", text: { type: "plain_text", text: "Anomaly alert: AD-008 (medium)" } },
          {
            type: "section",
            fields: [
              { type: "mrkdwn", text: "*Rule*\nAD-008" },
              { type: "mrkdwn", text: "*Severity*\nmedium" },
              { type: "mrkdwn", text: "*Agent*\nag_&lt;script&gt;&amp;" },
              { type: "mrkdwn", text: "*Occurrences*\n12" }
            ]
          },
          { type: "section", text: { type: "mrkdwn", text: `<${link}|View alert ${data.alertId}>` } }
        ]
      })
      expect((await deliveriesOf(d.apiKey, created.body.id)).deliveries.map((x: any) => [x.status, x.attempts])).toEqual([["delivered", 1]])
    } finally {
      receiver.stop()
    }
  })

  test("the Slack channel is sent to its full URL, which no answer shows", async () => {
    const d = await app.signup()
    const paths: Array<string> = []
    const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: (r) => (paths.push(new URL(r.url).pathname), new Response("ok")) })
    try {
      const url = `http://127.0.0.1:${server.port}/services/T000/B000/XXXXSECRET`
      const created = await addChannel(app, d.apiKey, { type: "slack", name: "#security", url })
      expect(created.body).toMatchObject({ type: "slack", url: `http://127.0.0.1:${server.port}/********`, secret: null })
      await emitAlert(app, d.developerId)
      expect((await round()).delivered).toBe(1)
      expect(paths).toEqual(["/services/T000/B000/XXXXSECRET"])
      const list = await app.request("GET", "/v1/anomaly/channels", { apiKey: d.apiKey })
      expect(list.text).not.toContain("XXXXSECRET")
      expect(list.body.channels).toEqual([created.body])
      // stored sealed, not in clear
      const [row] = await app.query<any>("SELECT url, secret_ciphertext FROM webhook_endpoints WHERE id = $1", [created.body.id])
      expect(`${row.url} ${row.secretCiphertext}`).not.toContain("XXXXSECRET")
    } finally {
      server.stop(true)
    }
  })

  test("vault rekey re-seals a Slack channel's URL and a webhook channel's secret: the new key alone opens them", async () => {
    const d = await app.signup()
    const slackUrl = "https://hooks.slack.com/services/T1/B1/REKEYSECRET"
    const slack = (await addChannel(app, d.apiKey, { type: "slack", url: slackUrl })).body
    const hook = (await addChannel(app, d.apiKey, { type: "webhook", url: "https://alerts.acme.example/in" })).body
    const current = await app.run(VaultKeys)
    const fresh = `k${Date.now()}:${randomBytes(32).toString("base64")}`
    await app.run(rekey(parseKeyring([fresh, ...[...current.byKid.values()].map(formatKey)].join(","))))
    const alone = parseKeyring(fresh)
    const sealed = async (id: string) => JSON.parse((await app.query<any>("SELECT secret_ciphertext FROM webhook_endpoints WHERE id = $1", [id]))[0].secretCiphertext)
    expect(openSync(alone, secretContext(slack.id, d.developerId), await sealed(slack.id))).toBe(slackUrl)
    expect(openSync(alone, secretContext(hook.id, d.developerId), await sealed(hook.id))).toBe(hook.secret)
    // back under the service's own keys, for the tests that follow
    await app.run(rekey(parseKeyring([...[...current.byKid.values()].map(formatKey), fresh].join(","))))
  })

  test("an alert recorded with its audit entry (the one-statement path) reaches the channels too", async () => {
    const d = await app.signup()
    const receiver = startReceiver()
    try {
      await addChannel(app, d.apiKey, { type: "webhook", url: receiver.url })
      const data = alertData()
      await app.run(Effect.flatMap(AuditedEvents, (a) =>
        a.recordMany([{ developerId: d.developerId, type: "anomaly.detected", data: { ...data }, audit: { action: "anomaly.detected", metadata: { alertId: data.alertId } } }])))
      expect((await round()).delivered).toBe(1)
      expect(JSON.parse(receiver.received[0]!.body).data).toEqual(data)
    } finally {
      receiver.stop()
    }
  })

  test("a failing receiver is retried 30, 60, 120, 240 s apart and the history shows every attempt; a recovering one is delivered", async () => {
    const d = await app.signup()
    const dead = startReceiver(() => 500)
    const flaky = startReceiver((n) => (n <= 2 ? 503 : 200))
    try {
      const deadId = (await addChannel(app, d.apiKey, { type: "webhook", url: dead.url })).body.id
      const flakyId = (await addChannel(app, d.apiKey, { type: "slack", url: flaky.url })).body.id
      const start = Number(await app.run(Effect.flatMap(Effect.clock, (c) => c.currentTimeMillis)))
      await emitAlert(app, d.developerId)
      expect(await round()).toEqual({ claimed: 2, delivered: 0, failedAttempts: 2 })
      const first = (await deliveriesOf(d.apiKey, deadId)).deliveries[0]
      expect(first).toMatchObject({ status: "pending", attempts: 1, lastResponseStatus: 500, lastError: "receiver answered 500", nextAttemptAt: new Date(start + 30_000).toISOString() })
      // not before the backoff is over
      await app.adjust("29 seconds")
      expect((await round()).claimed).toBe(0)
      await app.adjust("1 second")
      expect(await round()).toEqual({ claimed: 2, delivered: 0, failedAttempts: 2 })
      expect((await deliveriesOf(d.apiKey, flakyId)).deliveries[0]).toMatchObject({ attempts: 2, lastResponseStatus: 503, nextAttemptAt: new Date(start + 90_000).toISOString() })
      await app.adjust("60 seconds")
      expect(await round()).toEqual({ claimed: 2, delivered: 1, failedAttempts: 1 })
      expect((await deliveriesOf(d.apiKey, flakyId)).deliveries[0]).toMatchObject({ status: "delivered", attempts: 3, lastResponseStatus: 200, lastError: null })
      await app.adjust("119 seconds")
      expect((await round()).claimed).toBe(0)
      await app.adjust("1 second")
      expect((await round()).failedAttempts).toBe(1)
      await app.adjust("240 seconds")
      expect((await round()).failedAttempts).toBe(1)
      expect((await deliveriesOf(d.apiKey, deadId)).deliveries[0]).toMatchObject({ status: "failed", attempts: 5, maxAttempts: 5, nextAttemptAt: null, lastResponseStatus: 500 })
      expect((await deliveriesOf(d.apiKey, deadId, "?status=pending")).deliveries).toEqual([])
      await app.adjust("1 hour")
      expect((await round()).claimed).toBe(0)
      expect([dead.received.length, flaky.received.length]).toEqual([5, 3])
    } finally {
      dead.stop()
      flaky.stop()
    }
  })

  test("a channel takes only the severities it asked for; a deleted channel gets nothing more and its pending deliveries end", async () => {
    const d = await app.signup()
    const receiver = startReceiver(() => 500)
    const critical = startReceiver()
    try {
      const onlyCritical = (await addChannel(app, d.apiKey, { type: "webhook", url: critical.url, severities: ["critical"] })).body
      expect(onlyCritical.severities).toEqual(["critical"])
      const doomed = (await addChannel(app, d.apiKey, { type: "webhook", url: receiver.url })).body
      await emitAlert(app, d.developerId, alertData({ severity: "low" }))
      expect(await round()).toEqual({ claimed: 1, delivered: 0, failedAttempts: 1 })
      expect((await app.request("DELETE", `/v1/anomaly/channels/${doomed.id}`, { apiKey: d.apiKey })).status).toBe(204)
      expect((await app.request("DELETE", `/v1/anomaly/channels/${doomed.id}`, { apiKey: d.apiKey })).status).toBe(404)
      const [row] = await app.query<any>("SELECT status, last_error FROM webhook_deliveries WHERE endpoint_id = $1", [doomed.id])
      expect(row).toEqual({ status: "failed", lastError: "endpoint deleted" })
      await emitAlert(app, d.developerId, alertData({ severity: "critical" }))
      await app.adjust("1 hour")
      expect(await round()).toEqual({ claimed: 1, delivered: 1, failedAttempts: 0 })
      expect([receiver.received.length, critical.received.length]).toEqual([1, 1])
      expect(JSON.parse(critical.received[0]!.body).data.severity).toBe("critical")
      const list = (await app.request("GET", "/v1/anomaly/channels", { apiKey: d.apiKey })).body.channels
      expect(list.map((c: any) => c.id)).toEqual([onlyCritical.id])
    } finally {
      receiver.stop()
      critical.stop()
    }
  })
})

describe("the channel list and its secrets", () => {
  test("the signing secret is shown once; every later answer masks it; the list is newest first", async () => {
    const d = await app.signup()
    const first = (await addChannel(app, d.apiKey, { type: "webhook", url: "https://alerts.acme.example/a", name: "a" })).body
    await app.adjust("1 second")
    // the published shape: the URL in config
    const second = await addChannel(app, d.apiKey, { type: "webhook", config: { url: "https://alerts.acme.example/b" } })
    expect(second.status).toBe(201)
    expect(second.body).toMatchObject({ url: "https://alerts.acme.example/b", name: null })
    const list = await app.request("GET", "/v1/anomaly/channels", { apiKey: d.apiKey })
    expect(list.status).toBe(200)
    expect(list.body.channels).toEqual([{ ...second.body, secret: "whsec_********" }, { ...first, secret: "whsec_********" }])
    expect(list.text).not.toContain(first.secret)
    expect(list.text).not.toContain(second.body.secret)
  })

  test("channels are not webhook endpoints: hidden from /v1/webhooks and outside its plan cap; 20 channels at most", async () => {
    const d = await app.signup()
    const ids: Array<string> = []
    for (let i = 0; i < 20; i++) {
      const res = await addChannel(app, d.apiKey, { type: i % 2 === 0 ? "webhook" : "slack", url: `https://alerts.acme.example/${i}` })
      expect(res.status).toBe(201)
      ids.push(res.body.id)
    }
    const over = await addChannel(app, d.apiKey, { type: "webhook", url: "https://alerts.acme.example/21" })
    expect([over.status, over.body.code]).toEqual([409, "TOO_MANY_CHANNELS"])
    expect((await app.request("GET", "/v1/webhooks", { apiKey: d.apiKey })).body).toEqual({ webhooks: [] })
    expect((await app.request("GET", `/v1/webhooks/${ids[0]}/deliveries`, { apiKey: d.apiKey })).status).toBe(404)
    expect((await app.request("DELETE", `/v1/webhooks/${ids[0]}`, { apiKey: d.apiKey })).status).toBe(404)
    expect((await app.request("POST", `/v1/webhooks/${ids[0]}/rotate-secret`, { apiKey: d.apiKey })).status).toBe(404)
    const hook = await app.request("POST", "/v1/webhooks", { apiKey: d.apiKey, body: { url: "https://hooks.acme.example/in", events: ["anomaly.detected"] } })
    expect(hook.status).toBe(201)
    // a webhook id is not a channel
    expect((await app.request("DELETE", `/v1/anomaly/channels/${hook.body.id}`, { apiKey: d.apiKey })).status).toBe(404)
    expect((await app.request("DELETE", `/v1/anomaly/channels/${ids[0]}`, { apiKey: d.apiKey })).status).toBe(204)
    expect((await addChannel(app, d.apiKey, { type: "slack", url: "https://hooks.slack.com/services/T/B/X" })).status).toBe(201)
  })

  test("another developer's channel is 404 everywhere, and their alerts never reach it", async () => {
    const a = await app.signup()
    const b = await app.signup()
    const receiver = startReceiver()
    try {
      const channel = (await addChannel(app, a.apiKey, { type: "webhook", url: receiver.url })).body
      expect((await app.request("GET", "/v1/anomaly/channels", { apiKey: b.apiKey })).body).toEqual({ channels: [] })
      const history = await app.request("GET", `/v1/anomaly/channels/${channel.id}/deliveries`, { apiKey: b.apiKey })
      expect([history.status, history.body.code]).toEqual([404, "NOT_FOUND"])
      const removal = await app.request("DELETE", `/v1/anomaly/channels/${channel.id}`, { apiKey: b.apiKey })
      expect([removal.status, removal.body.code]).toEqual([404, "NOT_FOUND"])
      await emitAlert(app, b.developerId)
      expect((await round()).claimed).toBe(0)
      expect(receiver.received).toHaveLength(0)
      expect((await app.request("GET", "/v1/anomaly/channels", { apiKey: a.apiKey })).body.channels.map((c: any) => c.id)).toEqual([channel.id])
      // what a custom rule's alertChannels is checked with: only the developer's own live channels
      const owned = (developerId: string, ids: ReadonlyArray<string>) => app.run(Effect.flatMap(AnomalyChannels, (c) => c.ownedIds(developerId, ids)))
      expect(await owned(a.developerId, [channel.id, "anch_missing"])).toEqual([channel.id])
      expect(await owned(b.developerId, [channel.id])).toEqual([])
    } finally {
      receiver.stop()
    }
  })
})

describe("bad input", () => {
  test("email is 422 CHANNEL_TYPE_UNSUPPORTED; any other unknown type, a missing or doubled URL, an unknown field, a bad severity 400", async () => {
    const d = await app.signup()
    const email = await addChannel(app, d.apiKey, { type: "email", url: "https://alerts.acme.example/x" })
    expect([email.status, email.body.code]).toEqual([422, "CHANNEL_TYPE_UNSUPPORTED"])
    const cases: Array<Record<string, unknown>> = [
      { type: "pagerduty", url: "https://alerts.acme.example/x" },
      { type: "webhook" },
      { type: "webhook", url: "https://alerts.acme.example/x", config: { url: "https://alerts.acme.example/y" } },
      { type: "webhook", url: "https://alerts.acme.example/x", surprise: 1 },
      { type: "webhook", config: { url: "https://alerts.acme.example/x", token: "t" } },
      { type: "webhook", url: "https://alerts.acme.example/x", severities: ["urgent"] },
      { type: "webhook", url: "https://alerts.acme.example/x", severities: [] },
      { type: "slack", url: "not a url" },
      { type: "slack", url: "ftp://alerts.acme.example/x" },
      { type: "webhook", url: "https://user:pass@alerts.acme.example/x" },
      { url: "https://alerts.acme.example/x" }
    ]
    for (const body of cases) {
      const res = await addChannel(app, d.apiKey, body)
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status: 400, code: "BAD_REQUEST" })
    }
    const limit = await app.request("GET", "/v1/anomaly/channels/anch_x/deliveries?limit=0", { apiKey: d.apiKey })
    expect([limit.status, limit.body.code]).toEqual([400, "BAD_REQUEST"])
    expect((await app.request("GET", "/v1/anomaly/channels", { apiKey: d.apiKey })).body).toEqual({ channels: [] })
    expect((await app.request("GET", "/v1/anomaly/channels")).status).toBe(401)
  })
})
