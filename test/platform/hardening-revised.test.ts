/**
 * decisions §19 (revised), issue 32 item 4: every HTML page refuses to be framed (/docs too), and
 * host names that end in a dot, `localhost` names and names that resolve to loopback or private
 * addresses are refused up front when SSO issuers and anomaly alert channels are registered.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { lookup } from "node:dns/promises"
import { hostname } from "node:os"
import { checkReceiverName, checkReceiverUrl, isPublicAddress } from "../../src/platform/Outbound.ts"
import { startTestApp, type TestApp } from "../support/app.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ env: { WEBHOOK_ALLOW_PRIVATE_HOSTS: "false", SSO_ALLOW_PRIVATE_HOSTS: "false" } })
})
afterAll(() => app.stop())

/** this machine's own name: it resolves to a loopback or private address without being called localhost */
const ownName = hostname()

test("/docs: X-Frame-Options DENY and frame-ancestors 'none'", async () => {
  const res = await app.request("GET", "/docs")
  expect(res.status).toBe(200)
  expect(res.headers.get("x-frame-options")).toBe("DENY")
  expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
})

describe("names refused up front", () => {
  test("the static rules: a trailing dot and localhost names", () => {
    const reason = (url: string) => {
      const check = checkReceiverUrl(url, false)
      return check.ok ? "ok" : check.reason
    }
    expect(reason("https://localhost./in")).toBe("url must not end its host name with a dot")
    expect(reason("https://idp.example.com./in")).toBe("url must not end its host name with a dot")
    for (const url of ["https://LOCALHOST/in", "https://localhost6/in", "https://ip6-localhost/in", "https://a.b.localhost/in", "https://box.localdomain/in"]) {
      expect({ url, reason: reason(url) }).toEqual({ url, reason: "url must not point to a local host" })
    }
    expect(reason("https://idp.example.com/in")).toBe("ok")
  })

  test("a name that resolves to a loopback or private address is refused like the address; one that does not resolve is left to the send", async () => {
    const addresses = await lookup(ownName, { all: true })
    expect(addresses.length > 0 && addresses.every((a) => !isPublicAddress(a.address))).toBe(true)
    expect(await checkReceiverName(new URL(`https://${ownName}/in`), false)).toEqual({ ok: false, reason: "url must not point to a private or local address" })
    expect((await checkReceiverName(new URL(`https://${ownName}/in`), true)).ok).toBe(true)
    expect((await checkReceiverName(new URL("https://unresolvable.invalid/in"), false)).ok).toBe(true)
  })

  test("SSO issuers: 400 on issuerUrl, nothing stored", async () => {
    const { apiKey, developerId } = await app.signup()
    const cases: Array<[string, string]> = [
      ["https://localhost./", "url must not end its host name with a dot"],
      ["https://localhost/", "url must not point to a local host"],
      [`https://${ownName}/`, "url must not point to a private or local address"]
    ]
    for (const [issuerUrl, message] of cases) {
      const res = await app.request("POST", "/v1/sso/connections", {
        apiKey, body: { name: "IdP", protocol: "oidc", issuerUrl, clientId: "c", clientSecret: "s" }
      })
      expect({ issuerUrl, status: res.status, code: res.body.code, details: res.body.details })
        .toEqual({ issuerUrl, status: 400, code: "BAD_REQUEST", details: [{ path: "issuerUrl", message }] })
    }
    expect(await app.query("SELECT id FROM sso_connections WHERE developer_id = $1", [developerId])).toEqual([])
  })

  test("alert channels: 400 for both types, nothing stored", async () => {
    const { apiKey } = await app.signup()
    const cases: Array<[string, string]> = [
      ["https://localhost./in", "url must not end its host name with a dot"],
      ["https://hooks.slack.com./services/T/B/X", "url must not end its host name with a dot"],
      [`https://${ownName}/in`, "url must not point to a private or local address"]
    ]
    for (const type of ["webhook", "slack"]) {
      for (const [url, message] of cases) {
        const res = await app.request("POST", "/v1/anomaly/channels", { apiKey, body: { type, url } })
        expect({ type, url, status: res.status, code: res.body.code, message: res.body.message })
          .toEqual({ type, url, status: 400, code: "BAD_REQUEST", message })
      }
    }
    expect((await app.request("GET", "/v1/anomaly/channels", { apiKey })).body).toEqual({ channels: [] })
  })

  test("webhook endpoints: a name resolving to a private address is refused on create and PATCH, nothing stored", async () => {
    const { apiKey } = await app.signup()
    const created = await app.request("POST", "/v1/webhooks", { apiKey, body: { url: `https://${ownName}/in`, events: ["grant.created"] } })
    expect([created.status, created.body.code, created.body.message]).toEqual([400, "BAD_REQUEST", "url must not point to a private or local address"])
    const hook = (await app.request("POST", "/v1/webhooks", { apiKey, body: { url: "https://unresolvable.invalid/in", events: ["grant.created"] } })).body
    const patched = await app.request("PATCH", `/v1/webhooks/${hook.id}`, { apiKey, body: { url: `https://${ownName}/in` } })
    expect([patched.status, patched.body.message]).toEqual([400, "url must not point to a private or local address"])
    expect((await app.request("GET", "/v1/webhooks", { apiKey })).body.webhooks.map((w: any) => w.url)).toEqual(["https://unresolvable.invalid/in"])
  })
})
