/**
 * The gate (decisions §20), through the production layers (src/Server.ts, as every test app starts
 * them): every point where a grant is made or used, driven with each refusal (a suspended agent, a
 * principal deprovisioned, also while the request is in flight, a Cedar forbid with an unconstrained
 * action, a plan's quota and cap at 100 %), answers its code and creates or counts nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import pg from "pg"
import { plansFile } from "../billing/support.ts"
import { patch } from "../directory/support.ts"
import { b64 } from "../policies/support.ts"
import { startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { authorizeBody, drive, expectNothingCreated, makeWorld, PRINCIPAL, snapshot, type World } from "./support.ts"

const LARGE = { agents: null, webhooks: null, activeGrants: null, policies: null, scimTokens: null, ssoConnections: null }
let app: TestApp
beforeAll(async () => {
  app = await startTestApp({
    env: {
      RATE_LIMIT_SCALE: "1000",
      RATE_LIMIT_AUTHORIZE_PER_DEVELOPER: "100000",
      // "tiny": a plan that stops at 100 % (no overage price): 3 authorizations and 1 token exchange a month, 2 active grants
      PLANS_FILE: plansFile({
        free: { name: "Free", limits: { ...LARGE, authorizationsPerMonth: null, tokenExchangesPerMonth: null }, monthlyFee: 0, currency: "USD" },
        enterprise: { name: "Enterprise", limits: { ...LARGE, authorizationsPerMonth: null, tokenExchangesPerMonth: null }, monthlyFee: 0, currency: "USD" },
        tiny: { name: "Tiny", limits: { ...LARGE, activeGrants: 2, authorizationsPerMonth: 3, tokenExchangesPerMonth: 1 }, monthlyFee: 0, currency: "USD" }
      })
    }
  })
})
afterAll(() => app?.stop())

const deprovisionNone = (w: World) => app.request("PATCH", "/v1/scim/settings", { apiKey: w.apiKey, body: { deprovision: "none" } })

describe("each refusal at every point", () => {
  test("a suspended agent: AGENT_SUSPENDED wherever it would get or use a grant; nothing created", async () => {
    const w = await makeWorld(app)
    expect((await app.request("PATCH", `/v1/agents/${w.agentId}`, { apiKey: w.apiKey, body: { status: "suspended" } })).status).toBe(200)
    const before = await snapshot(app, w)
    expect(await drive(app, w)).toEqual({
      authorize: [403, "AGENT_SUSPENDED"],
      consentApprove: [403, "AGENT_SUSPENDED"],
      codeExchange: [403, "AGENT_SUSPENDED"],
      refresh: [403, "AGENT_SUSPENDED"],
      // the parent token's online status names it revoked before the gate is asked
      delegate: [400, "INVALID_TOKEN"],
      bundleCreate: [403, "AGENT_SUSPENDED"],
      // the suspension revoked the agent's bundles (decisions §19)
      bundleRefresh: [409, "BUNDLE_REVOKED"],
      // the token's online status is the gate's first step at the vault (its agent is not active)
      vaultExchange: [401, "UNAUTHORIZED"],
      tokenVerify: false,
      credentialIssue: [403, "AGENT_SUSPENDED"]
    })
    await expectNothingCreated(app, w, before)
  })

  test("a deprovisioned principal (deprovision \"none\": the grants stay): PRINCIPAL_INACTIVE at every point; nothing created", async () => {
    const w = await makeWorld(app)
    expect((await deprovisionNone(w)).status).toBe(200)
    expect((await w.sendScim("PATCH", `/Users/${w.scimUserId}`, patch({ op: "replace", value: { active: false } }))).status).toBe(200)
    const before = await snapshot(app, w)
    expect(await drive(app, w)).toEqual({
      authorize: [403, "PRINCIPAL_INACTIVE"],
      consentApprove: [403, "PRINCIPAL_INACTIVE"],
      codeExchange: [403, "PRINCIPAL_INACTIVE"],
      refresh: [403, "PRINCIPAL_INACTIVE"],
      delegate: [403, "PRINCIPAL_INACTIVE"],
      bundleCreate: [403, "PRINCIPAL_INACTIVE"],
      bundleRefresh: [403, "PRINCIPAL_INACTIVE"],
      vaultExchange: [403, "PRINCIPAL_INACTIVE"],
      tokenVerify: false,
      credentialIssue: [403, "PRINCIPAL_INACTIVE"]
    })
    await expectNothingCreated(app, w, before)
  })

  test("a Cedar forbid with an unconstrained action: every point denies (refresh INVALID_GRANT, the vault FORBIDDEN, §13); each denial logged", async () => {
    const w = await makeWorld(app)
    const synced = await app.request("POST", "/v1/policies/sync", {
      apiKey: w.apiKey, body: { format: "cedar", version: "1", content: b64(`@id("nothing") forbid(principal, action, resource);`), activate: true }
    })
    expect(synced.status).toBe(201)
    const before = await snapshot(app, w)
    expect(await drive(app, w)).toEqual({
      authorize: [403, "POLICY_DENIED"],
      consentApprove: [403, "POLICY_DENIED"],
      codeExchange: [403, "POLICY_DENIED"],
      refresh: [400, "INVALID_GRANT"],
      delegate: [403, "POLICY_DENIED"],
      bundleCreate: [403, "POLICY_DENIED"],
      bundleRefresh: [403, "POLICY_DENIED"],
      vaultExchange: [403, "FORBIDDEN"],
      tokenVerify: false,
      credentialIssue: [403, "POLICY_DENIED"]
    })
    await expectNothingCreated(app, w, before)
    // the refusal rolled the point's work back, not its decision log: one deny per point, and policy.denied
    const decisions = await app.query<{ action: string }>(
      "SELECT action FROM policy_decisions WHERE developer_id = $1 AND effect = 'deny' ORDER BY action", [w.developerId])
    expect(decisions.map((d) => d.action)).toEqual([
      "authorize", "bundle.create", "bundle.refresh", "code.exchange", "consent.approve", "credential.issue", "delegate", "token.refresh",
      "token.verify", "vault.exchange"
    ])
    const denied = await app.query("SELECT 1 FROM events WHERE developer_id = $1 AND type = 'policy.denied'", [w.developerId])
    expect(denied).toHaveLength(10)
  })

  test("a plan at 100 %: QUOTA_EXCEEDED at authorize and code exchange, PLAN_LIMIT_EXCEEDED where a grant is asked for; nothing counted", async () => {
    const { apiKey, developerId } = await app.signup()
    await app.query("UPDATE developers SET plan = 'tiny' WHERE id = $1", [developerId])
    const agentId = await createAgent(app, developerId, ["github:read"], "Tiny agent")
    const subAgentId = await createAgent(app, developerId, ["github:read"], "Tiny sub")
    const authorize = () => app.request("POST", "/v1/authorize", { apiKey, body: authorizeBody({ agentId }, "tiny@example.com") })
    const pending = (await authorize()).body.authRequestId
    const code = (await app.request("POST", `/v1/consent/${(await authorize()).body.authRequestId}/approve`)).body.code
    const tokens = await app.request("POST", "/v1/token", { apiKey, body: { code, agentId } })
    expect(tokens.status).toBe(201)
    // 2 of 3 authorizations, 1 of 1 token exchange; the third authorization reaches 100 %
    expect((await authorize()).status).toBe(201) // the third
    const requests = async () => Number((await app.query("SELECT count(*)::int AS n FROM auth_requests WHERE developer_id = $1", [developerId]))[0].n)
    const grants = async () => Number((await app.query("SELECT count(*)::int AS n FROM grants WHERE developer_id = $1", [developerId]))[0].n)
    const tokensIssued = async () => Number((await app.query("SELECT count(*)::int AS n FROM grant_tokens WHERE developer_id = $1", [developerId]))[0].n)
    const before = { requests: await requests(), grants: await grants(), tokens: await tokensIssued() }
    expect([(await authorize()).status, (await authorize()).body.code]).toEqual([402, "QUOTA_EXCEEDED"])
    // the person approves the pending request (approval is never capped): 2 of 2 active grants
    const second = (await app.request("POST", `/v1/consent/${pending}/approve`)).body.code
    const exchanged = await app.request("POST", "/v1/token", { apiKey, body: { code: second, agentId } })
    expect([exchanged.status, exchanged.body.code]).toEqual([402, "QUOTA_EXCEEDED"])
    const delegated = await app.request("POST", "/v1/grants/delegate", {
      apiKey, body: { parentGrantToken: tokens.body.grantToken, subAgentId, scopes: ["github:read"] }
    })
    expect([delegated.status, delegated.body.code]).toEqual([402, "PLAN_LIMIT_EXCEEDED"])
    const bundle = await app.request("POST", "/v1/consent-bundles", { apiKey, body: { agentId, userId: "tiny@example.com", scopes: ["github:read"] } })
    expect([bundle.status, bundle.body.code]).toEqual([402, "PLAN_LIMIT_EXCEEDED"])
    expect({ requests: await requests(), grants: await grants(), tokens: await tokensIssued() })
      .toEqual({ ...before, grants: before.grants + 1 }) // the approval's grant alone
    // the refused exchange left its code unused; the plan's usage is what succeeded
    expect((await app.query("SELECT used_at FROM auth_codes WHERE developer_id = $1 AND used_at IS NULL", [developerId]))).toHaveLength(1)
    const usage = (await app.request("GET", "/v1/billing/entitlements", { apiKey })).body.usage
    expect([usage.authorizationsPerMonth.used, usage.tokenExchangesPerMonth.used, usage.activeGrants.used]).toEqual([3, 1, 2])
  })
})

describe.skipIf(!usingRealPostgres)("a principal deprovisioned while the request is in flight (real PostgreSQL)", () => {
  test("each grant-making point waits for the deprovisioning's transaction, then answers PRINCIPAL_INACTIVE; nothing created", async () => {
    const w = await makeWorld(app)
    expect((await deprovisionNone(w)).status).toBe(200)
    const points: Record<string, () => Promise<{ status: number; body: any }>> = {
      authorize: () => app.request("POST", "/v1/authorize", { apiKey: w.apiKey, body: authorizeBody(w) }),
      consentApprove: () => app.request("POST", `/v1/consent/${w.pendingId}/approve`),
      codeExchange: () => app.request("POST", "/v1/token", { apiKey: w.apiKey, body: { code: w.approvedCode, agentId: w.agentId } }),
      refresh: () => app.request("POST", "/v1/token/refresh", { apiKey: w.apiKey, body: { refreshToken: w.refreshToken, agentId: w.agentId } }),
      delegate: () => app.request("POST", "/v1/grants/delegate", {
        apiKey: w.apiKey, body: { parentGrantToken: w.grantToken, subAgentId: w.subAgentId, scopes: ["github:read"] }
      }),
      bundleCreate: () => app.request("POST", "/v1/consent-bundles", { apiKey: w.apiKey, body: { agentId: w.agentId, userId: PRINCIPAL, scopes: ["github:read"] } }),
      bundleRefresh: () => app.request("POST", `/v1/consent-bundles/${w.bundleId}/refresh`, { apiKey: w.apiKey, body: {} })
    }
    const waiting = async () => (await app.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"))[0].n > 0
    for (const [point, send] of Object.entries(points)) {
      const before = await snapshot(app, w)
      const other = new pg.Client({ connectionString: app.databaseUrl })
      await other.connect()
      try {
        // another connection deprovisions the principal and holds its transaction open
        await other.query("BEGIN")
        await other.query("UPDATE scim_users SET active = false WHERE id = $1", [w.scimUserId])
        const pending = send()
        for (let i = 0; i < 400 && !(await waiting()); i++) await Bun.sleep(25)
        expect([point, await waiting()]).toEqual([point, true])
        await other.query("COMMIT")
        const res = await pending
        expect([point, res.status, res.body.code]).toEqual([point, 403, "PRINCIPAL_INACTIVE"])
      } finally {
        await other.end()
      }
      await expectNothingCreated(app, w, before)
      await app.query("UPDATE scim_users SET active = true WHERE id = $1", [w.scimUserId])
    }
  })
})
