/**
 * Evidence packs, the summary and DPDP exports (decisions §15): the manifest and its JWS checked
 * with jose against the published JWKS alone, the chain checked from the anchor, a broken chain
 * reported, 413 EXPORT_TOO_LARGE above the inline limit, the DPDP shape and its 7-day life.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as jose from "jose"
import { createHash } from "node:crypto"
import { verifyExport } from "../../scripts/verify-export.ts"
import { runDueJobs } from "../../src/compliance/Jobs.ts"
import { canonicalJson } from "../../src/platform/AuditChain.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"
import { jwksOf, seedAudit } from "./support.ts"
import { newUser, patch, scimClient } from "../directory/support.ts"

let app: TestApp
let jwks: any
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
  jwks = await jwksOf(app)
})
afterAll(() => app.stop())

const withGrants = async (n: number) => {
  const d = await app.signup()
  const agentId = await createAgent(app, d.developerId)
  for (let i = 0; i < n; i++) await issueGrant(app, { developerId: d.developerId, agentId, principalId: `user_${i}`, scopes: ["email:read"] })
  return { ...d, agentId }
}

describe("evidence pack", () => {
  test("sections, a manifest of their digests and a JWS over it that jose verifies with the public JWKS", async () => {
    const d = await withGrants(2)
    await seedAudit(app, d.developerId, 40)
    const r = await app.request("GET", "/v1/compliance/evidence-pack?framework=soc2", { apiKey: d.apiKey })
    expect(r.status).toBe(200)
    const pack = r.body
    expect(pack.meta).toMatchObject({ schemaVersion: "1.0", framework: "soc2", issuer: app.config.jwtIssuer, since: null, until: null })
    expect(pack.grants.length).toBe(2)
    expect(pack.auditEntries.length).toBeGreaterThanOrEqual(40)
    expect(pack.policies).toEqual({ rules: [], cedar: null })
    expect(pack.manifest.files.map((f: any) => f.name)).toEqual(["meta", "summary", "policies", "breaches", "grants", "auditEntries", "chainIntegrity"])
    for (const f of pack.manifest.files) {
      expect(f.sha256).toBe(createHash("sha256").update(canonicalJson(pack[f.name])).digest("hex"))
    }
    const { payload, protectedHeader } = await jose.compactVerify(pack.signature, jose.createLocalJWKSet(jwks))
    expect(protectedHeader).toMatchObject({ alg: "RS256", kid: jwks.keys[0].kid })
    expect(new TextDecoder().decode(payload)).toBe(canonicalJson(pack.manifest))
    // the head as it stood when the pack began: its last entry (the pack's own audit entry comes after)
    expect(pack.chainIntegrity).toEqual({
      valid: true, checkedEntries: pack.auditEntries.length, firstBrokenAt: null, anchorHash: null,
      headHash: pack.auditEntries.at(-1).hash, headMatchesStored: true
    })
    expect((await verifyExport(new TextEncoder().encode(r.text), jwks)).ok).toBe(true)
  })

  test("the verifier refuses a pack with a changed grant, a removed entry or reordered entries", async () => {
    const d = await withGrants(2)
    await seedAudit(app, d.developerId, 10)
    const text = (await app.request("GET", "/v1/compliance/evidence-pack", { apiKey: d.apiKey })).text
    const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v))
    const changed = JSON.parse(text)
    changed.grants[0].status = "revoked"
    expect((await verifyExport(enc(changed), jwks)).errors).toContain("section grants: digest does not match the manifest")
    const removed = JSON.parse(text)
    removed.auditEntries.splice(3, 1)
    const v = await verifyExport(enc(removed), jwks)
    expect(v.ok).toBe(false)
    expect(v.errors.join(" ")).toContain("does not link")
    const swapped = JSON.parse(text)
    ;[swapped.auditEntries[1], swapped.auditEntries[2]] = [swapped.auditEntries[2], swapped.auditEntries[1]]
    expect((await verifyExport(enc(swapped), jwks)).ok).toBe(false)
  })

  test("a ranged pack checks the chain from its anchor; a tampered stored entry is reported where it breaks", async () => {
    const d = await app.signup()
    await seedAudit(app, d.developerId, 10)
    await app.adjust("1 hour")
    await seedAudit(app, d.developerId, 10)
    const entries = await app.query<any>("SELECT id, hash FROM audit_log WHERE developer_id = $1 ORDER BY seq", [d.developerId])
    const since = new Date(Date.parse("2026-11-22T10:30:00Z")).toISOString()
    const ranged = (await app.request("GET", `/v1/compliance/evidence-pack?since=${since}`, { apiKey: d.apiKey })).body
    expect(ranged.auditEntries.length).toBe(10)
    expect(ranged.chainIntegrity).toMatchObject({ valid: true, checkedEntries: 10, anchorHash: entries[9].hash })
    expect((await verifyExport(new TextEncoder().encode(JSON.stringify(ranged)), jwks)).ok).toBe(true)
    await app.query("UPDATE audit_log SET metadata = '{\"erasedAt\":\"x\"}' WHERE id = $1", [entries[14].id])
    const broken = (await app.request("GET", `/v1/compliance/evidence-pack?since=${since}`, { apiKey: d.apiKey })).body
    expect(broken.chainIntegrity).toMatchObject({ valid: false, firstBrokenAt: entries[14].id })
    expect((await verifyExport(new TextEncoder().encode(JSON.stringify(broken)), jwks)).ok).toBe(false)
  })

  test("above 50,000 audit entries: 413 EXPORT_TOO_LARGE pointing to jobs; the same window as a job is accepted", async () => {
    const d = await app.signup()
    await seedAudit(app, d.developerId, 50_001)
    const r = await app.request("GET", "/v1/compliance/evidence-pack", { apiKey: d.apiKey })
    expect(r.status).toBe(413)
    expect(r.body).toMatchObject({ code: "EXPORT_TOO_LARGE" })
    expect(r.body.message).toContain("POST /v1/compliance/exports")
    const job = await app.request("POST", "/v1/compliance/exports", { apiKey: d.apiKey, body: { kind: "evidence-pack" } })
    expect(job.status).toBe(202)
  }, 120_000)
})

test("summary: counts over the window, with the plan", async () => {
  const d = await withGrants(3)
  await app.query("UPDATE grants SET status = 'revoked', revoked_at = now() WHERE developer_id = $1 AND principal_id = 'user_0'", [d.developerId])
  await app.query("UPDATE grants SET expires_at = '2020-01-01' WHERE developer_id = $1 AND principal_id = 'user_1'", [d.developerId])
  await seedAudit(app, d.developerId, 20)
  const r = await app.request("GET", "/v1/compliance/summary", { apiKey: d.apiKey })
  expect(r.status).toBe(200)
  expect(r.body).toMatchObject({
    agents: { total: 1, active: 1, suspended: 0, revoked: 0 },
    grants: { total: 3, active: 1, revoked: 1, expired: 1 },
    auditEntries: { total: 20, success: 18, failure: 2, blocked: 0 },
    plan: "free",
    breaches: { open: 0, overdue: 0 }
  })
  const empty = await app.request("GET", "/v1/compliance/summary?since=2030-01-01", { apiKey: d.apiKey })
  expect(empty.body.auditEntries.total).toBe(0)
  expect(empty.body.since).toBe("2030-01-01T00:00:00.000Z")
})

describe("DPDP exports", () => {
  test("gdpr-article-15 without dataPrincipalId → 400; inverted dates → 400", async () => {
    const d = await app.signup()
    const a = await app.request("POST", "/v1/dpdp/exports", { apiKey: d.apiKey, body: { type: "gdpr-article-15", dateFrom: "2026-01-01", dateTo: "2026-12-31" } })
    expect(a.status).toBe(400)
    expect(a.body.code).toBe("BAD_REQUEST")
    const b = await app.request("POST", "/v1/dpdp/exports", { apiKey: d.apiKey, body: { type: "dpdp-audit", dateFrom: "2026-12-31", dateTo: "2026-01-01" } })
    expect(b.status).toBe(400)
    const c = await app.request("POST", "/v1/dpdp/exports", { apiKey: d.apiKey, body: { type: "dpdp-audit", dateFrom: "soon", dateTo: "2026-01-01" } })
    expect(c.status).toBe(400)
  })

  test("201 in the published shape, for one principal, nothing truncated; kept 7 days, then 410", async () => {
    const d = await withGrants(2)
    await seedAudit(app, d.developerId, 26, (i) => ({ principalId: i % 2 === 0 ? "user_1" : "someone_else", grantId: null }))
    // decisions §21: consent records come from the DPDP records (one for user_1: its audit entry is the 14th of the log)
    expect((await app.request("POST", "/v1/dpdp/consent-notices", { apiKey: d.apiKey, body: {
      noticeId: "n", version: "1", title: "t", content: "c", purposes: [{ code: "p", description: "d" }]
    } })).status).toBe(201)
    const [grant] = await app.query<{ id: string }>("SELECT id FROM grants WHERE developer_id = $1 AND principal_id = 'user_1'", [d.developerId])
    expect((await app.request("POST", "/v1/dpdp/consent-records", { apiKey: d.apiKey, body: {
      grantId: grant!.id, dataPrincipalId: "user_1", purposes: [{ code: "p", description: "d" }], consentNoticeId: "n", processingExpiresAt: "2027-11-01T00:00:00Z"
    } })).status).toBe(201)
    const r = await app.request("POST", "/v1/dpdp/exports", {
      apiKey: d.apiKey, body: { type: "gdpr-article-15", dateFrom: "2026-11-01", dateTo: "2026-11-30", dataPrincipalId: "user_1" }
    })
    expect(r.status).toBe(201)
    const exportId = r.body.exportId
    const data = structuredClone(r.body.data)
    expect(exportId).toMatch(/^exp_[0-9A-Z]{26}$/)
    expect(r.body).toMatchObject({
      type: "gdpr-article-15", format: "json", truncated: false, dataPrincipalId: "user_1",
      recordCount: 15
    })
    expect(r.body.data).toMatchObject({
      exportType: "gdpr-article-15", dateRange: { from: "2026-11-01T00:00:00.000Z", to: "2026-11-30T23:59:59.999Z" },
      dataPrincipalId: "user_1", truncated: false
    })
    expect(r.body.data.consentRecords).toEqual([expect.objectContaining({
      dataPrincipalId: "user_1", status: "active", grantId: grant!.id, grantIds: [grant!.id], consentNoticeVersion: "1", erasedAt: null
    })])
    expect(r.body.data.auditLog.length).toBe(14)
    expect(Object.keys(r.body.data.auditLog[0]).sort()).toEqual(["action", "id", "metadata", "status", "timestamp"])
    const got = await app.request("GET", `/v1/dpdp/exports/${exportId}`, { apiKey: d.apiKey })
    expect(got.status).toBe(200)
    expect(got.body).toMatchObject({ exportId, status: "complete", truncated: false })
    expect(got.body.data).toEqual(data)
    // the compliance route reads an exp_ id as it reads a cexp_ one
    expect((await app.request("GET", `/v1/compliance/exports/${exportId}`, { apiKey: d.apiKey })).body).toMatchObject({ id: exportId, status: "complete" })
    const other = await app.signup()
    expect((await app.request("GET", `/v1/dpdp/exports/${exportId}`, { apiKey: other.apiKey })).status).toBe(404)
    await app.adjust("7 days")
    const gone = await app.request("GET", `/v1/dpdp/exports/${exportId}`, { apiKey: d.apiKey })
    expect(gone.status).toBe(410)
    expect(gone.body.code).toBe("GONE")
  })

  test("above the inline size: 202 with a job, whose result holds every row (the published one stopped at 1,000)", async () => {
    const d = await app.signup()
    await seedAudit(app, d.developerId, 10_001)
    const r = await app.request("POST", "/v1/dpdp/exports", {
      apiKey: d.apiKey, body: { type: "dpdp-audit", dateFrom: "2026-01-01", dateTo: "2026-12-31", includeConsentRecords: false }
    })
    expect(r.status).toBe(202)
    const id = r.body.exportId
    expect(id).toMatch(/^exp_[0-9A-Z]{26}$/)
    expect(r.body).toMatchObject({ status: "pending", truncated: false, recordCount: 10_001 })
    expect((await app.request("GET", `/v1/dpdp/exports/${id}`, { apiKey: d.apiKey })).body).toMatchObject({ status: "pending", data: null })
    await app.run(runDueJobs())
    const done = await app.request("GET", `/v1/dpdp/exports/${id}`, { apiKey: d.apiKey })
    expect(done.body).toMatchObject({ status: "complete", recordCount: 10_001, truncated: false })
    expect(done.body.data.auditLog.length).toBe(10_001)
    expect(done.body.data.grievances).toEqual([])
    expect(done.body.data.consentRecords).toBeUndefined()
  }, 120_000)
})

test("summary and pack: the developer's policy rules, active Cedar set and directory users, through their capabilities", async () => {
  const c = await scimClient(app)
  for (const name of ["ana@example.com", "bo@example.com", "cy@example.com"]) expect((await c.send("POST", "/Users", newUser(name))).status).toBe(201)
  const users = (await c.send("GET", "/Users")).body.Resources
  expect((await c.send("PATCH", `/Users/${users[0].id}`, patch({ op: "replace", path: "active", value: false }))).status).toBe(200)
  for (const effect of ["allow", "deny"]) {
    expect((await app.request("POST", "/v1/policies", { apiKey: c.apiKey, body: { name: `${effect} rule`, effect, scopes: ["email:read"] } })).status).toBe(201)
  }
  const cedarText = `@id("no-night") forbid(principal, action == Action::"authorize", resource) when { context.time.minuteOfDay < 60 };`
  const sync = (version: string, activate: boolean) => app.request("POST", "/v1/policies/sync", {
    apiKey: c.apiKey, body: { format: "cedar", version, content: Buffer.from(cedarText).toString("base64"), activate }
  })
  const active = await sync("v1", true)
  expect(active.status).toBe(201)
  expect((await sync("v2-draft", false)).status).toBe(201) // stored, not active: not in the pack
  const summary = await app.request("GET", "/v1/compliance/summary", { apiKey: c.apiKey })
  expect(summary.body).toMatchObject({ policies: { total: 2 }, directory: { users: 3, deprovisioned: 1 } })
  const r = await app.request("GET", "/v1/compliance/evidence-pack", { apiKey: c.apiKey })
  const pack = r.body
  expect(pack.policies.rules.map((p: any) => [p.name, p.effect]).sort()).toEqual([["allow rule", "allow"], ["deny rule", "deny"]])
  expect(pack.policies.cedar).toEqual({
    bundleId: active.body.bundleId, version: "v1", sha256: createHash("sha256").update(cedarText).digest("hex"), policyCount: 1,
    createdAt: active.body.createdAt, text: cedarText
  })
  expect(pack.manifest.files.find((f: any) => f.name === "policies").rows).toBe(3)
  expect((await verifyExport(new TextEncoder().encode(r.text), jwks)).ok).toBe(true)
  // the set's text is signed with the rest: one changed character is refused
  const changed = JSON.parse(r.text)
  changed.policies.cedar.text = cedarText.replace("60", "61")
  expect((await verifyExport(new TextEncoder().encode(JSON.stringify(changed)), jwks)).errors).toEqual([
    "section policies: digest does not match the manifest", "section policies: the Cedar set's text does not match its digest"
  ])
  // another developer sees none of it
  const other = await app.signup()
  expect((await app.request("GET", "/v1/compliance/summary", { apiKey: other.apiKey })).body).toMatchObject({ policies: { total: 0 }, directory: { users: 0, deprovisioned: 0 } })
  expect((await app.request("GET", "/v1/compliance/evidence-pack", { apiKey: other.apiKey })).body.policies).toEqual({ rules: [], cedar: null })
})
