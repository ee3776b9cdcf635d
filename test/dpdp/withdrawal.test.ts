/** Withdrawal of consent (decisions §21): revokes through the one path, flags, ALREADY_WITHDRAWN, the person's revocation. */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { developer, recordBody } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ testClock: true })
})
afterAll(() => app.stop())

const record = async (apiKey: string, grantId: string, over: Record<string, unknown> = {}) => {
  const res = await app.request("POST", "/v1/dpdp/consent-records", { apiKey, body: recordBody(grantId, over) })
  expect(res.status).toBe(201)
  return res.body.recordId as string
}
const events = (developerId: string, type: string) =>
  app.query<{ data: any }>("SELECT data FROM events WHERE developer_id = $1 AND type = $2 ORDER BY created_at, id", [developerId, type])
    .then((rows) => rows.map((r) => r.data))

test("by default every covered grant is revoked in the withdrawal: delegated grants, the consent bundle, grant.revoked", async () => {
  const dev = await developer(app)
  const bundle = await app.request("POST", "/v1/consent-bundles", { apiKey: dev.apiKey, body: { agentId: dev.agentId, userId: "user_1", scopes: ["email:read"] } })
  expect(bundle.status).toBe(201)
  const grantId = (await app.query<{ grantId: string }>("SELECT grant_id FROM consent_bundles WHERE id = $1", [bundle.body.bundleId]))[0]!.grantId
  const sub = await createAgent(app, dev.developerId, ["email:read"], "Sub")
  const child = await app.request("POST", "/v1/grants/delegate", {
    apiKey: dev.apiKey, body: { parentGrantToken: bundle.body.grantToken, subAgentId: sub, scopes: ["email:read"] }
  })
  expect(child.status).toBe(201)
  const recordId = await record(dev.apiKey, grantId)

  const res = await app.request("POST", `/v1/dpdp/consent-records/${recordId}/withdraw`, { apiKey: dev.apiKey, body: { reason: "I changed my mind about Acme" } })
  expect(res.status).toBe(200)
  expect(res.body).toEqual({
    recordId, status: "withdrawn", withdrawnAt: "2026-11-22T10:00:00.000Z", grantRevoked: true, dataDeleted: false,
    revokedGrantIds: [grantId, child.body.grantId], grantsLeftActive: [], dataDeletion: null
  })
  const grants = await app.query<{ id: string; status: string }>("SELECT id, status FROM grants WHERE id = ANY($1) ORDER BY id", [[grantId, child.body.grantId]])
  expect(grants.map((g) => g.status)).toEqual(["revoked", "revoked"])
  expect((await app.query("SELECT status FROM consent_bundles WHERE id = $1", [bundle.body.bundleId]))[0]).toEqual({ status: "revoked" })
  expect((await events(dev.developerId, "grant.revoked")).map((e) => e.grantId).sort()).toEqual([grantId, child.body.grantId].sort())
  expect(await events(dev.developerId, "consent_bundle.revoked")).toHaveLength(1)
  const withdrawn = await events(dev.developerId, "dpdp.consent.withdrawn")
  expect(withdrawn).toEqual([{
    recordId, grantRevoked: true, dataDeleted: false, revokedGrantIds: res.body.revokedGrantIds, grantsLeftActive: [], withdrawnBy: "developer"
  }])
  const audit = await app.query<any>("SELECT principal_id, metadata FROM audit_log WHERE developer_id = $1 AND action = 'service.dpdp.consent_withdrawn'", [dev.developerId])
  expect(audit).toHaveLength(1)
  expect(audit[0].principalId).toBe("user_1")
  // free text stays out of events and the chain
  expect(JSON.stringify([withdrawn, audit])).not.toContain("changed my mind")
  const read = await app.request("GET", `/v1/dpdp/consent-records/${recordId}`, { apiKey: dev.apiKey })
  expect(read.body).toMatchObject({ status: "withdrawn", withdrawnReason: "I changed my mind about Acme", withdrawnBy: "developer", grantStatus: "revoked" })

  const again = await app.request("POST", `/v1/dpdp/consent-records/${recordId}/withdraw`, { apiKey: dev.apiKey, body: { reason: "again" } })
  expect([again.status, again.body.code]).toEqual([409, "ALREADY_WITHDRAWN"])
  expect(await events(dev.developerId, "dpdp.consent.withdrawn")).toHaveLength(1)
})

