/**
 * fidoRequired holds for consent bundles too (decisions §12): a developer requiring passkeys gets a
 * bundle only for an approved authorization request whose approval was made with one, consumed by
 * the bundle. Every change of a developer setting is written to the audit chain (§19).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { AuditChain } from "../../src/platform/AuditChain.ts"
import { SoftAuthenticator } from "../passkeys/softAuthenticator.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"

const ORIGIN = "https://id.example.test"
const RP_ID = "example.test"

let app: TestApp

beforeAll(async () => {
  app = await startTestApp({ env: { WEBAUTHN_ORIGIN: ORIGIN, WEBAUTHN_RP_ID: RP_ID, WEBAUTHN_RP_NAME: "Acme Auth", RATE_LIMIT_SCALE: "100" } })
}, 120_000)
afterAll(() => app.stop())

type Dev = { apiKey: string; developerId: string }

const setup = async () => {
  const dev = await app.signup({ plan: "enterprise" })
  const agentId = await createAgent(app, dev.developerId, ["email:read", "calendar:read"])
  return { dev, agentId }
}
const post = (dev: Dev, path: string, body: unknown) => app.request("POST", path, { apiKey: dev.apiKey, body })
const setFido = (dev: Dev, fidoRequired: boolean) => app.request("PATCH", "/v1/me", { apiKey: dev.apiKey, body: { fidoRequired } })
const createBundle = (dev: Dev, agentId: string, extra: Record<string, unknown> = {}) =>
  post(dev, "/v1/consent-bundles", { agentId, userId: "pat", scopes: ["email:read"], ...extra })
const authorize = async (dev: Dev, agentId: string, principalId = "pat") =>
  (await post(dev, "/v1/authorize", { agentId, principalId, scopes: ["email:read"] })).body.authRequestId as string

/** approves the request with a passkey of its principal, as the consent page does */
const approveWithPasskey = async (dev: Dev, authRequestId: string, principalId = "pat") => {
  const authenticator = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  const reg = await post(dev, "/v1/webauthn/register/options", { principalId })
  expect((await post(dev, "/v1/webauthn/register/verify", {
    challengeId: reg.body.challengeId,
    response: authenticator.register(reg.body.publicKey),
    deviceName: "Key"
  })).status).toBe(201)
  const options = await post(dev, "/v1/webauthn/assert/options", { authRequestId })
  const verified = await post(dev, "/v1/webauthn/assert/verify", { challengeId: options.body.challengeId, response: authenticator.assert(options.body.publicKey) })
  expect(verified.status).toBe(200)
}

const bundleCount = async (agentId: string) =>
  (await app.query<{ n: number }>("SELECT count(*)::int AS n FROM consent_bundles WHERE agent_id = $1", [agentId]))[0]!.n
const bundleGrantCount = async (agentId: string) =>
  (await app.query<{ n: number }>("SELECT count(*)::int AS n FROM grants WHERE agent_id = $1 AND principal_id = 'pat'", [agentId]))[0]!.n

