/**
 * Channel URLs follow the outbound rules (decisions §7, §19) like webhook endpoints: without
 * WEBHOOK_ALLOW_PRIVATE_HOSTS only https to public hosts is registered, and each send resolves,
 * checks and pins the address again, so a URL that points inside the network by the time of the
 * send is refused with the one text, and nothing is sent.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { NOT_ALLOWED_OR_UNREACHABLE } from "../../src/platform/Outbound.ts"
import { deliverDue } from "../../src/webhooks/Worker.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { startReceiver } from "../webhooks/support.ts"
import { addChannel, emitAlert } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ env: { WEBHOOK_ALLOW_PRIVATE_HOSTS: "false" } })
})
afterAll(() => app.stop())

test("private, local, plain-http and credentialed URLs are refused at registration for both types", async () => {
  const d = await app.signup()
  const refused = ["http://127.0.0.1:9/hook", "https://127.0.0.1/hook", "https://169.254.169.254/latest", "https://10.0.0.5/in", "https://[::1]/in",
    "https://localhost/in", "https://metadata.internal/in", "http://hooks.slack.com/services/T/B/X", "https://user:pass@hooks.slack.com/services/T/B/X"]
  for (const type of ["webhook", "slack"]) {
    for (const url of refused) {
      const res = await addChannel(app, d.apiKey, { type, url })
      expect({ type, url, status: res.status, code: res.body.code }).toEqual({ type, url, status: 400, code: "BAD_REQUEST" })
    }
  }
  expect((await app.request("GET", "/v1/anomaly/channels", { apiKey: d.apiKey })).body).toEqual({ channels: [] })
  expect((await addChannel(app, d.apiKey, { type: "slack", url: "https://hooks.slack.com/services/T/B/X" })).status).toBe(201)
})

test("a registered URL that now points at a private address is refused at send: nothing reaches it, the history says why", async () => {
  const d = await app.signup()
  const receiver = startReceiver()
  try {
    const channel = (await addChannel(app, d.apiKey, { type: "webhook", url: "https://alerts.acme.example/in" })).body
    // as if its DNS now answered 127.0.0.1 (rebinding): the stored URL names the loopback receiver
    await app.query("UPDATE webhook_endpoints SET url = $1 WHERE id = $2", [`https://127.0.0.1:${new URL(receiver.url).port}/hook`, channel.id])
    await emitAlert(app, d.developerId)
    expect(await app.run(deliverDue)).toEqual({ claimed: 1, delivered: 0, failedAttempts: 1 })
    expect(receiver.received).toHaveLength(0)
    const history = (await app.request("GET", `/v1/anomaly/channels/${channel.id}/deliveries`, { apiKey: d.apiKey })).body
    expect(history.deliveries[0]).toMatchObject({ status: "pending", attempts: 1, lastError: NOT_ALLOWED_OR_UNREACHABLE, lastResponseStatus: null })
  } finally {
    receiver.stop()
  }
})
