/**
 * A developer's world for the gate's test (decisions §20): a provisioned principal holding, through
 * the real endpoints, a pending request, an approved request's unexchanged code, a grant with its
 * token and refresh token, a consent bundle and a vault credential; and a sub-agent to delegate to.
 * `drive` asks every point once; `snapshot` counts what a point could create or count.
 */
import { expect } from "bun:test"
import type { TestApp, TestResponse } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { newUser, scimClient } from "../directory/support.ts"

export const PRINCIPAL = "pat@example.com"

export interface World {
  readonly apiKey: string
  readonly developerId: string
  readonly agentId: string
  readonly subAgentId: string
  readonly scimUserId: string
  readonly sendScim: (method: string, path: string, body?: unknown) => Promise<TestResponse>
  readonly pendingId: string
  readonly approvedCode: string
  readonly grantId: string
  readonly grantToken: string
  readonly refreshToken: string
  readonly bundleId: string
}

const ok = (res: TestResponse, status: number) => {
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status} ${res.text}`)
  return res.body
}

export const authorizeBody = (w: Pick<World, "agentId">, principalId = PRINCIPAL) => ({ agentId: w.agentId, principalId, scopes: ["github:read"] })

export const makeWorld = async (app: TestApp, plan: "free" | "pro" | "enterprise" = "enterprise"): Promise<World> => {
  const c = await scimClient(app, plan)
  const agentId = await createAgent(app, c.developerId, ["github:read", "email:read"], "Gate agent")
  const subAgentId = await createAgent(app, c.developerId, ["github:read"], "Gate sub-agent")
  const scimUserId = ok(await c.send("POST", "/Users", newUser(PRINCIPAL)), 201).id as string
  const authorize = async () => ok(await app.request("POST", "/v1/authorize", { apiKey: c.apiKey, body: authorizeBody({ agentId }) }), 201).authRequestId as string
  const approve = async (id: string) => ok(await app.request("POST", `/v1/consent/${id}/approve`), 200).code as string
  const pendingId = await authorize()
  const approvedCode = await approve(await authorize())
  const tokens = ok(await app.request("POST", "/v1/token", { apiKey: c.apiKey, body: { code: await approve(await authorize()), agentId } }), 201)
  const bundle = ok(await app.request("POST", "/v1/consent-bundles", { apiKey: c.apiKey, body: { agentId, userId: PRINCIPAL, scopes: ["github:read"] } }), 201)
  ok(await app.request("POST", "/v1/vault/credentials", { apiKey: c.apiKey, body: { principalId: PRINCIPAL, service: "github", accessToken: "gho_gate" } }), 201)
  return {
    apiKey: c.apiKey, developerId: c.developerId, agentId, subAgentId, scimUserId, sendScim: c.send, pendingId, approvedCode,
    grantId: tokens.grantId, grantToken: tokens.grantToken, refreshToken: tokens.refreshToken, bundleId: bundle.bundleId
  }
}

/** every point where a grant is made or used, asked once; each answer's status and code (verify: its `valid`) */
export const drive = async (app: TestApp, w: World) => {
  const post = (path: string, body: unknown) => app.request("POST", path, { apiKey: w.apiKey, body })
  const answer = (res: TestResponse) => [res.status, res.body?.code ?? null] as const
  return {
    authorize: answer(await post("/v1/authorize", authorizeBody(w))),
    consentApprove: answer(await app.request("POST", `/v1/consent/${w.pendingId}/approve`)),
    codeExchange: answer(await post("/v1/token", { code: w.approvedCode, agentId: w.agentId })),
    refresh: answer(await post("/v1/token/refresh", { refreshToken: w.refreshToken, agentId: w.agentId })),
    delegate: answer(await post("/v1/grants/delegate", { parentGrantToken: w.grantToken, subAgentId: w.subAgentId, scopes: ["github:read"] })),
    bundleCreate: answer(await post("/v1/consent-bundles", { agentId: w.agentId, userId: PRINCIPAL, scopes: ["github:read"] })),
    bundleRefresh: answer(await post(`/v1/consent-bundles/${w.bundleId}/refresh`, {})),
    vaultExchange: answer(await app.request("POST", "/v1/vault/credentials/exchange", { bearer: w.grantToken, body: { service: "github" } })),
    tokenVerify: (await post("/v1/tokens/verify", { token: w.grantToken })).body.valid as boolean,
    credentialIssue: answer(await post("/v1/credentials/issue", { grantId: w.grantId, format: "vc+jwt" }))
  }
}

/** what the points could have created or counted: rows, used secrets, events */
export const snapshot = async (app: TestApp, w: World) => {
  const n = async (text: string) => Number((await app.query<{ n: number }>(text, [w.developerId]))[0]!.n)
  return {
    grants: await n("SELECT count(*)::int AS n FROM grants WHERE developer_id = $1"),
    tokens: await n("SELECT count(*)::int AS n FROM grant_tokens WHERE developer_id = $1"),
    requests: await n("SELECT count(*)::int AS n FROM auth_requests WHERE developer_id = $1"),
    pending: await n("SELECT count(*)::int AS n FROM auth_requests WHERE developer_id = $1 AND status = 'pending'"),
    usedCodes: await n("SELECT count(*)::int AS n FROM auth_codes WHERE developer_id = $1 AND used_at IS NOT NULL"),
    usedRefreshTokens: await n("SELECT count(*)::int AS n FROM refresh_tokens WHERE developer_id = $1 AND used_at IS NOT NULL"),
    bundles: await n("SELECT count(*)::int AS n FROM consent_bundles WHERE developer_id = $1"),
    bundleKeys: await n("SELECT count(*)::int AS n FROM consent_bundle_audit_keys k JOIN consent_bundles b ON b.id = k.bundle_id WHERE b.developer_id = $1"),
    credentials: await n("SELECT count(*)::int AS n FROM vc_credentials WHERE developer_id = $1"),
    grantEvents: await n("SELECT count(*)::int AS n FROM events WHERE developer_id = $1 AND type IN ('grant.created', 'token.issued', 'consent_bundle.created', 'vc.issued')")
  }
}

/** the refused points changed nothing a point makes or counts */
export const expectNothingCreated = async (app: TestApp, w: World, before: Awaited<ReturnType<typeof snapshot>>) =>
  expect(await snapshot(app, w)).toEqual(before)
