/** DPDP consent notices (decisions §21): published statuses, immutable versions, languages, retirement, Rule 3. */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { createHash } from "node:crypto"
import { startTestApp, type TestApp } from "../support/app.ts"

let app: TestApp
let apiKey: string
let otherKey: string

beforeAll(async () => {
  app = await startTestApp({ testClock: true })
  apiKey = (await app.signup()).apiKey
  otherKey = (await app.signup()).apiKey
})
afterAll(() => app.stop())

const body = (over: Record<string, unknown> = {}) => ({
  noticeId: "privacy",
  version: "1",
  title: "How we use your data",
  content: "We read your calendar to schedule meetings.",
  purposes: [{ code: "calendar-sync", description: "Schedule meetings" }],
  ...over
})
const sha = (s: string) => createHash("sha256").update(s, "utf8").digest("hex")

test("201 with the published shape, 409 on the same version, 400 on a missing field", async () => {
  const created = await app.request("POST", "/v1/dpdp/consent-notices", { apiKey, body: body() })
  expect(created.status).toBe(201)
  expect(created.body.id).toMatch(/^notice_[0-9A-Z]{26}$/)
  expect(created.body).toMatchObject({
    noticeId: "privacy", version: "1", language: "en", contentHash: sha(body().content as string), createdAt: "2026-11-22T10:00:00.000Z",
    completeness: { rule3: false, missing: ["dataItems", "withdrawal", "rights", "boardComplaint", "contact"] }, retiredAt: null
  })
  expect(created.body.noticeDigest).toMatch(/^[0-9a-f]{64}$/)

  const again = await app.request("POST", "/v1/dpdp/consent-notices", { apiKey, body: body({ title: "other" }) })
  expect(again.status).toBe(409)
  expect(again.body.code).toBe("CONFLICT")
  // another developer has its own key space
  expect((await app.request("POST", "/v1/dpdp/consent-notices", { apiKey: otherKey, body: body() })).status).toBe(201)

  const { title: _, ...noTitle } = body()
  const missing = await app.request("POST", "/v1/dpdp/consent-notices", { apiKey, body: noTitle })
  expect(missing.status).toBe(400)
  expect(missing.body.code).toBe("BAD_REQUEST")
  expect(missing.body.details).toEqual([{ path: "title", message: "title is required" }])

  const badHash = await app.request("POST", "/v1/dpdp/consent-notices", { apiKey, body: body({ version: "9", contentHash: sha("other") }) })
  expect(badHash.status).toBe(400)
  const dupCodes = await app.request("POST", "/v1/dpdp/consent-notices", {
    apiKey, body: body({ version: "9", purposes: [{ code: "a", description: "x" }, { code: "a", description: "y" }] })
  })
  expect(dupCodes.status).toBe(400)
  const rows = await app.query("SELECT version FROM dpdp_consent_notices WHERE notice_id = 'privacy' AND version = '9'")
  expect(rows).toEqual([])
})

test("without noticeId (@grantex/dpdp) the notice_ id is the noticeId; a complete notice meets Rule 3", async () => {
  const res = await app.request("POST", "/v1/dpdp/consent-notices", {
    apiKey,
    body: {
      version: "1", title: "t", content: "c", contentHash: sha("c"),
      purposes: [{ purposeId: "p1", name: "Analytics", description: "d", legalBasis: "consent", dataCategories: ["usage"] }],
      dataItems: ["email address"], withdrawalUrl: "https://example.com/w", rightsUrl: "https://example.com/r",
      boardComplaintUrl: "https://example.com/b", grievanceOfficer: { name: "A", email: "a@example.com" }
    }
  })
  expect(res.status).toBe(201)
  expect(res.body.noticeId).toBe(res.body.id)
  expect(res.body.completeness).toEqual({ rule3: true, missing: [] })
  expect(res.body.purposes[0]).toMatchObject({ code: "p1", name: "Analytics", legalBasis: "consent" })
})

test("language variants, reads, retirement (idempotent), event and audit entries", async () => {
  const { apiKey: key, developerId } = await app.signup()
  await app.request("POST", "/v1/dpdp/consent-notices", { apiKey: key, body: body() })
  await app.adjust("1 second")
  const hi = await app.request("POST", "/v1/dpdp/consent-notices", { apiKey: key, body: body({ language: "hi", content: "हम आपका कैलेंडर पढ़ते हैं" }) })
  expect(hi.status).toBe(201)
  await app.adjust("1 second")
  await app.request("POST", "/v1/dpdp/consent-notices", { apiKey: key, body: body({ version: "2" }) })

  const versions = await app.request("GET", "/v1/dpdp/consent-notices/privacy", { apiKey: key })
  expect(versions.status).toBe(200)
  expect(versions.body.versions.map((v: any) => `${v.version}/${v.language}`)).toEqual(["2/en", "1/hi", "1/en"])
  const full = await app.request("GET", "/v1/dpdp/consent-notices/privacy/versions/1?language=hi", { apiKey: key })
  expect(full.body.content).toBe("हम आपका कैलेंडर पढ़ते हैं")
  const list = await app.request("GET", "/v1/dpdp/consent-notices", { apiKey: key })
  expect(list.body.notices.map((n: any) => n.version)).toEqual(["2"])
  // another developer's notice is answered as unknown
  expect((await app.request("GET", "/v1/dpdp/consent-notices/privacy/versions/2", { apiKey })).status).toBe(404)
  expect((await app.request("GET", "/v1/dpdp/consent-notices/nope", { apiKey: key })).status).toBe(404)

  await app.adjust("1 second")
  const retired = await app.request("POST", "/v1/dpdp/consent-notices/privacy/versions/1/retire", { apiKey: key })
  expect(retired.status).toBe(200)
  expect(retired.body).toEqual({ noticeId: "privacy", version: "1", languages: ["en", "hi"], retiredAt: "2026-11-22T10:00:03.000Z" })
  await app.adjust("1 minute")
  const again = await app.request("POST", "/v1/dpdp/consent-notices/privacy/versions/1/retire", { apiKey: key })
  expect(again.body.retiredAt).toBe("2026-11-22T10:00:03.000Z")
  expect((await app.request("POST", "/v1/dpdp/consent-notices/privacy/versions/7/retire", { apiKey: key })).status).toBe(404)

  const events = await app.query<{ type: string; data: any }>(
    "SELECT type, data FROM events WHERE developer_id = $1 AND type LIKE 'dpdp.consent_notice.%' ORDER BY created_at, id", [developerId])
  expect(events.map((e) => e.type)).toEqual([
    "dpdp.consent_notice.registered", "dpdp.consent_notice.registered", "dpdp.consent_notice.registered", "dpdp.consent_notice.retired"
  ])
  expect(events[3]!.data).toEqual({ noticeId: "privacy", version: "1", languages: ["en", "hi"], retiredAt: "2026-11-22T10:00:03.000Z" })
  const audit = await app.query<{ action: string }>("SELECT action FROM audit_log WHERE developer_id = $1 ORDER BY seq", [developerId])
  expect(audit.map((a) => a.action).filter((a) => a.startsWith("service.dpdp"))).toEqual([
    "service.dpdp.notice_registered", "service.dpdp.notice_registered", "service.dpdp.notice_registered", "service.dpdp.notice_retired"
  ])
})
