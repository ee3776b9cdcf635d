/**
 * Issue 27, target 1: GET /health against its full floor, a bare handler making the same probes
 * (SELECT 1 through the service's pool and PING through its Redis client, concurrently, each
 * bounded to the same second) and answering the same JSON. Target ≥ 80% of the floor.
 */
import { bounded, compare, floorKit, serveFloor } from "./floors.ts"
import { startBenchServer } from "./support.ts"

export async function run() {
  const server = await startBenchServer()
  const kit = await floorKit(server)
  const redis = kit.counters.redis
  const floor = serveFloor(async () => {
    const [db, cache] = await Promise.all([
      bounded(kit.pool.query("SELECT 1"), 1000),
      redis === undefined ? Promise.resolve(true) : bounded(redis.ping(), 1000)
    ])
    return db && cache ? Response.json({ status: "ok" }) : Response.json({ status: "degraded" }, { status: 503 })
  })
  const requests = [{ path: "/health" }]
  try {
    return await compare([{
      name: "GET /health",
      service: { url: server.url, pid: server.pid, requests, expectBody: '"ok"' },
      floor: { url: floor.url, pid: process.pid, requests, expectBody: '"ok"' },
      target: 0.8
    }], { rounds: 3 })
  } finally {
    floor.stop()
    await server.stop()
  }
}

if (import.meta.main) {
  await run()
  process.exit(0)
}
