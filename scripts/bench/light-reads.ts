/**
 * Issue 27, target 2: the light API-key reads against their full floors, each a bare handler doing
 * the route's work: the API key resolved as the service does (SHA-256, the same 5 s cache filled
 * by the same statement), the gate's one Redis script call (route window and developer budget),
 * the route's own statements through the service's pool, and the same JSON. Target ≥ 65% (revocation
 * status ≥ 80%, issue 37).
 * (Replaces revocation-status.ts, whose floor left out the key, the gate and the Redis call.)
 */
import { createPublicKey, verify as cryptoVerify } from "node:crypto"
import { Keys } from "../../src/platform/Keys.ts"
import { compare, floorKit, serveFloor } from "./floors.ts"
import { postJson, startBenchServer } from "./support.ts"

const BUNDLE_COLUMNS = `id, developer_id, agent_id, user_id, scopes, grant_id, offline_ttl_seconds, offline_expires_at,
  status, revoked_at, checkpoint_at, created_at, last_sync_at, audit_entry_count`
const TOKEN_SQL = `SELECT k.grnt, k.jti, g.status, g.expires_at, g.developer_id, t.revoked_at, CASE WHEN cardinality(g.ancestor_agent_ids) = 0 THEN a.status
  WHEN EXISTS (SELECT 1 FROM agents x WHERE x.id = ANY(g.ancestor_agent_ids) AND x.status <> 'active') THEN 'suspended'
  ELSE a.status END AS agent_status
           FROM unnest($1::text[], $2::text[]) AS k(grnt, jti)
           JOIN grants g ON g.id = k.grnt
           LEFT JOIN grant_tokens t ON t.jti = k.jti
           LEFT JOIN agents a ON a.id = g.agent_id`

