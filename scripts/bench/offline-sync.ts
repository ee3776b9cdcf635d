/**
 * Issue 27, target 4: one sync of 1000 entries, p50 over interleaved runs, against its full floor:
 * a bare Bun.serve handler doing the sync's work (floors.ts): the API key and the gate's Redis call,
 * the body parsed and validated (parseBody), the bundle's audit keys read, the signatures checked on
 * verifier workers of its own (the bench process's, as many as the service's) while the hashes are recomputed here (sha256 of the canonical
 * input), then in one transaction the bundle locked, the stored range read, the batch judged and
 * inserted with the head update (the service's statement texts, through its pg pool). Target p50 ≤
 * 1.25 × the floor; CPU per sync for both. Also entries/second with 8 concurrent clients.
 */
import { Effect } from "effect"
import { createHash, createPrivateKey, sign } from "node:crypto"
import { GENESIS_HASH, hashEntry, type ConsentBundle } from "../../src/offline/index.ts"
import { canonicalInput, delimiterFault } from "../../src/offline/canonical.ts"
import { judge, parseBody, STORE_ENTRIES_SQL } from "../../src/offline-sync/Service.ts"
import { Verifier } from "../../src/offline-sync/Verifier.ts"
import { floorKit, serveFloor } from "./floors.ts"
import { cpuCell, cpuDuring, makeCpuTally, percentile, postJson, row, startBenchServer } from "./support.ts"

const RUNS = 15
// the service's statements, as its SQL client sends them
const KEYS_SQL = `
          SELECT k.public_key_pem FROM consent_bundle_audit_keys k JOIN consent_bundles b ON b.id = k.bundle_id
          WHERE b.id = $1 AND b.developer_id = $2
          ORDER BY k.generation DESC LIMIT 2`
const BUNDLE_SQL = `SELECT b.head_seq, b.head_hash, b.status, b.revoked_at, g.status AS grant_status, g.revoked_at AS grant_revoked_at
             FROM consent_bundles b JOIN grants g ON g.id = b.grant_id
             WHERE b.id = $1 AND b.developer_id = $2 FOR UPDATE OF b`
const EXISTING_SQL = `
              SELECT seq, hash FROM offline_audit_entries WHERE bundle_id = $1 AND seq BETWEEN $2 AND $3`

