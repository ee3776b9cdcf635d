/**
 * Issue 6: one sync of 1000 entries (p50/p99 over 30 runs) next to its floor, the time to verify
 * 1000 Ed25519 signatures on one core in this process divided by the core count; target p50 ≤ 1.3 × floor.
 * Also entries/second with 8 concurrent clients.
 */
import { createPrivateKey, createPublicKey, sign, verify } from "node:crypto"
import { availableParallelism } from "node:os"
import { GENESIS_HASH, hashEntry, type ConsentBundle } from "../../src/offline/index.ts"
import { cpuDuring, percentile, postJson, row, startBenchServer } from "./support.ts"

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

    // The floor: 1000 verifications on one core in this process, divided by the cores.
    const sample = await makeBatch(1000)
    const parsed = JSON.parse(sample.body)
    const key = createPublicKey(sample.bundle.offlineAuditKey.publicKey)
    const single = () => {
      const t = performance.now()
      for (const e of parsed.entries) verify(null, Buffer.from(e.hash), key, Buffer.from(e.signature, "hex"))
      return performance.now() - t
    }
    single()
    const singles = Array.from({ length: 10 }, single).sort((a, b) => a - b)
    const cores = availableParallelism()
    const floor = percentile(singles, 50) / cores

    const post = (body: string) =>
      fetch(`${server.url}/v1/audit/offline-sync`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` }, body })
        .then(async (r) => ({ ok: r.ok, body: (await r.json()) as any }))
    const batches = []
    for (let i = 0; i < 32; i++) batches.push(await makeBatch(1000))
    // warm up with two syncs
    for (const b of batches.slice(0, 2)) await post(b.body)
    const times: Array<number> = []
    const timed = batches.slice(2)
    const cpu = await cpuDuring(async () => {
      for (const b of timed) {
        const t = performance.now()
        const res = await post(b.body)
        times.push(performance.now() - t)
        if (!res.ok || res.body.accepted !== 1000) throw new Error(`sync failed: ${JSON.stringify(res.body).slice(0, 200)}`)
      }
    })
    times.sort((a, b) => a - b)
    const p50 = percentile(times, 50)
    const p99 = percentile(times, 99)
    row("offline sync of 1000 entries p50 ms", p50.toFixed(1), floor.toFixed(1), p50 <= 1.3 * floor ? "PASS (≤ 1.3 × floor)" : `FAIL (${(p50 / floor).toFixed(2)} × floor)`)
    row("offline sync of 1000 entries p99 ms", p99.toFixed(1))
    // What one sync costs the whole machine (service threads and verifier workers, PostgreSQL, the
    // kernel): with every core busy it still cannot take less than that CPU divided by the cores.
    let atBest: number | undefined
    if (cpu.machineMs !== undefined) {
      const perSync = cpu.machineMs / timed.length
      atBest = perSync / cores
      row("  machine CPU per sync (all processes) ms", perSync.toFixed(1))
      row(
        "  so at best, all cores busy, ms",
        atBest.toFixed(1),
        (1.3 * floor).toFixed(1),
        atBest > 1.3 * floor ? "the 1.3 × floor target is below what this machine can do" : "the target is within reach"
      )
    }

    // 8 concurrent clients, 100-entry batches (the interface's default size), each client its own
    // bundle; batches are signed before the clock starts.
    const clients = []
    for (let c = 0; c < 8; c++) {
      const { next } = await newBundle()
      clients.push(Array.from({ length: 40 }, () => next(100)))
    }
    let entries = 0
    const started = performance.now()
    await Promise.all(clients.map(async (bodies) => {
      for (const body of bodies) {
        const res = await post(body)
        entries += res.body.accepted
      }
    }))
    const perSecond = Math.round(entries / ((performance.now() - started) / 1000))
    row("offline sync entries/s, 8 concurrent clients × 100", perSecond)
    return {
      p50Ms: Number(p50.toFixed(1)),
      p99Ms: Number(p99.toFixed(1)),
      floorMs: Number(floor.toFixed(1)),
      cores,
      entriesPerSecond8Clients: perSecond,
      atBestMs: atBest === undefined ? null : Number(atBest.toFixed(1))
    }
  } finally {
    await server.stop()
  }
}

if (import.meta.main) await run()
