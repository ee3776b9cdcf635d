/**
 * Issue 32, the measure of decisions §19 (revised): while 20 hostile inputs of each kind are sent at
 * once (Cedar sets nested 200 deep, SAML Responses nested 90,000 deep or with 40,000 attributes
 * outside the assertion, SCIM filters nested 490 deep or unclosed), another developer's GET /health
 * and POST /v1/authorize (through a Cedar set) stay within 3× their baseline latency, measured in
 * the same run by the same sequential probe, and answer as before.
 * The baseline the verdict uses is a burst of 60 ordinary inputs of the same kinds (a valid set, a
 * small refused Response, a plain filter), alternating with the hostile ones: what hostility adds.
 * The idle baseline is printed too, but no burst of 60 requests of any kind keeps a sub-millisecond
 * /health within 3× of idle on a 2-core machine (the ordinary control misses it by two orders of
 * magnitude), so §19's measure is read as "hostile inputs cost other tenants no more than ordinary
 * ones of the same volume". The inputs are built and sent by a process of their own (load/hostile-sender.ts),
 * so the service's event loop carries only the service's work; the probes stay here (sequential,
 * one request at a time). `bun scripts/bench/hostile.ts [rounds]` (default 5 of each).
 */
import { spawn } from "node:child_process"
import { startSamlIdp } from "../../test/support/saml-idp.ts"
import { type Attacker, REDIRECT, victimSet } from "./load/hostile-inputs.ts"
import { cpuStopwatch, percentile, row, signupUncapped, startBenchServer } from "./support.ts"

const ROUNDS = Number((import.meta.main ? process.argv[2] : undefined) ?? process.env.BENCH_HOSTILE_ROUNDS ?? 5)
type Kind = "cedar" | "saml" | "scim"

/** The attacker's process (load/hostile-sender.ts): prepare a burst, then fire it and hear its answers. */
const startSender = async () => {
  const child = spawn(process.execPath, [new URL("./load/hostile-sender.ts", import.meta.url).pathname], { stdio: ["ignore", "inherit", "inherit", "ipc"] })
  let exited: Error | undefined
  let pending: ((error: Error) => void) | undefined
  child.once("exit", (code) => pending?.(exited = new Error(`hostile sender exited ${code}`)))
  const next = () => new Promise<any>((resolve, reject) => {
    if (exited !== undefined) return reject(exited)
    pending = reject
    child.once("message", resolve)
  })
  await next() // ready
  return {
    prepare: async (kinds: ReadonlyArray<Kind>, hostile: boolean, attacker: Attacker) => {
      const answer = next()
      child.send({ prepare: { kinds, hostile, attacker } })
      await answer
    },
    fire: (): Promise<{ answers: Array<string>; ms: number }> => {
      const answer = next()
      child.send({ go: true })
      return answer
    },
    stop: () => child.kill()
  }
}

