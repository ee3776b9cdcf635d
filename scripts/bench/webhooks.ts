/**
 * Issue 5: events emitted and delivered per second to a local receiver, and what emitting adds to
 * the request that causes it (a transaction with Events.emit versus the same transaction without).
 * Delivery is measured twice: draining a backlog with the worker's own round, and end to end through
 * a running delivery fiber (events emitted concurrently, woken by the commit notification).
 * No floor is set by the issue; figures are reported as measured.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Events } from "../../src/platform/Events.ts"
import { deliverDue } from "../../src/webhooks/Worker.ts"
import { cpuCell, cpuDuring, cpuStopwatch, makeCpuTally, percentile, row, startBenchServer } from "./support.ts"

export async function run() {
  // every figure of this part is taken in process (emits and the worker's rounds through `run`), so
  // the service runs in this process (a webhook registered with the service's own process was not
  // delivered by this process's rounds: see the README's notes)
  const server = await startBenchServer({}, { inProcess: true })
  let received = 0
  const receiver = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: async (r) => (await r.arrayBuffer(), received++, new Response(null, { status: 204 })) })
  try {
    const { apiKey, developerId } = await fetch(`${server.url}/v1/signup`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: "bench" }) }).then((r) => r.json() as any)
    await fetch(`${server.url}/v1/webhooks`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ url: `http://127.0.0.1:${receiver.port}/hook`, events: ["grant.created"] })
    })
    // emit cost: one small transaction with and without the event (and the CPU of the 300)
    const cpu = { without: makeCpuTally(), with: makeCpuTally(), drain: makeCpuTally() }
    const time = (withEvent: boolean) => cpu[withEvent ? "with" : "without"].during(async () => {
      const samples: Array<number> = []
      for (let i = 0; i < 300; i++) {
        const t = performance.now()
        await server.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(Effect.gen(function*() {
          yield* sql`UPDATE developers SET updated_at = now() WHERE id = ${developerId}`
          if (withEvent) yield* Effect.flatMap(Events, (e) => e.emit(developerId, "grant.created", { grantId: `g${i}` }))
        }))))
        samples.push(performance.now() - t)
      }
      return percentile(samples.sort((a, b) => a - b), 50)
    }, () => 300)
    const without = await time(false)
    const withEmit = await time(true)
    row("transaction p50 ms without / with Events.emit", `${without.toFixed(2)} / ${withEmit.toFixed(2)}`)
    row("emit cost added to the request, ms (p50)", (withEmit - without).toFixed(2))
    row("  CPU per transaction with Events.emit µs, event loop / machine", cpuCell(cpu.with.perRequest()), cpuCell(cpu.without.perRequest()))
    // deliver the backlog (300 events) and then 2000 more, draining with the worker's own round
    for (let i = 0; i < 2000; i++) await server.run(Effect.flatMap(Events, (e) => e.emit(developerId, "grant.created", { grantId: `x${i}` })))
    const started = performance.now()
    await cpu.drain.during(async () => {
      for (;;) {
        const round = await server.run(deliverDue)
        if (round.claimed === 0) break
      }
    }, () => received)
    const seconds = (performance.now() - started) / 1000
    const perSecond = Math.round(received / seconds)
    row("webhook deliveries/s to a local receiver (backlog drained by rounds)", perSecond)
    // the receiver answers in this process: its work is on the event loop too
    row("  CPU per delivery µs (receiver included), event loop / machine", cpuCell(cpu.drain.perRequest()))
    const endToEnd = await throughRunningFiber()
    return {
      emitCostMs: Number((withEmit - without).toFixed(2)), deliveriesPerSecond: perSecond, delivered: received,
      cpuMicros: { transactionWithout: cpu.without.perRequest(), transactionWith: cpu.with.perRequest(), perDelivery: cpu.drain.perRequest() },
      ...endToEnd
    }
  } finally {
    receiver.stop(true)
    await server.stop()
  }
}

/** Emit N events from 8 concurrent callers on an instance whose delivery fiber is running; time until all arrive. */
const throughRunningFiber = async () => {
  const N = 2000
  const server = await startBenchServer({ WEBHOOK_POLL_INTERVAL_SECONDS: "30" }, { workers: true })
  const seen = new Set<string>()
  let hits = 0
  const receiver = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (r) => {
      hits++
      seen.add(JSON.parse(await r.text()).id)
      return new Response(null, { status: 204 })
    }
  })
  try {
    const { apiKey, developerId } = await fetch(`${server.url}/v1/signup`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: "bench" }) }).then((r) => r.json() as any)
    await fetch(`${server.url}/v1/webhooks`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ url: `http://127.0.0.1:${receiver.port}/hook`, events: ["grant.created"] })
    })
    const started = performance.now()
    // the delivering fiber runs in the service's process; the emits in this one (the control instance)
    const sinceStart = cpuStopwatch(server.pid)
    let next = 0
    const emitCpu = await cpuDuring(() => Promise.all(Array.from({ length: 8 }, async () => {
      while (next < N) {
        const i = next++
        await server.run(Effect.flatMap(Events, (e) => e.emit(developerId, "grant.created", { grantId: `e${i}` })))
      }
    })))
    const emitted = performance.now()
    const until = Date.now() + 40_000
    while (seen.size < N && Date.now() < until) await Bun.sleep(5)
    const done = performance.now()
    const cpu = { emit: makeCpuTally(), endToEnd: makeCpuTally() }
    cpu.emit.add(emitCpu, N)
    cpu.endToEnd.add(sinceStart(), seen.size)
    const emitsPerSecond = Math.round(N / ((emitted - started) / 1000))
    const endToEndPerSecond = Math.round(seen.size / ((done - started) / 1000))
    row("events emitted/s (8 concurrent callers, each its own transaction)", emitsPerSecond)
    row("  CPU per emitted event µs (emitted in the bench process), event loop / machine", cpuCell(cpu.emit.perRequest()))
    row("events emitted and delivered/s end to end (running fiber)", endToEndPerSecond)
    row("  CPU per event emitted and delivered µs, the service's process (delivery) / machine (emits and receiver included)", cpuCell(cpu.endToEnd.perRequest()))
    row("delivered / sent / expected", `${seen.size} / ${hits} / ${N}`)
    return {
      emitsPerSecond, endToEndPerSecond, endToEndDelivered: seen.size, endToEndSends: hits,
      endToEndCpuMicros: { perEmit: cpu.emit.perRequest(), perEvent: cpu.endToEnd.perRequest() }
    }
  } finally {
    receiver.stop(true)
    await server.stop()
  }
}

if (import.meta.main) await run()