export async function run() {
  const server = await startBenchServer()
  const kit = await floorKit(server)
  const { pool } = kit
  const json = postJson(server.url)
  const { apiKey } = await json("/v1/signup", { name: "bench", mode: "sandbox" })
  const agent = await json("/v1/agents", { name: "bench", scopes: ["email:read"] }, apiKey)
  const bundles: Array<string> = []
  for (let i = 0; i < 16; i++) {
    bundles.push((await json("/v1/consent-bundles", { agentId: agent.agentId, userId: `u${i}`, scopes: ["email:read"] }, apiKey)).bundleId)
  }
  const code = (await json("/v1/authorize", { agentId: agent.agentId, principalId: "p", scopes: ["email:read"] }, apiKey)).code
  const token = (await json("/v1/token", { code, agentId: agent.agentId }, apiKey)).grantToken as string
  const keys = await server.run(Keys)
  const publicKey = createPublicKey({ key: keys.jwks.keys[0]! as any, format: "jwk" })
  // the service remembers a token it verified; so does the floor (the first check is RS256)
  const verified = new Map<string, any>()
  const claimsOf = (t: string) => {
    let claims = verified.get(t)
    if (claims === undefined) {
      const [h, p, s] = t.split(".") as [string, string, string]
      if (!cryptoVerify("sha256", Buffer.from(`${h}.${p}`), publicKey, Buffer.from(s, "base64url"))) return undefined
      claims = JSON.parse(Buffer.from(p, "base64url").toString())
      verified.set(t, claims)
    }
    return claims.exp > Date.now() / 1000 ? claims : undefined
  }
  const unauthorized = () => Response.json({ code: "UNAUTHORIZED" }, { status: 401 })
  const floor = serveFloor(async (request, srv) => {
    // the route windows count per source address, as the service does (it asks the server too)
    const address = srv.requestIP(request)?.address
    const path = new URL(request.url).pathname
    if (path === "/v1/me") {
      const d = await kit.apiKeyGate(request, "GET /v1/me", server.config.rateLimits.routeDefault, "plan", address)
      if (d === undefined) return unauthorized()
      return Response.json({ developerId: d.id, name: d.name, email: d.email, mode: d.mode, plan: d.plan, fidoRequired: d.fidoRequired, createdAt: new Date(d.createdAt).toISOString() })
    }
    if (path === "/v1/tokens/verify") {
      const d = await kit.apiKeyGate(request, "POST /v1/tokens/verify", server.config.rateLimits.routeDefault, "plan", address)
      if (d === undefined) return unauthorized()
      const body = JSON.parse(await request.text())
      const claims = claimsOf(body.token)
      if (claims === undefined || claims.dev !== d.id) return Response.json({ valid: false })
      const { rows: [r] } = await pool.query(TOKEN_SQL, [[claims.grnt], [claims.jti]])
      if (r === undefined || r.status !== "active" || r.revoked_at !== null || r.agent_status !== "active" || r.expires_at.getTime() <= Date.now()) return Response.json({ valid: false })
      return Response.json({ valid: true, grantId: claims.grnt, scopes: [...claims.scp], principal: claims.sub, agent: claims.agt, expiresAt: new Date(claims.exp * 1000).toISOString() })
    }
    const id = path.split("/")[3]!
    if (path.endsWith("/revocation-status")) {
      const d = await kit.apiKeyGate(request, "GET /v1/consent-bundles/:id/revocation-status", 100, "revocationStatus", address)
      if (d === undefined) return unauthorized()
      const { rows: [r] } = await pool.query(`
          SELECT b.status, b.revoked_at, g.status AS grant_status, g.revoked_at AS grant_revoked_at
          FROM consent_bundles b JOIN grants g ON g.id = b.grant_id
          WHERE b.id = $1 AND b.developer_id = $2`, [id, d.id])
      if (r === undefined) return Response.json({ code: "BUNDLE_NOT_FOUND" }, { status: 404 })
      const revokedAt = r.revoked_at ?? (r.grant_status === "revoked" ? r.grant_revoked_at : null)
      return Response.json({ bundleId: id, status: revokedAt === null ? "active" : "revoked", revokedAt: revokedAt?.toISOString() ?? null })
    }
    const d = await kit.apiKeyGate(request, "GET /v1/consent-bundles/:id", server.config.rateLimits.routeDefault, "plan", address)
    if (d === undefined) return unauthorized()
    const { rows: [b] } = await pool.query(`SELECT ${BUNDLE_COLUMNS} FROM consent_bundles WHERE id = $1 AND developer_id = $2`, [id, d.id])
    if (b === undefined) return Response.json({ code: "BUNDLE_NOT_FOUND" }, { status: 404 })
    const now = Date.now()
    return Response.json({
      id: b.id, agentId: b.agent_id, userId: b.user_id, scopes: [...b.scopes], offlineExpiresAt: b.offline_expires_at.toISOString(),
      status: b.status === "revoked" ? "revoked" : b.offline_expires_at.getTime() <= now ? "expired" : "active",
      createdAt: b.created_at.toISOString(), lastSyncAt: b.last_sync_at?.toISOString() ?? null, auditEntryCount: Number(b.audit_entry_count)
    })
  })
  const headers = { authorization: `Bearer ${apiKey}` }
  const verifyBody = JSON.stringify({ token })
  const routes = [
    { name: "GET /v1/me", requests: [{ path: "/v1/me", headers }], expectBody: '"developerId"' },
    { name: "GET /v1/consent-bundles/:id/revocation-status", requests: bundles.map((b) => ({ path: `/v1/consent-bundles/${b}/revocation-status`, headers })), expectBody: '"active"' },
    { name: "GET /v1/consent-bundles/:id", requests: bundles.map((b) => ({ path: `/v1/consent-bundles/${b}`, headers })), expectBody: '"active"' },
    { name: "POST /v1/tokens/verify", requests: [{ method: "POST", path: "/v1/tokens/verify", headers: { ...headers, "content-type": "application/json" }, body: verifyBody }], expectBody: '"valid":true' }
  ]
  const only = process.env.BENCH_ROUTES
  try {
    const pairs = routes.filter((r) => only === undefined || only.split(",").some((o) => r.name.includes(o))).map((r) => ({
      name: r.name,
      service: { url: server.url, pid: server.pid, requests: r.requests, expectBody: r.expectBody },
      floor: { url: floor.url, pid: process.pid, requests: r.requests, expectBody: r.expectBody },
      // issue 37 holds the revocation status (a device's most frequent check) to 80 % of its floor
      target: r.name.endsWith("/revocation-status") ? 0.8 : 0.65
    }))
    return await compare(pairs, { rounds: 3 })
  } finally {
    floor.stop()
    await server.stop()
  }
}

if (import.meta.main) {
  await run()
  process.exit(0)
}
