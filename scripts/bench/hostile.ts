/**
 * Issue 32, the measure of decisions §19 (revised): while 20 hostile inputs of each kind are sent at
 * once (Cedar sets nested 200 deep, SAML Responses nested 90,000 deep or with 40,000 attributes
 * outside the assertion, SCIM filters nested 490 deep or unclosed), another developer's GET /health
 * and POST /v1/authorize (through a Cedar set) stay within 3× their baseline latency, measured in
 * the same run by the same sequential probe, and answer as before. The floor column is 3× baseline.
 * A control burst of 60 ordinary inputs of the same kinds (a valid set, a small refused Response, a
 * plain filter) alternates with the hostile ones, so what a burst of 60 costs on its own is beside
 * what hostility adds. `bun scripts/bench/hostile.ts [rounds]` (default 5 of each).
 */
import { startSamlIdp } from "../../test/support/saml-idp.ts"
import { percentile, row, signupUncapped, startBenchServer } from "./support.ts"

const ROUNDS = Number((import.meta.main ? process.argv[2] : undefined) ?? process.env.BENCH_HOSTILE_ROUNDS ?? 5)
const REDIRECT = "https://app.example.test/after-sso"

const victimSet = `@id("reads") permit(principal, action == Action::"authorize", resource) when { ["email:read"].containsAll(context.scopes) };
@id("no-send") forbid(principal, action, resource) when { context.scopes.contains("email:send") };`
const deepCedar = `permit(principal, action, resource) when { ${"(".repeat(200)}true${")".repeat(200)} };`
const samlDeep = `${"<a>".repeat(90_000)}${"</a>".repeat(90_000)}`
const samlWide = `<a ${Array.from({ length: 40_000 }, (_, i) => `a${i}=""`).join(" ")}/>`
const hostileResponse = (extension: string) => Buffer.from(
  `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" ID="_x" Version="2.0"><samlp:Extensions>${extension}</samlp:Extensions></samlp:Response>`
).toString("base64")
const samlDeepResponse = hostileResponse(samlDeep)
const samlWideResponse = hostileResponse(samlWide)
const scimFilters = [`${"(".repeat(490)}userName eq "a"${")".repeat(490)}`, "(".repeat(999)]

