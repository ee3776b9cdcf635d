/**
 * Issue 7: vault exchanges per second next to two floors measured in the same run:
 *  - crypto floor: RS256 verification of the grant token + AES-256-GCM decryption of the stored
 *    secrets, alone, in-process (what an exchange cannot avoid);
 *  - HTTP floor: the service's GET /v1/me requests/second (gate, counters, envelope, no database).
 * Target: exchanges/s ≥ 60% of the lower floor. Limits are lifted with RATE_LIMIT_SCALE (the limiter
 * still runs). Each exchange also checks the grant online, reads the row, and commits its event and
 * audit-chain entry (one statement per batch of concurrent exchanges). A diagnostic row repeats the
 * comparison with 64 clients instead of 16.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { Grants } from "../../src/grants/Service.ts"
import { newId } from "../../src/platform/Ids.ts"
import { Keys } from "../../src/platform/Keys.ts"
import { openSync, VaultKeys } from "../../src/vault/Crypto.ts"
import { load, type LoadResult, makeCpuTally, opsPerSecond, row, rs256Check, startBenchServer } from "./support.ts"

const PRINCIPALS = 16

export async function run(): Promise<Record<string, unknown>> {
  const server = await startBenchServer({ VAULT_ENCRYPTION_KEYS: `bench:${randomBytes(32).toString("base64")}` })
  try {
    const signup = await fetch(`${server.url}/v1/signup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "vault-bench" })
    }).then((r) => r.json() as Promise<{ apiKey: string; developerId: string }>)
    const apiKey = signup.apiKey
    const developerId = signup.developerId
    await server.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE developers SET plan = 'enterprise' WHERE id = ${developerId}`))
    const agentId = newId("ag")
    await server.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql.unsafe(`INSERT INTO agents (id, developer_id, name, description, scopes, status, created_at, updated_at)
                  VALUES ($1, $2, 'bench', NULL, $3, 'active', now(), now())`, [agentId, developerId, ["github:read"]] as any)))

    const tokens: Array<string> = []
    const unscoped: Array<string> = []
    for (let i = 0; i < PRINCIPALS; i++) {
      const principalId = `bench_user_${i}`
      const stored = await fetch(`${server.url}/v1/vault/credentials`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ principalId, service: "github", accessToken: `gho_${randomBytes(20).toString("hex")}`, metadata: { i } })
      })
      if (stored.status !== 201) throw new Error(`store failed: ${stored.status}`)
      const token = await server.run(Effect.gen(function*() {
        const grants = yield* Grants
        const grant = yield* grants.create({
          developerId,
          agentId,
          principalId,
          scopes: ["github:read"],
          expiresAt: new Date(Date.now() + 3600_000)
        })
        return (yield* grants.issueToken(grant)).grantToken
      }))
      tokens.push(token)
      unscoped.push(await server.run(Effect.gen(function*() {
        const grants = yield* Grants
        const grant = yield* grants.create({ developerId, agentId, principalId, scopes: ["calendar:read"], expiresAt: new Date(Date.now() + 3600_000) })
        return (yield* grants.issueToken(grant)).grantToken
      })))
    }

    // Crypto floor: verify + decrypt alone, in-process.
    const keys = await server.run(Keys)
    const ring = await server.run(VaultKeys)
    const [credential] = await server.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<any>`SELECT id, developer_id, principal_id, service, key_id, iv, ciphertext FROM vault_credentials WHERE principal_id = 'bench_user_0'`))
    const checkSignature = rs256Check(tokens[0]!, keys.jwks.keys[0]!)
    const cryptoOp = async () => {
      if (!checkSignature()) throw new Error("verify failed")
      const plain = openSync(ring, credential, credential)
      if (typeof plain !== "string") throw new Error("decrypt failed")
    }
    await opsPerSecond(cryptoOp, 0.3)

    let next = 0
    const exchange = () => {
      const token = tokens[next++ % tokens.length]!
      return fetch(`${server.url}/v1/vault/credentials/exchange`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: '{"service":"github"}'
      }).then(async (r) => (await r.arrayBuffer(), r.status === 200))
    }
    // diagnostic: the same route answered 403 after the token, online grant check and lookup (no decrypt, no write)
    const forbidden = () => {
      const token = unscoped[next++ % unscoped.length]!
      return fetch(`${server.url}/v1/vault/credentials/exchange`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: '{"service":"github"}'
      }).then(async (r) => (await r.arrayBuffer(), r.status === 403))
    }
    const me = () =>
      fetch(`${server.url}/v1/me`, { headers: { authorization: `Bearer ${apiKey}` } }).then(async (r) => (await r.arrayBuffer(), r.ok))

    const mean = (xs: Array<number>) => Math.round(xs.reduce((a, b) => a + b, 0) / xs.length)
    // Rounds alternate so background load on the machine falls on every figure alike.
    const rounds = { exchange: [] as Array<LoadResult>, me: [] as Array<LoadResult>, crypto: [] as Array<number>, forbidden: [] as Array<LoadResult> }
    // CPU per request, main thread (the event loop) and whole machine, over the rounds
    const tally = { me: makeCpuTally(), exchange: makeCpuTally() }
    for (let i = 0; i < 3; i++) {
      rounds.crypto.push(await opsPerSecond(cryptoOp, 1))
      rounds.me.push(await tally.me.measure(me, 2))
      rounds.exchange.push(await tally.exchange.measure(exchange, 2))
      rounds.forbidden.push(await load(forbidden, { seconds: 1, concurrency: 16, warmupSeconds: 0.1 }))
    }
    // diagnostic: more agents at once (exchanges commit in groups, so they gain from concurrency)
    const wide = { me: [] as Array<LoadResult>, exchange: [] as Array<LoadResult> }
    for (let i = 0; i < 2; i++) {
      wide.me.push(await load(me, { seconds: 1.5, concurrency: 64, warmupSeconds: 0.2 }))
      wide.exchange.push(await load(exchange, { seconds: 1.5, concurrency: 64, warmupSeconds: 0.2 }))
    }
    const wideMe = mean(wide.me.map((r) => r.perSecond))
    const wideExchanges = mean(wide.exchange.map((r) => r.perSecond))
    const forbiddenPerSecond = mean(rounds.forbidden.map((r) => r.perSecond))
    const cryptoFloor = mean(rounds.crypto)
    const httpFloor = mean(rounds.me.map((r) => r.perSecond))
    const exchanges = mean(rounds.exchange.map((r) => r.perSecond))
    const errors = rounds.exchange.reduce((a, r) => a + r.errors, 0)
    const lowerFloor = Math.min(cryptoFloor, httpFloor)
    const ratio = exchanges / lowerFloor
    const p50 = Number((rounds.exchange.reduce((a, r) => a + r.p50Ms, 0) / rounds.exchange.length).toFixed(2))
    const p99 = Number((rounds.exchange.reduce((a, r) => a + r.p99Ms, 0) / rounds.exchange.length).toFixed(2))

    row("crypto floor: RS256 verify + AES-GCM decrypt /s", cryptoFloor)
    row("HTTP floor: GET /v1/me req/s", httpFloor)
    row(
      "POST /v1/vault/credentials/exchange req/s",
      exchanges,
      lowerFloor,
      `${ratio >= 0.6 ? "PASS" : "FAIL"} (${(ratio * 100).toFixed(0)}% of the lower floor; target ≥ 60%)`
    )
    row("  exchange p50 / p99 ms", `${p50} / ${p99}`)
    row("  exchange errors (non-200)", errors)
    row("  diagnostic: same route, 403 after grant check + lookup", forbiddenPerSecond)
    // Why the ratio stops where it does: with the event loop busy, throughput goes as the inverse
    // of its CPU per request, so the ratio cannot pass /me's CPU per request over the exchange's.
    const cpuMe = tally.me.perRequest()
    const cpuExchange = tally.exchange.perRequest()
    const ceiling = cpuMe.main / cpuExchange.main
    if (Number.isFinite(ceiling)) {
      row(
        "  main-thread CPU per request µs (exchange vs /me)",
        Math.round(cpuExchange.main),
        Math.round(cpuMe.main),
        `with the event loop saturated the exchange reaches at best ${(ceiling * 100).toFixed(0)}% of the HTTP floor`
      )
      row("  machine CPU per request µs (exchange vs /me)", Math.round(cpuExchange.machine), Math.round(cpuMe.machine))
    }
    row(
      "  diagnostic: exchanges/s with 64 clients (vs GET /v1/me with 64)",
      wideExchanges,
      wideMe,
      `${((wideExchanges / wideMe) * 100).toFixed(0)}%`
    )
    return {
      cryptoFloorPerSecond: cryptoFloor,
      httpFloorPerSecond: httpFloor,
      exchangesPerSecond: exchanges,
      percentOfLowerFloor: Number((ratio * 100).toFixed(1)),
      target: "≥ 60% of the lower floor",
      pass: ratio >= 0.6,
      exchangeP50Ms: p50,
      exchangeP99Ms: p99,
      exchangeErrors: errors,
      forbiddenPathPerSecond: forbiddenPerSecond,
      exchangesPerSecondWith64Clients: wideExchanges,
      httpFloorPerSecondWith64Clients: wideMe,
      mainThreadMicrosPerExchange: Math.round(cpuExchange.main),
      mainThreadMicrosPerMe: Math.round(cpuMe.main),
      machineMicrosPerExchange: Math.round(cpuExchange.machine),
      machineMicrosPerMe: Math.round(cpuMe.machine)
    }
  } finally {
    await server.stop()
  }
}

if (import.meta.main) {
  await run()
  process.exit(0)
}
