/**
 * decisions §13: policies at every point where a grant is made or used. Deny overrides; an allow
 * auto-approves only where nothing else (a passkey requirement) stands in the way; denials and
 * auto-approvals are in the decision log, the audit chain and (denials) the events.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent, issueGrant } from "../support/fixtures.ts"
import { authorize, createRule, makeDirectory, syncCedar } from "./support.ts"

let app: TestApp
const directory = makeDirectory()
beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" }, policyDirectory: directory.layer })
})
afterAll(async () => {
  await app?.stop()
})

const setup = async () => {
  const dev = await app.signup()
  const agentId = await createAgent(app, dev.developerId, ["email:read", "email:send", "github:read"])
  return { ...dev, agentId }
}
const auditActions = async (developerId: string) =>
  (await app.query<{ action: string; metadata: any }>("SELECT action, metadata FROM audit_log WHERE developer_id = $1 ORDER BY seq", [developerId]))
const eventsOf = async (developerId: string, type: string) =>
  app.query<{ data: any }>("SELECT data FROM events WHERE developer_id = $1 AND type = $2 ORDER BY id", [developerId, type])

describe("authorize", () => {
  test("a deny is 403 POLICY_DENIED, logged, chained and announced; no request is stored", async () => {
    const { apiKey, developerId, agentId } = await setup()
    const deny = await createRule(app, apiKey, { name: "no sending", effect: "deny", scopes: ["email:send"] })
    const res = await authorize(app, apiKey, agentId, "user_1", ["email:read", "email:send"])
    expect(res.status).toBe(403)
    expect(res.body.code).toBe("POLICY_DENIED")
    expect(res.body.message).toContain(deny.id)
    expect(await app.query("SELECT id FROM auth_requests WHERE developer_id = $1", [developerId])).toEqual([])
    const log = await app.request("GET", "/v1/policies/decisions", { apiKey })
    expect(log.body.decisions).toHaveLength(1)
    expect(log.body.decisions[0]).toMatchObject({ effect: "deny", action: "authorize", agentId, principalId: "user_1", policyId: deny.id })
    expect(log.body.decisions[0].decisionId).toMatch(/^pdec_/)
    const audit = await auditActions(developerId)
    expect(audit.map((a) => a.action)).toEqual(["service.policy.denied"])
    expect(audit[0]!.metadata).toMatchObject({ decisionId: log.body.decisions[0].decisionId, policyId: deny.id })
    expect((await eventsOf(developerId, "policy.denied"))[0]!.data).toEqual({
      decisionId: log.body.decisions[0].decisionId, action: "authorize", agentId, principalId: "user_1", policyId: deny.id
    })
  })

  test("priority never lets an allow beat a deny", async () => {
    const { apiKey, agentId } = await setup()
    await createRule(app, apiKey, { name: "allow all reads", effect: "allow", priority: 1000, scopes: ["email:read"] })
    const deny = await createRule(app, apiKey, { name: "deny user_2", effect: "deny", priority: -1000, principalId: "user_2" })
    expect((await authorize(app, apiKey, agentId, "user_2", ["email:read"])).body.code).toBe("POLICY_DENIED")
    const ok = await authorize(app, apiKey, agentId, "user_3", ["email:read"])
    expect(ok.status).toBe(201)
    expect(ok.body.policyEnforced).toBe(true)
    void deny
  })

  test("an allow auto-approves: a code at once, the grant says policy, grant.created carries it, the chain records it", async () => {
    const { apiKey, developerId, agentId } = await setup()
    const allow = await createRule(app, apiKey, { name: "reads", effect: "allow", scopes: ["email:read"] })
    const res = await authorize(app, apiKey, agentId, "user_1", ["email:read"])
    expect(res.status).toBe(201)
    expect(res.body).toMatchObject({ policyEnforced: true, effect: "allow", policyId: allow.id })
    const token = await app.request("POST", "/v1/token", { apiKey, body: { code: res.body.code, agentId } })
    expect(token.status).toBe(201)
    const [grant] = await app.query<any>("SELECT approval_method, policy_id FROM grants WHERE id = $1", [token.body.grantId])
    expect(grant).toEqual({ approvalMethod: "policy", policyId: allow.id })
    expect((await eventsOf(developerId, "grant.created"))[0]!.data).toMatchObject({ grantId: token.body.grantId, approvalMethod: "policy", policyId: allow.id })
    const log = (await app.request("GET", "/v1/policies/decisions?effect=allow", { apiKey })).body.decisions
    expect(log).toHaveLength(1)
    expect(log[0]).toMatchObject({ effect: "allow", grantId: token.body.grantId, policyId: allow.id })
    expect((await auditActions(developerId)).map((a) => a.action)).toContain("service.policy.auto_approved")
    // a scope outside the allow stays with the person
    const pending = await authorize(app, apiKey, agentId, "user_1", ["email:read", "email:send"])
    expect(pending.status).toBe(201)
    expect(pending.body.code).toBeUndefined()
  })

  test("an allow never skips fidoRequired: the request stays pending", async () => {
    const { apiKey, developerId, agentId } = await setup()
    await app.request("PATCH", "/v1/me", { apiKey, body: { fidoRequired: true } })
    await createRule(app, apiKey, { name: "everything", effect: "allow" })
    const res = await authorize(app, apiKey, agentId, "user_1", ["email:read"])
    expect(res.status).toBe(201)
    expect(res.body.code).toBeUndefined()
    expect(res.body.policyEnforced).toBeUndefined()
    const [request] = await app.query<any>("SELECT status FROM auth_requests WHERE id = $1", [res.body.authRequestId])
    expect(request.status).toBe("pending")
    expect(await app.query("SELECT id FROM grants WHERE developer_id = $1", [developerId])).toEqual([])
  })

  test("an inactive principal is denied by the policies too (built in); a Cedar forbid on a group denies its members", async () => {
    // (the directory itself refuses an inactive principal first, 403 PRINCIPAL_INACTIVE, before any
    // policy: decisions §20, test/gate; this stub reaches only the policies' view of the directory)
    const { apiKey, agentId } = await setup()
    directory.groups.set("contractor_1", ["contractors"])
    await syncCedar(app, apiKey, `@id("no-contractor-mail") forbid(principal, action, resource in Group::"contractors") when { context.scopes.contains("email:send") };`)
    directory.inactive.add("gone_user")
    const inactive = await authorize(app, apiKey, agentId, "gone_user", ["email:read"])
    expect([inactive.status, inactive.body.code]).toEqual([403, "POLICY_DENIED"])
    expect((await authorize(app, apiKey, agentId, "contractor_1", ["email:send"])).body.code).toBe("POLICY_DENIED")
    expect((await authorize(app, apiKey, agentId, "contractor_1", ["email:read"])).status).toBe(201)
    expect((await authorize(app, apiKey, agentId, "staff_1", ["email:send"])).status).toBe(201)
    const log = (await app.request("GET", "/v1/policies/decisions?effect=deny", { apiKey })).body.decisions
    expect(log.map((d: any) => d.policyId)).toEqual(["no-contractor-mail", "builtin:principal-inactive"])
  })
})

describe("the other points", () => {
  test("delegate: a deny naming it is 403 POLICY_DENIED; without one the delegation works", async () => {
    const { apiKey, developerId, agentId } = await setup()
    const sub = await createAgent(app, developerId, ["email:read"])
    const { token } = await issueGrant(app, { developerId, agentId, scopes: ["email:read"] })
    await createRule(app, apiKey, { name: "no sub-agents", effect: "deny", actions: ["delegate"], agentId: sub })
    const denied = await app.request("POST", "/v1/grants/delegate", { apiKey, body: { parentGrantToken: token.grantToken, subAgentId: sub, scopes: ["email:read"] } })
    expect([denied.status, denied.body.code]).toEqual([403, "POLICY_DENIED"])
    expect(await app.query("SELECT id FROM grants WHERE agent_id = $1", [sub])).toEqual([])
    const other = await createAgent(app, developerId, ["email:read"])
    const ok = await app.request("POST", "/v1/grants/delegate", { apiKey, body: { parentGrantToken: token.grantToken, subAgentId: other, scopes: ["email:read"] } })
    expect(ok.status).toBe(201)
  })

  test("bundle create: a deny is 403 POLICY_DENIED and nothing is issued", async () => {
    const { apiKey, developerId, agentId } = await setup()
    await createRule(app, apiKey, { name: "no offline", effect: "deny", actions: ["bundle.create"] })
    const res = await app.request("POST", "/v1/consent-bundles", { apiKey, body: { agentId, userId: "user_1", scopes: ["email:read"] } })
    expect([res.status, res.body.code]).toEqual([403, "POLICY_DENIED"])
    expect(await app.query("SELECT id FROM consent_bundles WHERE developer_id = $1", [developerId])).toEqual([])
  })

  test("refresh: a deny is 400 INVALID_GRANT and the refresh token stays usable", async () => {
    const { apiKey, agentId } = await setup()
    const allow = await createRule(app, apiKey, { name: "reads", effect: "allow", scopes: ["email:read"] })
    const code = (await authorize(app, apiKey, agentId, "user_1", ["email:read"])).body.code
    const tokens = (await app.request("POST", "/v1/token", { apiKey, body: { code, agentId } })).body
    const deny = await createRule(app, apiKey, { name: "freeze", effect: "deny", actions: ["token.refresh"] })
    const denied = await app.request("POST", "/v1/token/refresh", { apiKey, body: { refreshToken: tokens.refreshToken, agentId } })
    expect([denied.status, denied.body.code]).toEqual([400, "INVALID_GRANT"])
    expect(denied.body.message).toContain(deny.id)
    expect((await app.request("DELETE", `/v1/policies/${deny.id}`, { apiKey })).status).toBe(204)
    const again = await app.request("POST", "/v1/token/refresh", { apiKey, body: { refreshToken: tokens.refreshToken, agentId } })
    expect(again.status).toBe(201)
    void allow
  })

  test("vault exchange: evaluated only when a policy names it; a deny is 403 FORBIDDEN", async () => {
    const { apiKey, developerId, agentId } = await setup()
    const stored = await app.request("POST", "/v1/vault/credentials", { apiKey, body: { principalId: "user_1", service: "github", accessToken: "gho_secret" } })
    expect(stored.status).toBe(201)
    const { token } = await issueGrant(app, { developerId, agentId, scopes: ["github:read"] })
    const exchange = () => app.request("POST", "/v1/vault/credentials/exchange", { bearer: token.grantToken, body: { service: "github" } })
    // a deny that does not name vault.exchange leaves exchanges alone
    await createRule(app, apiKey, { name: "authorize only", effect: "deny" })
    expect((await exchange()).status).toBe(200)
    const deny = await createRule(app, apiKey, { name: "no vault", effect: "deny", actions: ["vault.exchange"], principalId: "user_1" })
    const denied = await exchange()
    expect([denied.status, denied.body.code]).toEqual([403, "FORBIDDEN"])
    expect(denied.body.message).toContain(deny.id)
    await app.request("DELETE", `/v1/policies/${deny.id}`, { apiKey })
    expect((await exchange()).status).toBe(200)
    // a Cedar set naming the action turns it on too
    await syncCedar(app, apiKey, `forbid(principal, action == Action::"vault.exchange", resource) when { context.scopes.contains("github:read") };`)
    expect((await exchange()).status).toBe(403)
  })

  test("vault exchange: a Cedar forbid with an unconstrained action, or naming the action only in `when`, applies (§13 revised)", async () => {
    const { apiKey, developerId, agentId } = await setup()
    await app.request("POST", "/v1/vault/credentials", { apiKey, body: { principalId: "user_1", service: "github", accessToken: "gho_secret" } })
    const { token } = await issueGrant(app, { developerId, agentId, scopes: ["github:read"] })
    const exchange = () => app.request("POST", "/v1/vault/credentials/exchange", { bearer: token.grantToken, body: { service: "github" } })
    expect((await exchange()).status).toBe(200)
    await syncCedar(app, apiKey, `forbid(principal, action, resource) when { context.scopes.contains("github:read") };`)
    const denied = await exchange()
    expect([denied.status, denied.body.code]).toEqual([403, "FORBIDDEN"])
    await syncCedar(app, apiKey, `permit(principal, action, resource);`, "2")
    expect((await exchange()).status).toBe(200)
    await syncCedar(app, apiKey, `forbid(principal, action, resource) when { action == Action::"vault.exchange" };`, "3")
    expect((await exchange()).status).toBe(403)
  })
})