export async function run() {
  const server = await startBenchServer()
  try {
    const json = postJson(server.url)
    const { apiKey } = await json("/v1/signup", { name: "bench" })
    const agent = await json("/v1/agents", { name: "bench", scopes: ["email:read"] }, apiKey)
    // Entries are signed with node:crypto here (the portable kit's @noble signer is ~8× slower and
    // would dominate the set-up); the canonical form is the kit's own `hashEntry`.
    const newBundle = async () => {
      const bundle: ConsentBundle = await json("/v1/consent-bundles", { agentId: agent.agentId, userId: "u", scopes: ["email:read"] }, apiKey)
      if (!bundle.grantToken) throw new Error(`bundle not created: ${JSON.stringify(bundle)}`)
      const claims = JSON.parse(Buffer.from(bundle.grantToken.split(".")[1]!, "base64url").toString())
      const privateKey = createPrivateKey(bundle.offlineAuditKey.privateKey)
      let seq = 0
      let prevHash = GENESIS_HASH
      const next = (n: number) => {
        const entries = []
        for (let i = 0; i < n; i++) {
          const fields = {
            seq: ++seq, timestamp: new Date().toISOString(), action: "email.read", agentDID: claims.agt, grantId: claims.grnt,
            scopes: claims.scp, result: "success" as const, metadata: { i, folder: "inbox" }, prevHash
          }
          const hash = hashEntry(fields)
          entries.push({ ...fields, hash, signature: sign(null, Buffer.from(hash), privateKey).toString("hex") })
          prevHash = hash
        }
        return JSON.stringify({ bundleId: bundle.bundleId, entries })
      }
      return { bundle, next }
    }
    const makeBatch = async (n: number) => {
      const { bundle, next } = await newBundle()
      return { bundle, body: next(n) }
    }

    // The full floor: a bare handler doing the sync's work (see the header) on the service's own
    // pool and verifier workers.
    const kit = await floorKit(server)
    const verifier = await server.run(Verifier)
    const floor = serveFloor(async (request, srv) => {
      const developer = await kit.apiKeyGate(request, "POST /v1/audit/offline-sync", 20, "plan", srv.requestIP(request)?.address)
      if (developer === undefined) return Response.json({ code: "UNAUTHORIZED" }, { status: 401 })
      const parsed = Effect.runSync(Effect.either(parseBody(JSON.parse(await request.text()))))
      if (parsed._tag === "Left") return Response.json({ code: parsed.left.code }, { status: 400 })
      const { bundleId, entries } = parsed.right
      const { rows: keyRows } = await kit.pool.query(KEYS_SQL, [bundleId, developer.id])
      if (keyRows.length === 0) return Response.json({ code: "BUNDLE_NOT_FOUND" }, { status: 404 })
      const verification = Effect.runPromise(Effect.flatten(verifier.start(
        entries.map((e) => e.hash), entries.map((e) => e.signature), keyRows.map((k: any) => k.public_key_pem))))
      const faults = entries.map(delimiterFault)
      const hashOk = entries.map((e, i) => faults[i] === undefined && createHash("sha256").update(canonicalInput(e), "utf8").digest("hex") === e.hash)
      const client = await kit.pool.connect()
      try {
        await client.query("BEGIN")
        const { rows: [bundle] } = await client.query(BUNDLE_SQL, [bundleId, developer.id])
        let low = Infinity
        let high = -Infinity
        for (const e of entries) {
          if (e.seq < low) low = e.seq
          if (e.seq > high) high = e.seq
        }
        const { rows: existing } = await client.query(EXISTING_SQL, [bundleId, low, high])
        const storedHead = { seq: Number(bundle.head_seq), hash: bundle.head_hash }
        const hoped = judge(entries, hashOk, faults, undefined, existing, storedHead)
        await client.query(STORE_ENTRIES_SQL, [bundleId, developer.id, new Date(), JSON.stringify(hoped.toStore.map(({ entry: e }) => ({
          seq: e.seq, timestamp: e.timestamp, action: e.action, agent_did: e.agentDID, grant_id: e.grantId, scopes: e.scopes, result: e.result,
          metadata: e.metadata === undefined ? null : JSON.stringify(e.metadata), prev_hash: e.prevHash, hash: e.hash, signature: e.signature
        }))), hoped.head.seq, hoped.head.hash])
        const signatureOk = await verification
        if (signatureOk.some((ok) => ok !== 1)) throw new Error("the floor only takes good batches")
        await client.query("COMMIT")
        const revokedAt = bundle.revoked_at ?? (bundle.grant_status === "revoked" ? bundle.grant_revoked_at : null)
        return Response.json({ accepted: hoped.accepted, rejected: hoped.errors.length, revocationStatus: revokedAt === null ? "active" : "revoked",
          revokedAt: revokedAt?.toISOString() ?? null, errors: hoped.errors })
      } catch (e) {
        await client.query("ROLLBACK")
        throw e
      } finally {
        client.release()
      }
    })
    const post = (base: string, body: string) =>
      fetch(`${base}/v1/audit/offline-sync`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` }, body })
        .then(async (r) => ({ ok: r.ok, body: (await r.json()) as any }))
    const sides = [{ url: server.url, pid: server.pid, times: [] as Array<number>, main: 0, machine: 0 }, { url: floor.url, pid: process.pid, times: [] as Array<number>, main: 0, machine: 0 }]
    const batches = []
    for (let i = 0; i < 2 * (RUNS + 2); i++) batches.push(await makeBatch(1000))
    // warm up each side with two syncs
    for (let i = 0; i < 4; i++) await post(sides[i % 2]!.url, batches.pop()!.body)
    // service and floor take turns, which goes first alternating
    for (let i = 0; i < RUNS; i++) {
      for (const side of i % 2 === 0 ? sides : [...sides].reverse()) {
        const body = batches.pop()!.body
        const t = performance.now()
        const { result: res, mainThreadMs, machineMs } = await cpuDuring(() => post(side.url, body), side.pid)
        side.times.push(performance.now() - t)
        side.main += mainThreadMs ?? NaN
        side.machine += machineMs ?? NaN
        if (!res.ok || res.body.accepted !== 1000) throw new Error(`sync failed: ${JSON.stringify(res.body).slice(0, 200)}`)
      }
    }
    floor.stop()
    const [svc, flr] = sides.map((side) => {
      const times = [...side.times].sort((a, b) => a - b)
      return { p50: percentile(times, 50), p99: percentile(times, 99), main: side.main / RUNS, machine: side.machine / RUNS }
    }) as [any, any]
    const ratio = svc.p50 / flr.p50
    row("offline sync of 1000 entries p50 ms", svc.p50.toFixed(1), flr.p50.toFixed(1),
      `${ratio.toFixed(2)} × the floor; target ≤ 1.25×: ${ratio <= 1.25 ? "PASS" : "FAIL"}`)
    row("  p99 ms", svc.p99.toFixed(1), flr.p99.toFixed(1))
    // each side's process counts its own verifier workers (threads); the machine, PostgreSQL too
    row("  verifier workers (each side's own)", verifier.workers())
    row("  CPU per sync ms, serving process / machine", `${svc.main.toFixed(1)} / ${svc.machine.toFixed(1)}`, `${flr.main.toFixed(1)} / ${flr.machine.toFixed(1)}`)

    // 8 concurrent clients, 100-entry batches (the interface's default size), each client its own
    // bundle; batches are signed before the clock starts.
    const clients: Array<Array<string>> = []
    for (let c = 0; c < 8; c++) {
      const { next } = await newBundle()
      clients.push(Array.from({ length: 40 }, () => next(100)))
    }
    let entries = 0
    const concurrentCpu = makeCpuTally(server.pid)
    const started = performance.now()
    await concurrentCpu.during(() => Promise.all(clients.map(async (bodies) => {
      for (const body of bodies) {
        const res = await post(server.url, body)
        entries += res.body.accepted
      }
    })), () => entries)
    const perSecond = Math.round(entries / ((performance.now() - started) / 1000))
    row("offline sync entries/s, 8 concurrent clients × 100", perSecond)
    row("  CPU per entry µs, serving process / machine", cpuCell(concurrentCpu.perRequest()))
    return {
      p50Ms: Number(svc.p50.toFixed(1)),
      p99Ms: Number(svc.p99.toFixed(1)),
      floorP50Ms: Number(flr.p50.toFixed(1)),
      floorP99Ms: Number(flr.p99.toFixed(1)),
      ratio: Number(ratio.toFixed(2)),
      target: "p50 ≤ 1.25 × the full floor",
      pass: ratio <= 1.25,
      mainThreadMsPerSync: Number(svc.main.toFixed(1)),
      machineMsPerSync: Number(svc.machine.toFixed(1)),
      floorMainThreadMsPerSync: Number(flr.main.toFixed(1)),
      floorMachineMsPerSync: Number(flr.machine.toFixed(1)),
      entriesPerSecond8Clients: perSecond,
      cpuMicrosPerEntry8Clients: concurrentCpu.perRequest()
    }
  } finally {
    await server.stop()
  }
}

if (import.meta.main) await run()