test("an explicit revokeGrant: false keeps the grant and names it; deleteProcessedData erases what was processed under it; 400 and 404", async () => {
  const dev = await developer(app)
  const other = await developer(app)
  const grant = await dev.grant()
  const recordId = await record(dev.apiKey, grant.id)
  const missing = await app.request("POST", `/v1/dpdp/consent-records/${recordId}/withdraw`, { apiKey: dev.apiKey, body: {} })
  expect([missing.status, missing.body.code]).toEqual([400, "BAD_REQUEST"])
  const foreign = await app.request("POST", `/v1/dpdp/consent-records/${recordId}/withdraw`, { apiKey: other.apiKey, body: { reason: "x" } })
  expect([foreign.status, foreign.body.code]).toEqual([404, "NOT_FOUND"])

  const res = await app.request("POST", `/v1/dpdp/consent-records/${recordId}/withdraw`, {
    apiKey: dev.apiKey, body: { reason: "user asked", revokeGrant: false, deleteProcessedData: true }
  })
  expect(res.body).toMatchObject({ grantRevoked: false, dataDeleted: true, revokedGrantIds: [], grantsLeftActive: [grant.id], dataDeletion: "completed" })
  // the entries processed under the grant lost their metadata (principal kept), the withdrawal's own entry is whole, the chain verifies
  const entries = await app.query<any>("SELECT action, principal_id, metadata, erased_at FROM audit_log WHERE developer_id = $1 AND grant_id = $2 ORDER BY seq", [dev.developerId, grant.id])
  expect(entries.map((e) => [e.action, e.principalId, e.erasedAt !== null, Object.keys(e.metadata).length > 0])).toEqual([
    ["service.dpdp.consent_recorded", "user_1", true, false],
    ["service.dpdp.consent_withdrawn", "user_1", false, true]
  ])
  expect((await app.request("GET", "/v1/audit/verify", { apiKey: dev.apiKey })).body).toMatchObject({ valid: true, erasedEntries: 1, linkOnlyEntries: 0 })
  expect((await app.query("SELECT status FROM grants WHERE id = $1", [grant.id]))[0]).toEqual({ status: "active" })
  expect(await events(dev.developerId, "grant.revoked")).toEqual([])
  expect((await events(dev.developerId, "dpdp.consent.withdrawn"))[0]).toMatchObject({ grantRevoked: false, grantsLeftActive: [grant.id] })
})

test("a grant revoked by the developer leaves its record active; the person revoking on /permissions withdraws it", async () => {
  const dev = await developer(app)
  const g1 = await dev.grant("alice")
  const g2 = await dev.grant("alice")
  const kept = await record(dev.apiKey, g1.id, { dataPrincipalId: "alice" })
  const withdrawnByPerson = await record(dev.apiKey, g2.id, { dataPrincipalId: "alice" })
  expect((await app.request("DELETE", `/v1/grants/${g1.id}`, { apiKey: dev.apiKey })).status).toBe(204)
  expect((await app.request("GET", `/v1/dpdp/consent-records/${kept}`, { apiKey: dev.apiKey })).body).toMatchObject({ status: "active", grantStatus: "revoked" })

  const session = await app.request("POST", "/v1/principal-sessions", { apiKey: dev.apiKey, body: { principalId: "alice" } })
  const revoke = await app.request("DELETE", `/v1/principal/grants/${g2.id}`, { bearer: session.body.sessionToken })
  expect(revoke.status).toBe(204)
  const read = await app.request("GET", `/v1/dpdp/consent-records/${withdrawnByPerson}`, { apiKey: dev.apiKey })
  expect(read.body).toMatchObject({ status: "withdrawn", withdrawnBy: "principal", withdrawnAt: "2026-11-22T10:00:00.000Z", grantStatus: "revoked" })
  expect(await events(dev.developerId, "dpdp.consent.withdrawn")).toEqual([{
    recordId: withdrawnByPerson, grantRevoked: true, dataDeleted: false, revokedGrantIds: [g2.id], grantsLeftActive: [], withdrawnBy: "principal"
  }])
  const later = await app.request("POST", `/v1/dpdp/consent-records/${withdrawnByPerson}/withdraw`, { apiKey: dev.apiKey, body: { reason: "x" } })
  expect(later.body.code).toBe("ALREADY_WITHDRAWN")
})

test("concurrent: two withdrawals give one 200 and one ALREADY_WITHDRAWN; a withdrawal racing the person's revocation withdraws once", async () => {
  const dev = await developer(app)
  const session = (await app.request("POST", "/v1/principal-sessions", { apiKey: dev.apiKey, body: { principalId: "carol" } })).body.sessionToken
  for (let round = 0; round < 3; round++) {
    const g = await dev.grant("carol")
    const recordId = await record(dev.apiKey, g.id, { dataPrincipalId: "carol" })
    const withdraw = () => app.request("POST", `/v1/dpdp/consent-records/${recordId}/withdraw`, { apiKey: dev.apiKey, body: { reason: "r" } })
    const statuses = (await Promise.all([withdraw(), withdraw()])).map((r) => r.status).sort()
    expect(statuses).toEqual([200, 409])
    const g2 = await dev.grant("carol")
    const second = await record(dev.apiKey, g2.id, { dataPrincipalId: "carol" })
    const [w, p] = await Promise.all([
      app.request("POST", `/v1/dpdp/consent-records/${second}/withdraw`, { apiKey: dev.apiKey, body: { reason: "r" } }),
      app.request("DELETE", `/v1/principal/grants/${g2.id}`, { bearer: session })
    ])
    expect(p.status).toBe(204)
    expect([200, 409]).toContain(w.status)
    const events = await app.query("SELECT id FROM events WHERE type = 'dpdp.consent.withdrawn' AND data->>'recordId' = $1", [second])
    expect(events).toHaveLength(1)
    expect((await app.query("SELECT status FROM grants WHERE id = $1", [g2.id]))[0]).toEqual({ status: "revoked" })
  }
})