export async function run(): Promise<Record<string, unknown>> {
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
    const answerOf = (r: { status: number; body: any }) => {
      if (process.env.BENCH_DEBUG && r.status >= 500) console.log(JSON.stringify(r.body).slice(0, 300))
      return `${r.status} ${r.body?.code ?? r.body?.scimType ?? ""}`
    }
    /**
     * 20 of each kind, hostile or (the control) ordinary inputs of the same kinds and count: a valid
     * small set, a small malformed Response, a plain filter. SAML states and bodies are made
     * beforehand (a sign-in start is not hostile; the load generator shares the service's event loop).
     */
    const kinds = (hostile: boolean) => ({
      cedar: async () => {
        const content = Buffer.from(hostile ? deepCedar : victimSet).toString("base64")
        return () => Array.from({ length: 20 }, () => call("POST", "/v1/policies/sync", attacker.apiKey, { format: "cedar", version: "x", content, activate: false }).then(answerOf))
      },
      saml: async () => {
        const states = await Promise.all(Array.from({ length: 20 }, relayState))
        const bodies = states.map((state, i) =>
          JSON.stringify({ SAMLResponse: hostile ? (i % 2 === 0 ? samlDeepResponse : samlWideResponse) : hostileResponse("<a/>"), RelayState: state }))
        return () => bodies.map((body) =>
          fetch(`${server.url}/sso/callback/saml`, { method: "POST", headers: { "content-type": "application/json" }, body })
            .then(async (r) => answerOf({ status: r.status, body: await r.json() })))
      },
      scim: async () => () => Array.from({ length: 20 }, (_, i) =>
        fetch(`${server.url}/scim/v2/Users?filter=${encodeURIComponent(hostile ? scimFilters[i % 2]! : 'userName eq "a"')}`, { headers: { authorization: `Bearer ${scim.body.token}` } })
          .then(async (r) => answerOf({ status: r.status, body: await r.json() })))
    })
    const prepare = async (hostile: boolean) => {
      const k = kinds(hostile)
      const [cedar, saml, scimSends] = await Promise.all([k.cedar(), k.saml(), k.scim()])
      return () => Promise.all([...cedar(), ...saml(), ...scimSends()])
    }
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
    for (const [kind, make] of Object.entries(kinds(true))) {
      const send = await make()
      const started = performance.now()
      ;(await Promise.all(send())).forEach((x) => refusals.add(x))
      alone[kind] = Number((performance.now() - started).toFixed(1))
      row(`20 hostile ${kind} inputs at once: ms until all refused`, alone[kind]!)
    }
    /** ROUNDS bursts of 60, alternating hostile and ordinary, each with both probes running */
    const bursts = { hostile: { ms: 0, answers: new Set<string>(), health: [] as Array<number>, authorize: [] as Array<number>, seen: { health: new Set<string>(), authorize: new Set<string>() } },
      ordinary: { ms: 0, answers: new Set<string>(), health: [] as Array<number>, authorize: [] as Array<number>, seen: { health: new Set<string>(), authorize: new Set<string>() } } }
    for (let round = 0; round < ROUNDS * 2; round++) {
      const kind = round % 2 === 0 ? "hostile" as const : "ordinary" as const
      const b = bursts[kind]
      const send = await prepare(kind === "hostile")
      const flag = { done: false }
      const started = performance.now()
      const burst = send().then((answers) => (flag.done = true, b.ms += performance.now() - started, answers))
      const [answers, h, a] = await Promise.all([burst, probe(health, flag), probe(authorize, flag)])
      answers.forEach((x) => b.answers.add(x))
      b.health.push(...h.ms), b.authorize.push(...a.ms)
      h.answers.forEach((x) => b.seen.health.add(x)), a.answers.forEach((x) => b.seen.authorize.add(x))
    }
    bursts.hostile.answers.forEach((x) => refusals.add(x))
    const figures: Record<string, unknown> = { rounds: ROUNDS, alone, refusals: [...refusals].sort() }
    row("60 hostile inputs at once: ms until all answered", (bursts.hostile.ms / ROUNDS).toFixed(1), `ordinary ${(bursts.ordinary.ms / ROUNDS).toFixed(1)}`)
    row("hostile answers (every one a refusal)", [...refusals].sort().join(", "))
    row("ordinary answers", [...bursts.ordinary.answers].sort().join(", "))
    for (const kind of ["health", "authorize"] as const) {
      const base = stats(baseline[kind].ms), hit = stats(bursts.hostile[kind]), plain = stats(bursts.ordinary[kind])
      const label = kind === "health" ? "GET /health" : "POST /v1/authorize (Cedar)"
      row(`${label}: baseline p50 / p99 ms`, `${base.p50} / ${base.p99}`)
      row(`${label}, hostile burst: p50 ms (${hit.count} probes)`, hit.p50, `3× ${(base.p50 * 3).toFixed(2)}`, hit.p50 <= base.p50 * 3 ? "ok" : "over")
      row(`${label}, hostile burst: p99 ms`, hit.p99, `3× ${(base.p99 * 3).toFixed(2)}`, hit.p99 <= base.p99 * 3 ? "ok" : "over")
      row(`${label}, ordinary burst of 60: p50 / p99 ms`, `${plain.p50} / ${plain.p99}`, "(control)")
      const same = [...bursts.hostile.seen[kind]].every((a) => baseline[kind].answers.has(a))
      row(`${label}: answers as before`, [...bursts.hostile.seen[kind]].sort().join(", "), [...baseline[kind].answers].sort().join(", "), same ? "ok" : "changed")
      figures[kind] = { baseline: base, hostile: hit, ordinary: plain, answersAsBefore: same }
    }
    return figures
  } finally {
    await idp.stop()
    await server.stop()
  }
}

if (import.meta.main) {
  await run()
  process.exit(0)
}
