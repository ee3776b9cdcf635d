/**
 * Issue 10: GET /v1/consent-bundles/:id/revocation-status per second (p50/p99) next to its floor
 * measured in the same run: the same query through the same database client, answered by a bare
 * Bun.serve handler (no routing, authentication, limiter or envelope). The difference is what the
 * service's HTTP stack costs on this route.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { load, postJson, row, startBenchServer } from "./support.ts"

export async function run() {
  const server = await startBenchServer()
  const json = postJson(server.url)
  const { apiKey, developerId } = await json("/v1/signup", { name: "bench" })
  const agent = await json("/v1/agents", { name: "bench", scopes: ["email:read"] }, apiKey)
  const bundles: Array<string> = []
  for (let i = 0; i < 16; i++) {
    bundles.push((await json("/v1/consent-bundles", { agentId: agent.agentId, userId: `u${i}`, scopes: ["email:read"] }, apiKey)).bundleId)
  }
  // the service's query, run through the service's own SqlClient
  const query = (id: string) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ status: string; revokedAt: Date | null; grantStatus: string; grantRevokedAt: Date | null }>`
        SELECT b.status, b.revoked_at, g.status AS grant_status, g.revoked_at AS grant_revoked_at
        FROM consent_bundles b JOIN grants g ON g.id = b.grant_id
        WHERE b.id = ${id} AND b.developer_id = ${developerId}`)
  const bare = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (request) => {
      const id = new URL(request.url).pathname.split("/")[3]!
      const [r] = await server.run(query(id))
      if (r === undefined) return Response.json({ code: "BUNDLE_NOT_FOUND" }, { status: 404 })
      const revokedAt = r.revokedAt ?? (r.grantStatus === "revoked" ? r.grantRevokedAt : null)
      return Response.json({ bundleId: id, status: revokedAt === null ? "active" : "revoked", revokedAt: revokedAt?.toISOString() ?? null })
    }
  })
  try {
    const headers = { authorization: `Bearer ${apiKey}` }
    let n = 0
    const send = (base: string) => () =>
      fetch(`${base}/v1/consent-bundles/${bundles[n++ % bundles.length]}/revocation-status`, { headers })
        .then(async (r) => ((await r.json()) as any).status === "active")
    // rounds alternate so background load on the machine falls on both alike
    const floorRuns = [], serviceRuns = []
    for (let i = 0; i < 2; i++) {
      floorRuns.push(await load(send(`http://127.0.0.1:${bare.port}`), { seconds: 2 }))
      serviceRuns.push(await load(send(server.url), { seconds: 2 }))
    }
    const mean = (xs: Array<number>) => Number((xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(2))
    const floor = Math.round(mean(floorRuns.map((r) => r.perSecond)))
    const service = Math.round(mean(serviceRuns.map((r) => r.perSecond)))
    const errors = serviceRuns.reduce((a, r) => a + r.errors, 0)
    row("floor: the same query on a bare handler req/s", floor)
    row("GET /v1/consent-bundles/:id/revocation-status req/s", service, floor, `${Math.round((100 * service) / floor)}% of the floor`)
    row("  p50 / p99 ms", `${mean(serviceRuns.map((r) => r.p50Ms))} / ${mean(serviceRuns.map((r) => r.p99Ms))}`,
      `${mean(floorRuns.map((r) => r.p50Ms))} / ${mean(floorRuns.map((r) => r.p99Ms))}`)
    row("  errors (not answered active)", errors)
    return {
      floorPerSecond: floor, perSecond: service, percentOfFloor: Math.round((100 * service) / floor), errors,
      p50Ms: mean(serviceRuns.map((r) => r.p50Ms)), p99Ms: mean(serviceRuns.map((r) => r.p99Ms))
    }
  } finally {
    bare.stop(true)
    await server.stop()
  }
}

if (import.meta.main) await run()