describe("consent bundles under fidoRequired", () => {
  test("403 CONSENT_REQUIRED without an approval made with a passkey; 201 with one, which is then consumed", async () => {
    const { dev, agentId } = await setup()
    expect((await setFido(dev, true)).status).toBe(200)

    const none = await createBundle(dev, agentId)
    expect([none.status, none.body.code]).toEqual([403, "CONSENT_REQUIRED"])
    const pending = await authorize(dev, agentId)
    const notApproved = await createBundle(dev, agentId, { consentRequestId: pending })
    expect([notApproved.status, notApproved.body.code]).toEqual([403, "CONSENT_REQUIRED"])
    expect(await bundleCount(agentId)).toBe(0)
    expect(await bundleGrantCount(agentId)).toBe(0)

    await approveWithPasskey(dev, pending)
    // it allows only what was approved: this agent, this principal, at most these scopes
    for (const extra of [{ userId: "someone-else" }, { scopes: ["email:read", "calendar:read"] }]) {
      const res = await createBundle(dev, agentId, { consentRequestId: pending, ...extra })
      expect([res.status, res.body.code]).toEqual([403, "CONSENT_REQUIRED"])
    }
    const otherAgent = await createAgent(app, dev.developerId, ["email:read"])
    expect((await createBundle(dev, otherAgent, { consentRequestId: pending })).body.code).toBe("CONSENT_REQUIRED")
    const stranger = await setup()
    expect((await createBundle(stranger.dev, stranger.agentId, { consentRequestId: pending })).body.code).toBe("CONSENT_REQUIRED")

    const made = await createBundle(dev, agentId, { consentRequestId: pending })
    expect(made.status).toBe(201)
    const [request] = await app.query<{ consumedByBundleId: string }>("SELECT consumed_by_bundle_id FROM auth_requests WHERE id = $1", [pending])
    expect(request!.consumedByBundleId).toBe(made.body.bundleId)
    // one approval, one bundle
    const again = await createBundle(dev, agentId, { consentRequestId: pending })
    expect([again.status, again.body.code]).toEqual([403, "CONSENT_REQUIRED"])
    expect(await bundleCount(agentId)).toBe(1)
  })

  test("an approval made without a passkey does not satisfy the requirement; without it, no consentRequestId is needed", async () => {
    const { dev, agentId } = await setup()
    const request = await authorize(dev, agentId)
    expect((await app.request("POST", `/v1/consent/${request}/approve`)).status).toBe(200)
    expect((await setFido(dev, true)).status).toBe(200)
    const refused = await createBundle(dev, agentId, { consentRequestId: request })
    expect([refused.status, refused.body.code]).toEqual([403, "CONSENT_REQUIRED"])
    const [stored] = await app.query<{ consumedByBundleId: string | null }>("SELECT consumed_by_bundle_id FROM auth_requests WHERE id = $1", [request])
    expect(stored!.consumedByBundleId).toBeNull()

    expect((await setFido(dev, false)).status).toBe(200)
    expect((await createBundle(dev, agentId)).status).toBe(201)
    // named anyway, it must still be a usable approval (and is consumed)
    expect((await createBundle(dev, agentId, { consentRequestId: "areq_unknown" })).body.code).toBe("CONSENT_REQUIRED")
    expect((await createBundle(dev, agentId, { consentRequestId: request })).status).toBe(201)
  })
})

describe("developer settings are audited", () => {
  const entries = async (developerId: string) =>
    app.query<{ action: string; metadata: any }>(
      "SELECT action, metadata FROM audit_log WHERE developer_id = $1 AND action = 'service.developer.settings_changed' ORDER BY timestamp, id",
      [developerId]
    )

  test("PATCH /v1/me writes service.developer.settings_changed with the names of the fields it changed", async () => {
    const { dev } = await setup()
    expect((await setFido(dev, true)).status).toBe(200)
    expect((await setFido(dev, false)).status).toBe(200)
    // fidoRequired unchanged here: only the name is recorded
    expect((await app.request("PATCH", "/v1/me", { apiKey: dev.apiKey, body: { name: "Renamed", fidoRequired: false } })).status).toBe(200)
    // nothing changes: nothing recorded
    expect((await app.request("PATCH", "/v1/me", { apiKey: dev.apiKey, body: { name: "Renamed" } })).status).toBe(200)
    const rows = await entries(dev.developerId)
    const metadata = rows.map((r) => (typeof r.metadata === "string" ? JSON.parse(r.metadata) : r.metadata))
    expect(metadata).toEqual([
      { changedFields: ["fidoRequired"], fidoRequired: true },
      { changedFields: ["fidoRequired"], fidoRequired: false },
      { changedFields: ["name"] }
    ])
    expect(JSON.stringify(rows)).not.toContain(dev.apiKey)
    const chain = await app.run(Effect.flatMap(AuditChain, (a) => a.verify(dev.developerId)))
    expect(chain).toMatchObject({ valid: true, checkedEntries: 3 })
    const listed = await app.request("GET", "/v1/audit/entries", { apiKey: dev.apiKey })
    expect(listed.body.entries.map((e: any) => e.action)).toEqual(Array(3).fill("service.developer.settings_changed"))
  })
})
