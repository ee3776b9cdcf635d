/**
 * Plans and caps (decisions §16): PLANS_FILE replaces the seeded figures (and a malformed one stops
 * the start naming the variable); the WEBHOOK_ENDPOINTS_* overrides still set the webhook cap; caps
 * answer 402 PLAN_LIMIT_EXCEEDED and hold under concurrent creation; the provider routes validate
 * then answer 503; the quota check falls back to the durable count when the counter store is away.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { Effect, Either, Layer } from "effect"
import { Entitlements, EntitlementsLive } from "../../src/billing/Entitlements.ts"
import { DEFAULT_PLANS } from "../../src/billing/Plans.ts"
import { ConfigError, loadConfig } from "../../src/Config.ts"
import { operatorCommands } from "../../src/operator.ts"
import { Counters, CounterStoreUnavailable } from "../../src/platform/Counters.ts"
import { startTestApp, testPrivateKey, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { authorize, count, freeWith, plansFile } from "./support.ts"
import { makeSigningKey } from "../support/saml-idp.ts"

const CERT = makeSigningKey({ notBefore: new Date(Date.now() - 86_400_000), notAfter: new Date(Date.now() + 365 * 86_400_000) }).certificatePem

let app: TestApp

beforeAll(async () => {
  app = await startTestApp({
    env: {
      PLANS_FILE: plansFile({
        ...freeWith({ agents: 2, webhooks: 1, policies: 3, ssoConnections: 1, authorizationsPerMonth: 3 }),
        capped: { name: "Capped", limits: { activeGrants: 2 }, monthlyFee: 0 },
        team: { name: "Team", limits: { agents: 10 }, monthlyFee: 19.5, currency: "GBP", overage: { vault_exchanges: 0.25 } }
      }),
      RATE_LIMIT_SCALE: "1000",
      RATE_LIMIT_AUTHORIZE_PER_DEVELOPER: "100000"
    }
  })
})
afterAll(async () => {
  await app?.stop()
})

const configError = (env: Record<string, string>) => {
  try {
    loadConfig({ DATABASE_URL: "pglite://memory", REDIS_URL: "memory://", RSA_PRIVATE_KEY: testPrivateKey(), ...env })
    return undefined
  } catch (e) {
    return e instanceof ConfigError ? e.message : String(e)
  }
}

test("PLANS_FILE is validated at start: one line naming the variable", () => {
  expect(configError({ PLANS_FILE: "/nonexistent/plans.json" })).toBe("PLANS_FILE: cannot read /nonexistent/plans.json")
  expect(configError({ PLANS_FILE: plansFile({ free: { name: "Free", limits: { agentz: 1 } } }) })).toStartWith("PLANS_FILE: free.limits.agentz is not a limit")
  expect(configError({ PLANS_FILE: plansFile({ free: { name: "Free", limits: { agents: -1 } } }) })).toBe("PLANS_FILE: free.limits.agents must be a whole number or null")
  expect(configError({ PLANS_FILE: plansFile({ free: { name: "Free", limits: {}, monthlyFee: 1.23456 } }) })).toBe("PLANS_FILE: free.monthlyFee must have at most 4 decimal places")
  expect(configError({ PLANS_FILE: plansFile({ Pro: { name: "x", limits: {} } }) })).toStartWith("PLANS_FILE: plan code \"Pro\"")
  // the old webhook overrides still set the plans' webhook caps
  const config = loadConfig({ DATABASE_URL: "pglite://memory", REDIS_URL: "memory://", RSA_PRIVATE_KEY: testPrivateKey(), WEBHOOK_ENDPOINTS_PRO: "7" })
  expect([config.plans.pro!.limits.webhooks, config.plans.free!.limits.webhooks, config.plans.enterprise!.limits.webhooks]).toEqual([7, 30, null])
  expect(config.plans.free!.limits).toEqual(DEFAULT_PLANS.free!.limits)
})

test("GET /v1/billing/plans shows the file's figures; a file's new plan can be set", async () => {
  const { apiKey, developerId } = await app.signup()
  // the operator command (before the key is used, so no cached developer is read in embedded mode)
  expect(await app.run(operatorCommands["billing set-plan"]!([developerId, "team"], app.config))).toBe(`developer ${developerId} is now on the team plan`)
  await expect(app.run(operatorCommands["billing set-plan"]!([developerId, "gold"], app.config))).rejects.toThrow('unknown plan "gold"')
  expect(await app.query("SELECT data FROM events WHERE developer_id = $1 AND type = 'billing.subscription.updated'", [developerId]))
    .toEqual([{ data: { plan: "team", status: "active" } }])
  const res = await app.request("GET", "/v1/billing/plans", { apiKey })
  expect(res.status).toBe(200)
  const team = res.body.plans.find((p: any) => p.code === "team")
  expect(team).toEqual({
    code: "team", name: "Team", monthlyFee: 19.5, currency: "GBP", overage: { vault_exchanges: 0.25 },
    limits: { agents: 10, webhooks: null, activeGrants: null, policies: null, scimTokens: null, ssoConnections: null,
      authorizationsPerMonth: null, tokenExchangesPerMonth: null, resourceServers: null, oauthClients: null }
  })
  // the plans table holds them too (invoices are priced from it); a developer can be put on the new plan
  expect((await app.query<{ fee: string }>("SELECT monthly_fee::text AS fee FROM plans WHERE code = 'team'"))[0]!.fee).toBe("19.5000")
  await expect(app.query("UPDATE developers SET plan = 'nosuch' WHERE id = $1", [developerId])).rejects.toThrow()
  const sub = await app.request("GET", "/v1/billing/subscription", { apiKey })
  expect(sub.body).toMatchObject({ plan: "team", status: "active", cancelAtPeriodEnd: false })
})

test("agent cap: 402 PLAN_LIMIT_EXCEEDED, and exactly the cap under concurrent creation", async () => {
  const { apiKey, developerId } = await app.signup()
  const create = (i: number) => app.request("POST", "/v1/agents", { apiKey, body: { name: `a${i}`, scopes: ["email:read"] } })
  const results = await Promise.all([0, 1, 2, 3, 4, 5].map(create))
  expect(results.map((r) => r.status).sort()).toEqual([201, 201, 402, 402, 402, 402])
  const refused = results.find((r) => r.status === 402)!
  expect(refused.body).toEqual({ code: "PLAN_LIMIT_EXCEEDED", message: "The Free plan allows 2 agents", requestId: refused.headers.get("x-request-id") })
  expect(await count(app, "SELECT count(*) AS n FROM agents WHERE developer_id = $1", [developerId])).toBe(2)
  // webhooks: the file's cap of 1
  const hook = (i: number) => app.request("POST", "/v1/webhooks", { apiKey, body: { url: `http://127.0.0.1:9/${i}`, events: ["grant.created"] } })
  expect((await hook(1)).status).toBe(201)
  const second = await hook(2)
  expect([second.status, second.body.code, second.body.message]).toEqual([402, "PLAN_LIMIT_EXCEEDED", "The free plan allows 1 webhook endpoints"])
  const ent = await app.request("GET", "/v1/billing/entitlements", { apiKey })
  expect(ent.body.usage.agents).toEqual({ used: 2, limit: 2, pct: 100 })
  expect(ent.body.usage.webhooks).toEqual({ used: 1, limit: 1, pct: 100 })
  // policies: the file's cap of 3, held under concurrent creation too
  const rule = (i: number) => app.request("POST", "/v1/policies", { apiKey, body: { name: `r${i}`, effect: "deny", agentId: `ag_${i}` } })
  const rules = await Promise.all([0, 1, 2, 3, 4, 5].map(rule))
  expect(rules.map((r) => r.status).sort()).toEqual([201, 201, 201, 402, 402, 402])
  expect(rules.find((r) => r.status === 402)!.body).toMatchObject({ code: "PLAN_LIMIT_EXCEEDED", message: "The Free plan allows 3 policies" })
  expect(await count(app, "SELECT count(*) AS n FROM policies WHERE developer_id = $1", [developerId])).toBe(3)
  // SSO connections: the file's cap of 1, the legacy /v1/sso/config included
  const saml = (i: number) => app.request("POST", "/v1/sso/connections", {
    apiKey, body: { name: `idp${i}`, protocol: "saml", idpEntityId: `https://idp${i}.example/`, idpSsoUrl: `https://idp${i}.example/sso`, idpCertificates: [CERT] }
  })
  const connections = await Promise.all([0, 1, 2].map(saml))
  expect(connections.map((r) => r.status).sort()).toEqual([201, 402, 402])
  expect(connections.find((r) => r.status === 402)!.body).toMatchObject({ code: "PLAN_LIMIT_EXCEEDED", message: "The Free plan allows 1 SSO connections" })
  const legacy = await app.request("POST", "/v1/sso/config", { apiKey, body: { issuerUrl: "https://idp.example", clientId: "c", clientSecret: "s" } })
  expect([legacy.status, legacy.body.code]).toEqual([402, "PLAN_LIMIT_EXCEEDED"])
  expect((await app.request("GET", "/v1/billing/entitlements", { apiKey })).body.usage.ssoConnections).toEqual({ used: 1, limit: 1, pct: 100 })
})

test("provider routes validate their bodies, then 503 SERVICE_UNAVAILABLE; usage routes check their parameters", async () => {
  const { apiKey } = await app.signup()
  const bad = await app.request("POST", "/v1/billing/checkout", { apiKey, body: { plan: "pro", successUrl: "ftp://x", cancelUrl: "https://x" } })
  expect([bad.status, bad.body.code]).toEqual([400, "BAD_REQUEST"])
  expect((await app.request("POST", "/v1/billing/checkout", { apiKey, body: { plan: "gold", successUrl: "https://x", cancelUrl: "https://x" } })).status).toBe(400)
  const checkout = await app.request("POST", "/v1/billing/checkout", { apiKey, body: { plan: "pro", successUrl: "https://x/ok", cancelUrl: "https://x/no" } })
  expect([checkout.status, checkout.body.code, checkout.body.message]).toEqual([503, "SERVICE_UNAVAILABLE", "Billing provider not configured"])
  expect((await app.request("POST", "/v1/billing/portal", { apiKey, body: { returnUrl: "nope" } })).status).toBe(400)
  expect((await app.request("POST", "/v1/billing/portal", { apiKey, body: { returnUrl: "https://x" } })).status).toBe(503)
  expect((await app.request("POST", "/v1/billing/webhook", { body: { nothing: 1 } })).status).toBe(400)
  expect((await app.request("POST", "/v1/billing/webhook", { body: { id: "evt_1", type: "invoice.paid" } })).status).toBe(503)
  for (const days of ["0", "91", "-1", "x"]) expect((await app.request("GET", `/v1/usage/history?days=${days}`, { apiKey })).status).toBe(400)
  const history = await app.request("GET", "/v1/usage/history?days=3", { apiKey })
  expect([history.status, history.body.entries.length]).toEqual([200, 3])
  expect((await app.request("GET", "/v1/usage", { apiKey })).body).toMatchObject({ authorizations: 0, tokenExchanges: 0 })
})

test("with the counter store away, the durable count decides the quota", async () => {
  const { apiKey, developerId } = await app.signup({ mode: "sandbox" })
  const agentId = await createAgent(app, developerId)
  const down = Layer.effect(Counters, Effect.map(Counters, (store) => ({
    ...store,
    quotaHit: () => Effect.fail(new CounterStoreUnavailable({ cause: "down" })),
    quotaSeed: () => Effect.fail(new CounterStoreUnavailable({ cause: "down" }))
  })))
  const admitWithoutStore = () =>
    app.run(Effect.either(Effect.flatMap(Entitlements, (e) => e.admit({ id: developerId, plan: "free" }, "authorizations")).pipe(
      Effect.provide(EntitlementsLive.pipe(Layer.provide(down)))
    )))
  for (let i = 0; i < 2; i++) expect((await authorize(app, apiKey, agentId)).status).toBe(201)
  const admitted = await admitWithoutStore()
  expect(Either.isRight(admitted) && admitted.right.refusal).toBe(undefined)
  expect((await authorize(app, apiKey, agentId)).status).toBe(201)
  const refused = await admitWithoutStore()
  expect(Either.isRight(refused) && refused.right.refusal?._tag).toBe("QuotaExceeded")
  expect((await authorize(app, apiKey, agentId)).status).toBe(402)
})

test("active grants: refused where one is asked for (authorize, delegation, bundle) at the cap; a revocation makes room at once", async () => {
  const { apiKey, developerId } = await app.signup({ mode: "sandbox" })
  await app.query("UPDATE developers SET plan = 'capped' WHERE id = $1", [developerId])
  await new Promise((r) => setTimeout(r, 50)) // the API-key cache hears the change
  const agentId = await createAgent(app, developerId)
  const first = await authorize(app, apiKey, agentId)
  expect(first.status).toBe(201)
  const token = await app.request("POST", "/v1/token", { apiKey, body: { code: first.body.code, agentId } })
  expect(token.status).toBe(201)
  expect((await authorize(app, apiKey, agentId)).status).toBe(201)
  const third = await authorize(app, apiKey, agentId)
  expect([third.status, third.body.code, third.body.message]).toEqual([402, "PLAN_LIMIT_EXCEEDED", "The Capped plan allows 2 active grants; revoke some or let them expire"])
  const subAgentId = await createAgent(app, developerId)
  const delegated = await app.request("POST", "/v1/grants/delegate", { apiKey, body: { parentGrantToken: token.body.grantToken, subAgentId, scopes: ["email:read"] } })
  expect([delegated.status, delegated.body.code]).toEqual([402, "PLAN_LIMIT_EXCEEDED"])
  const bundle = await app.request("POST", "/v1/consent-bundles", { apiKey, body: { agentId, userId: "user_1", scopes: ["email:read"] } })
  expect([bundle.status, bundle.body.code]).toEqual([402, "PLAN_LIMIT_EXCEEDED"])
  expect(await count(app, "SELECT count(*) AS n FROM grants WHERE developer_id = $1", [developerId])).toBe(2)
  expect((await app.request("DELETE", `/v1/grants/${token.body.grantId}`, { apiKey })).status).toBe(204)
  expect((await authorize(app, apiKey, agentId)).status).toBe(201)
})
