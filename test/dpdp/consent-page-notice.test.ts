/**
 * The consent page shows the notice a request is pinned to (decisions §21), before Approve/Deny:
 * the version's language variants, the purposes asked for (only those), data items, how to withdraw
 * (our /permissions page when the notice names no other way), the grievance contact and the Board
 * complaint link, all escaped. Reading it in another language and approving records that language.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
}, 120_000)
afterAll(() => app?.stop())

const VARIANT = {
  noticeId: "assistant",
  version: "3",
  purposes: [
    { code: "calendar-sync", name: "Calendar", description: "Schedule meetings for you" },
    { code: "ads", description: "Show you offers" }
  ],
  dataItems: ["calendar events", "email address"],
  grievanceOfficer: { name: "Asha Rao", email: "grievance@example.in", phone: "+91 80 1234 5678" },
  boardComplaintUrl: "https://www.dpb.gov.in/complaint",
  rightsUrl: "https://example.in/rights"
}

const setUp = async () => {
  const { apiKey, developerId } = await app.signup()
  for (const [language, title, content] of [
    ["en", "How <b>Assistant</b> uses your data", "We read your calendar.\nNothing else."],
    ["hi", "सहायक आपके डेटा का उपयोग कैसे करता है", "हम आपका कैलेंडर पढ़ते हैं।"]
  ] as const) {
    const res = await app.request("POST", "/v1/dpdp/consent-notices", { apiKey, body: { ...VARIANT, language, title, content } })
    expect(res.status).toBe(201)
  }
  const agentId = await createAgent(app, developerId, ["calendar:read"])
  const auth = await app.request("POST", "/v1/authorize", {
    apiKey, body: { agentId, principalId: "dana", scopes: ["calendar:read"], consentNoticeId: "assistant", purposes: ["calendar-sync"] }
  })
  expect(auth.status).toBe(201)
  return { apiKey, developerId, requestId: auth.body.authRequestId as string }
}

const text = (html: string, id: string) => {
  const match = new RegExp(`id="${id}"[^>]*>([\\s\\S]*?)</(p|div|h2|ul|section)>`).exec(html)
  return match?.[1]?.replace(/<[^>]+>/g, "").replace(/\s+/g, " ").trim()
}

test("the page shows the pinned notice before the answers, escaped, with what the person needs to know", async () => {
  const { requestId } = await setUp()
  const page = await app.request("GET", `/consent?req=${requestId}`)
  expect(page.status).toBe(200)
  const html = page.text
  expect(html.indexOf('id="dpdp-notice"')).toBeGreaterThan(0)
  expect(html.indexOf('id="dpdp-notice"')).toBeLessThan(html.indexOf('id="approve"'))
  expect(html).toContain("How &lt;b&gt;Assistant&lt;/b&gt; uses your data")
  expect(html).not.toContain("<b>Assistant</b>")
  expect(text(html, "notice-version")).toBe("Notice assistant, version 3")
  expect(html).toContain("<li><strong>Calendar</strong>Schedule meetings for you</li>")
  expect(html).not.toContain("Show you offers")
  expect(text(html, "notice-data-items")).toBe("calendar events, email address")
  expect(html).toContain('<a href="/permissions">withdraw consent</a>')
  expect(text(html, "notice-grievance")).toBe("Questions or complaints: Asha Rao, grievance@example.in, +91 80 1234 5678")
  expect(html).toContain('href="https://www.dpb.gov.in/complaint"')
  expect(html).toContain('href="https://example.in/rights"')
  expect(html).toContain(`href="/consent?req=${requestId}&amp;lang=hi"`)
  expect(html).toContain('<input type="hidden" name="lang" value="en">')
})

test("read in Hindi and approved: the record names the Hindi variant; unknown languages show the pinned one", async () => {
  const { apiKey, developerId, requestId } = await setUp()
  const other = await app.request("GET", `/consent?req=${requestId}&lang=fr`)
  expect(other.text).toContain('<input type="hidden" name="lang" value="en">')
  const hindi = await app.request("GET", `/consent?req=${requestId}&lang=hi`)
  expect(hindi.status).toBe(200)
  expect(hindi.text).toContain("सहायक आपके डेटा का उपयोग कैसे करता है")
  expect(hindi.text).toContain('<section id="dpdp-notice" lang="hi"')
  const approved = await app.request("POST", "/consent/approve", {
    rawBody: new URLSearchParams({ req: requestId, lang: "hi" }).toString(),
    headers: { "content-type": "application/x-www-form-urlencoded" }
  })
  expect(approved.status).toBe(200)
  const [record] = await app.query<{ id: string }>("SELECT id FROM dpdp_consent_records WHERE developer_id = $1", [developerId])
  const view = await app.request("GET", `/v1/dpdp/consent-records/${record!.id}`, { apiKey })
  expect(view.body).toMatchObject({ language: "hi", consentNoticeVersion: "3", consentMethod: "explicit-click" })
})

test("a request without a notice shows no notice section and no language field", async () => {
  const { apiKey, developerId } = await app.signup()
  const agentId = await createAgent(app, developerId, ["calendar:read"])
  const auth = await app.request("POST", "/v1/authorize", { apiKey, body: { agentId, principalId: "dana", scopes: ["calendar:read"] } })
  const page = await app.request("GET", `/consent?req=${auth.body.authRequestId}`)
  expect(page.status).toBe(200)
  expect(page.text).not.toContain('id="dpdp-notice"')
  expect(page.text).not.toContain('name="lang"')
})

test("GET /v1/consent/:id carries the same notice for a developer's own consent screen, in ?lang= too; none without one", async () => {
  const { requestId } = await setUp()
  const view = await app.request("GET", `/v1/consent/${requestId}`)
  expect(view.status).toBe(200)
  expect(view.body.notice).toEqual({
    noticeId: "assistant", version: "3", language: "en", languages: ["en", "hi"], title: "How <b>Assistant</b> uses your data",
    content: "We read your calendar.\nNothing else.", purposes: [{ code: "calendar-sync", name: "Calendar", description: "Schedule meetings for you" }],
    dataItems: ["calendar events", "email address"], dataFiduciaryContact: null,
    grievanceOfficer: { name: "Asha Rao", email: "grievance@example.in", phone: "+91 80 1234 5678" },
    withdrawalUrl: null, rightsUrl: "https://example.in/rights", boardComplaintUrl: "https://www.dpb.gov.in/complaint"
  })
  expect((await app.request("GET", `/v1/consent/${requestId}?lang=hi`)).body.notice.language).toBe("hi")
  const { apiKey, developerId } = await app.signup()
  const agentId = await createAgent(app, developerId, ["calendar:read"])
  const plain = await app.request("POST", "/v1/authorize", { apiKey, body: { agentId, principalId: "dana", scopes: ["calendar:read"] } })
  expect((await app.request("GET", `/v1/consent/${plain.body.authRequestId}`)).body.notice).toBeUndefined()
})