export async function run(): Promise<Record<string, unknown>> {
  let sender: Awaited<ReturnType<typeof startSender>> | undefined
  const server = await startBenchServer({ PUBLIC_BASE_URL: "https://auth.example.test", SSO_ALLOW_PRIVATE_HOSTS: "true" })
  const idp = await startSamlIdp()
  const call = (method: string, path: string, apiKey?: string, body?: unknown) =>
    fetch(server.url + path, {
      method,
      headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body)
    }).then(async (r) => ({ status: r.status, body: await r.json().catch(() => undefined) as any }))
  try {
    // the other developer: an agent and a Cedar set deciding its authorizes
    const victim = await signupUncapped(server)
    const agent = await call("POST", "/v1/agents", victim.apiKey, { name: "bench", scopes: ["email:read", "email:send"] })
    const synced = await call("POST", "/v1/policies/sync", victim.apiKey, { format: "cedar", version: "1", content: Buffer.from(victimSet).toString("base64") })
    if (agent.status !== 201 || synced.status !== 201) throw new Error(`setup: agent ${agent.status}, set ${synced.status}`)
    let n = 0
    const authorize = async () => {
      const res = await call("POST", "/v1/authorize", victim.apiKey, { agentId: agent.body.agentId, principalId: `user_${n++ % 100}`, scopes: n % 2 === 0 ? ["email:read"] : ["email:send"] })
      // an allow answers its policy (and a fresh code), a deny its error code
      return `${res.status} ${res.status === 201 ? res.body?.policyId : res.body?.code}`
    }
    const health = async () => `${(await call("GET", "/health")).status}`

    // the attacker: a SAML connection (its sign-in starts give the states), a SCIM token
    const attacker = await signupUncapped(server)
    const connection = await call("POST", "/v1/sso/connections", attacker.apiKey, {
      name: "Evil", protocol: "saml", idpMetadataXml: idp.metadataXml(), domains: ["evil.example"], allowedRedirectUris: [REDIRECT]
    })
    const scim = await call("POST", "/v1/scim/tokens", attacker.apiKey, { label: "evil" })
    if (connection.status !== 201 || scim.status !== 201) throw new Error(`setup: connection ${connection.status}, scim ${scim.status}`)
    const relayState = async () => {
      const query = new URLSearchParams({ org: attacker.developerId, connection: connection.body.id, redirect_uri: REDIRECT })
      const started = await call("GET", `/sso/login?${query}`)
      return new URL(started.body.authorizeUrl).searchParams.get("RelayState")!
    }
    sender = await startSender()
    const attackerFor = async (count: number): Promise<Attacker> => ({
      url: server.url, apiKey: attacker.apiKey, scimToken: scim.body.token, relayStates: await Promise.all(Array.from({ length: count }, relayState))
    })
    /** sequential probes of one kind until `done` (or `count` probes when there is no burst) */
    const probe = async (f: () => Promise<string>, until: { done: boolean } | number) => {
      const ms: Array<number> = [], answers = new Set<string>()
      for (let i = 0; typeof until === "number" ? i < until : !until.done; i++) {
        const started = performance.now()
        answers.add(await f())
        ms.push(performance.now() - started)
      }
      return { ms, answers }
    }
    const stats = (ms: Array<number>) => {
      const sorted = [...ms].sort((x, y) => x - y)
      return { p50: Number(percentile(sorted, 50).toFixed(2)), p99: Number(percentile(sorted, 99).toFixed(2)), worst: Number(sorted.at(-1)!.toFixed(2)), count: ms.length }
    }
    for (let i = 0; i < 50; i++) await Promise.all([health(), authorize()]) // warm-up
    const baseline = { health: await probe(health, 200), authorize: await probe(authorize, 200) }

    // each hostile kind alone first: how long 20 of them take to be refused
    const alone: Record<string, number> = {}
    const refusals = new Set<string>()
    for (const kind of ["cedar", "saml", "scim"] as const) {
      await sender.prepare([kind], true, await attackerFor(20))
      const fired = await sender.fire()
      fired.answers.forEach((x) => refusals.add(x))
      alone[kind] = Number(fired.ms.toFixed(1))
      row(`20 hostile ${kind} inputs at once: ms until all refused`, alone[kind]!)
    }
    /** ROUNDS bursts of 60, alternating hostile and ordinary, each with both probes running */
    const bursts = { hostile: { ms: 0, serviceCpuMs: 0, answers: new Set<string>(), health: [] as Array<number>, authorize: [] as Array<number>, seen: { health: new Set<string>(), authorize: new Set<string>() } },
      ordinary: { ms: 0, serviceCpuMs: 0, answers: new Set<string>(), health: [] as Array<number>, authorize: [] as Array<number>, seen: { health: new Set<string>(), authorize: new Set<string>() } } }
    for (let round = 0; round < ROUNDS * 2; round++) {
      const kind = round % 2 === 0 ? "hostile" as const : "ordinary" as const
      const b = bursts[kind]
      await sender.prepare(["cedar", "saml", "scim"], kind === "hostile", await attackerFor(20))
      const flag = { done: false }
      const cpu = cpuStopwatch(server.pid)
      const burst: Promise<Array<string>> = sender.fire().then((fired) => {
        flag.done = true
        b.ms += fired.ms
        b.serviceCpuMs += cpu().mainThreadMs ?? NaN
        return fired.answers
      })
      const [answers, h, a] = await Promise.all([burst, probe(health, flag), probe(authorize, flag)])
      answers.forEach((x) => b.answers.add(x))
      b.health.push(...h.ms), b.authorize.push(...a.ms)
      h.answers.forEach((x) => b.seen.health.add(x)), a.answers.forEach((x) => b.seen.authorize.add(x))
    }
    bursts.hostile.answers.forEach((x) => refusals.add(x))
    const figures: Record<string, unknown> = { rounds: ROUNDS, alone, refusals: [...refusals].sort() }
    row("60 hostile inputs at once: ms until all answered", (bursts.hostile.ms / ROUNDS).toFixed(1), `ordinary ${(bursts.ordinary.ms / ROUNDS).toFixed(1)}`)
    row(`the service's ${server.separate ? "process" : "event loop"} CPU per burst of 60, ms (probes included)`, (bursts.hostile.serviceCpuMs / ROUNDS).toFixed(1), `ordinary ${(bursts.ordinary.serviceCpuMs / ROUNDS).toFixed(1)}`)
    // decisions §19: each hostile input is refused alone (a 4xx); a 5xx is that input hurting the service
    const notRefused = [...refusals].filter((answer) => !/^4\d\d /.test(answer))
    row("hostile answers (each must be a 4xx refusal)", [...refusals].sort().join(", "), undefined, notRefused.length === 0 ? "ok" : `not refused: ${notRefused.join(", ")}`)
    row("ordinary answers", [...bursts.ordinary.answers].sort().join(", "))
    for (const kind of ["health", "authorize"] as const) {
      const base = stats(baseline[kind].ms), hit = stats(bursts.hostile[kind]), plain = stats(bursts.ordinary[kind])
      const label = kind === "health" ? "GET /health" : "POST /v1/authorize (Cedar)"
      row(`${label}: idle baseline p50 / p99 ms`, `${base.p50} / ${base.p99}`)
      // the verdict: against the same volume of ordinary inputs (an idle baseline cannot be kept by any
      // burst of 60 on this machine, hostile or not: see the header); the idle figure is printed beside it
      const within = (hostile: number, ordinary: number) => (hostile <= ordinary * 3 ? "ok" : "over")
      row(`${label}, hostile burst: p50 ms (${hit.count} probes)`, hit.p50, `3× ordinary ${(plain.p50 * 3).toFixed(2)}`, within(hit.p50, plain.p50))
      row(`${label}, hostile burst: p99 ms`, hit.p99, `3× ordinary ${(plain.p99 * 3).toFixed(2)}`, within(hit.p99, plain.p99))
      row(`${label}, ordinary burst of 60: p50 / p99 ms`, `${plain.p50} / ${plain.p99}`, `idle 3× ${(base.p50 * 3).toFixed(2)} / ${(base.p99 * 3).toFixed(2)}`, "(control)")
      const same = [...bursts.hostile.seen[kind]].every((a) => baseline[kind].answers.has(a))
      row(`${label}: answers as before`, [...bursts.hostile.seen[kind]].sort().join(", "), [...baseline[kind].answers].sort().join(", "), same ? "ok" : "changed")
      figures[kind] = { baseline: base, hostile: hit, ordinary: plain, answersAsBefore: same }
    }
    return figures
  } finally {
    sender?.stop()
    await idp.stop()
    await server.stop()
  }
}

if (import.meta.main) {
  await run()
  process.exit(0)
}
